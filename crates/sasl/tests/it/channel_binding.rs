//! GS2 channel-binding flags: `n,,` and `y,,` are accepted, `p=...` is rejected (no
//! -PLUS mechanisms), and client-final's `c=` must echo the header exactly.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{rng, store, PASSWORD, USER};
use sluice_sasl::{
    AuthError, ClientSession, ClientStep, Mechanism, ParseError, ServerSession, Step,
};

#[test]
fn p_flag_rejected() {
    let store = store();
    let first = format!("p=tls-server-end-point,,n={USER},r=abc");
    let (_, step) = ServerSession::start("SCRAM-SHA256", first.as_bytes(), &store, &mut rng(1));
    assert_eq!(
        step,
        Step::Failure(AuthError::Malformed(ParseError::ChannelBindingRequested))
    );
}

/// An independent SCRAM-SHA-1 client-final computation (straight from RFC 5802 §3),
/// used because `ClientSession` always sends `n,,`.
fn manual_sha1_client_final(gs2: &str, bare: &str, server_first: &str, password: &str) -> String {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use sha1::{Digest, Sha1};

    let hmac = |key: &[u8], data: &[u8]| {
        let mut m = Hmac::<Sha1>::new_from_slice(key).unwrap();
        m.update(data);
        m.finalize().into_bytes().to_vec()
    };
    let attr = |name: &str| {
        server_first
            .split(',')
            .find_map(|p| p.strip_prefix(name))
            .unwrap()
            .to_owned()
    };
    let (nonce, salt, iterations) = (attr("r="), STANDARD.decode(attr("s=")).unwrap(), attr("i="));
    let mut salted = [0u8; 20];
    pbkdf2::pbkdf2_hmac::<Sha1>(
        password.as_bytes(),
        &salt,
        iterations.parse().unwrap(),
        &mut salted,
    );
    let client_key = hmac(&salted, b"Client Key");
    let stored_key = Sha1::digest(&client_key);
    let without_proof = format!("c={},r={nonce}", STANDARD.encode(gs2));
    let auth_message = format!("{bare},{server_first},{without_proof}");
    let signature = hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    format!("{without_proof},p={}", STANDARD.encode(proof))
}

#[test]
fn y_flag_accepted() {
    let store = store();
    let bare = format!("n={USER},r=client-nonce");
    let first = format!("y,,{bare}");
    let (mut server, step) =
        ServerSession::start("SCRAM-SHA1", first.as_bytes(), &store, &mut rng(2));
    let Step::Continue(challenge) = step else {
        panic!("{step:?}");
    };
    let server_first = String::from_utf8(challenge).unwrap();
    let client_final = manual_sha1_client_final("y,,", &bare, &server_first, PASSWORD);
    assert!(client_final.starts_with("c=eSws,"));
    assert!(matches!(
        server.step(client_final.as_bytes()),
        Step::Success { username, .. } if username == USER
    ));
}

#[test]
fn tampered_c_attribute_rejected() {
    let store = store();
    let mut client =
        ClientSession::with_nonce(Mechanism::ScramSha512, USER, PASSWORD, "n1").unwrap();
    let (mut server, step) = ServerSession::start(
        "SCRAM-SHA512",
        client.initial_message(),
        &store,
        &mut rng(3),
    );
    let Step::Continue(challenge) = step else {
        panic!("{step:?}");
    };
    let ClientStep::Continue(client_final) = client.step(&challenge) else {
        panic!("client rejected challenge");
    };
    let tampered = String::from_utf8(client_final)
        .unwrap()
        .replacen("c=biws", "c=eSws", 1);
    assert_eq!(
        server.step(tampered.as_bytes()),
        Step::Failure(AuthError::ChannelBindingMismatch)
    );
}
