//! RFC 5802 §5 example exchange (SCRAM-SHA-1, user "user", password "pencil"), checked
//! byte for byte from both sides.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sluice_sasl::{
    ClientSession, ClientStep, Mechanism, MemoryCredentialStore, ScramCredentials, ScramHash,
    ServerSession, Step, UserCredentials,
};

const CLIENT_NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";
const SERVER_NONCE: &str = "3rfcNHYJY1ZVvWVs7j";
const CLIENT_FIRST: &str = "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL";
const SERVER_FIRST: &str = "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096";
const CLIENT_FINAL: &str =
    "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=";
const SERVER_FINAL: &str = "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=";

#[test]
fn client_produces_rfc_proof_and_accepts_rfc_signature() {
    let mut client =
        ClientSession::with_nonce(Mechanism::ScramSha1, "user", "pencil", CLIENT_NONCE).unwrap();
    assert_eq!(client.initial_message(), CLIENT_FIRST.as_bytes());
    assert_eq!(
        client.step(SERVER_FIRST.as_bytes()),
        ClientStep::Continue(CLIENT_FINAL.as_bytes().to_vec())
    );
    assert_eq!(client.step(SERVER_FINAL.as_bytes()), ClientStep::Done);
}

#[test]
fn server_produces_rfc_challenge_and_signature() {
    let mut rng = StdRng::seed_from_u64(0);
    let salt = STANDARD.decode("QSXCR+Q6sek8bf92").unwrap();
    let sha1 = ScramCredentials::derive(ScramHash::Sha1, "pencil", &salt, 4096).unwrap();
    let user = UserCredentials::new("user", "pencil", &mut rng)
        .unwrap()
        .with_scram(sha1);
    let mut store = MemoryCredentialStore::new(&mut rng);
    store.insert(user);

    let (mut session, step) = ServerSession::start_with_nonce(
        "SCRAM-SHA1",
        CLIENT_FIRST.as_bytes(),
        &store,
        SERVER_NONCE,
    );
    assert_eq!(step, Step::Continue(SERVER_FIRST.as_bytes().to_vec()));
    assert_eq!(
        session.step(CLIENT_FINAL.as_bytes()),
        Step::Success {
            username: "user".into(),
            final_message: SERVER_FINAL.as_bytes().to_vec(),
        }
    );
    assert!(session.is_finished());
}
