//! The client verifies the server's final `v=` signature: an impostor server that does
//! not know the user's keys is detected, and `e=` errors are surfaced.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{rng, store, PASSWORD, USER};
use sluice_sasl::{AuthError, ClientSession, ClientStep, Mechanism, ServerSession, Step};

/// Runs the exchange up to the server's final message and returns (client, final).
fn until_final(mech: Mechanism) -> (ClientSession, Vec<u8>) {
    let store = store();
    let mut client = ClientSession::new(mech, USER, PASSWORD, &mut rng(11)).unwrap();
    let (mut server, step) =
        ServerSession::start(mech.name(), client.initial_message(), &store, &mut rng(12));
    let Step::Continue(challenge) = step else {
        panic!("{step:?}");
    };
    let ClientStep::Continue(fin) = client.step(&challenge) else {
        panic!("client rejected challenge");
    };
    let Step::Success { final_message, .. } = server.step(&fin) else {
        panic!("server rejected proof");
    };
    (client, final_message)
}

#[test]
fn tampered_signature_rejected() {
    for mech in [
        Mechanism::ScramSha512,
        Mechanism::ScramSha256,
        Mechanism::ScramSha1,
    ] {
        let (mut client, mut final_message) = until_final(mech);
        // Flip a character inside the base64 signature (after "v=").
        let i = 4;
        final_message[i] = if final_message[i] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            client.step(&final_message),
            ClientStep::Failure(AuthError::InvalidServerSignature),
            "{mech}"
        );
    }
}

#[test]
fn server_error_surfaced() {
    let (mut client, _) = until_final(Mechanism::ScramSha1);
    assert_eq!(
        client.step(b"e=invalid-proof"),
        ClientStep::Failure(AuthError::ServerError("invalid-proof".into()))
    );
}

#[test]
fn genuine_signature_accepted_once() {
    let (mut client, final_message) = until_final(Mechanism::ScramSha512);
    assert_eq!(client.step(&final_message), ClientStep::Done);
    assert_eq!(
        client.step(&final_message),
        ClientStep::Failure(AuthError::SessionFinished)
    );
}
