//! Interop: the Couchbase C++ SDK sends a client nonce that is not base64 but text like
//! `0x02 0xffffff9b 0x05 0x6a ...` (with spaces). The server must echo it verbatim.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{rng, store, PASSWORD, USER};
use sluice_sasl::{ClientSession, ClientStep, Mechanism, ServerSession, Step};

const CPP_NONCE: &str = "0x02 0xffffff9b 0x05 0x6a 0xffffffc4 0x1f 0x7e 0x30 ";

#[test]
fn space_separated_hex_nonce_authenticates() {
    let store = store();
    for mechanism in [
        Mechanism::ScramSha512,
        Mechanism::ScramSha256,
        Mechanism::ScramSha1,
    ] {
        let mut client = ClientSession::with_nonce(mechanism, USER, PASSWORD, CPP_NONCE).unwrap();
        let expected_first = format!("n,,n={USER},r={CPP_NONCE}");
        assert_eq!(client.initial_message(), expected_first.as_bytes());

        let (mut server, step) = ServerSession::start(
            mechanism.name(),
            client.initial_message(),
            &store,
            &mut rng(5),
        );
        let Step::Continue(challenge) = step else {
            panic!("{mechanism}: {step:?}");
        };
        let challenge_text = String::from_utf8(challenge.clone()).unwrap();
        assert!(
            challenge_text.starts_with(&format!("r={CPP_NONCE}")),
            "{challenge_text}"
        );

        let ClientStep::Continue(client_final) = client.step(&challenge) else {
            panic!("{mechanism}: client rejected challenge");
        };
        let Step::Success { final_message, .. } = server.step(&client_final) else {
            panic!("{mechanism}: server rejected proof");
        };
        assert_eq!(client.step(&final_message), ClientStep::Done);
    }
}
