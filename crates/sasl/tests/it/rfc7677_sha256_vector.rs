//! RFC 7677 §3 example exchange (SCRAM-SHA-256, user "user", password "pencil"), checked
//! byte for byte from both sides. The server nonce contains `%`, `)` and `$`, which
//! exercises the "opaque printable text" nonce handling.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sluice_sasl::{
    ClientSession, ClientStep, Mechanism, MemoryCredentialStore, ScramCredentials, ScramHash,
    ServerSession, Step, UserCredentials,
};

const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

#[test]
fn client_produces_rfc_proof_and_accepts_rfc_signature() {
    let mut client =
        ClientSession::with_nonce(Mechanism::ScramSha256, "user", "pencil", CLIENT_NONCE).unwrap();
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
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let sha256 = ScramCredentials::derive(ScramHash::Sha256, "pencil", &salt, 4096).unwrap();
    let user = UserCredentials::new("user", "pencil", &mut rng)
        .unwrap()
        .with_scram(sha256);
    let mut store = MemoryCredentialStore::new(&mut rng);
    store.insert(user);

    // The IANA spelling is accepted as an alias of SCRAM-SHA256.
    let (mut session, step) = ServerSession::start_with_nonce(
        "SCRAM-SHA-256",
        CLIENT_FIRST.as_bytes(),
        &store,
        SERVER_NONCE,
    );
    assert_eq!(step, Step::Continue(SERVER_FIRST.as_bytes().to_vec()));
    assert_eq!(session.mechanism(), Some(Mechanism::ScramSha256));
    assert_eq!(
        session.step(CLIENT_FINAL.as_bytes()),
        Step::Success {
            username: "user".into(),
            final_message: SERVER_FINAL.as_bytes().to_vec(),
        }
    );
}
