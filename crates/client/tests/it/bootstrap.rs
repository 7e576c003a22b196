//! The full bootstrap against a scripted server that runs a real SCRAM server session:
//! HELLO → SASL_AUTH → SASL_STEP → SELECT_BUCKET → GET_CLUSTER_CONFIG, then key routing.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{answer, scripted_server, Reply, Req};
use rand::rngs::OsRng;
use sluice_client::{Client, ClientError, ConnectOptions, Feature, Opcode, Status};
use sluice_sasl::{MemoryCredentialStore, ServerSession, Step};
use sluice_types::vbucket_of;

const VBUCKETS: usize = 64;

fn config_json() -> String {
    let map = vec!["[0]"; VBUCKETS].join(",");
    format!(
        r#"{{"rev":1,"name":"default","vBucketServerMap":{{"numReplicas":0,"vBucketMap":[{map}]}}}}"#
    )
}

/// A server knowing `user`/`password` that lets `tamper` change its final SCRAM message.
async fn server(password: &str, tamper: fn(Vec<u8>) -> Vec<u8>) -> std::net::SocketAddr {
    let mut store = MemoryCredentialStore::new(&mut OsRng);
    store
        .add_user("Administrator", password, &mut OsRng)
        .unwrap();
    let mut session: Option<ServerSession> = None;
    scripted_server(move |req: Req| {
        let op = Opcode::from_byte(req.opcode).unwrap();
        let bytes = match op {
            Opcode::Hello => {
                assert!(req.key.starts_with(b"sluice-client/"));
                // Agree to everything asked except JSON, to see the client keep the answer.
                let agreed: Vec<u8> = req
                    .value
                    .chunks(2)
                    .filter(|c| *c != Feature::Json.code().to_be_bytes())
                    .flatten()
                    .copied()
                    .collect();
                answer(&req, Status::Success).value(&agreed).to_vec()
            }
            Opcode::SaslAuth | Opcode::SaslStep => {
                assert_eq!(req.key, b"SCRAM-SHA512");
                let step = match session.as_mut() {
                    None => {
                        let (s, step) =
                            ServerSession::start("SCRAM-SHA512", &req.value, &store, &mut OsRng);
                        session = Some(s);
                        step
                    }
                    Some(s) => s.step(&req.value),
                };
                match step {
                    Step::Continue(c) => answer(&req, Status::AuthContinue).value(&c).to_vec(),
                    Step::Success { final_message, .. } => {
                        let m = tamper(final_message);
                        answer(&req, Status::Success).value(&m).to_vec()
                    }
                    Step::Failure(_) => answer(&req, Status::AuthError).to_vec(),
                }
            }
            Opcode::SelectBucket => {
                assert_eq!(req.key, b"default");
                answer(&req, Status::Success).to_vec()
            }
            Opcode::GetClusterConfig => answer(&req, Status::Success)
                .datatype(1)
                .value(config_json().as_bytes())
                .to_vec(),
            Opcode::Get => {
                // Routing check: the client must hash the key over the map's 64 vbuckets.
                let want = vbucket_of(&req.key, VBUCKETS as u16).0;
                assert_eq!(req.vb, want, "vbucket for {:?}", req.key);
                answer(&req, Status::Success)
                    .extras(&[0, 0, 0, 9])
                    .value(b"doc")
                    .to_vec()
            }
            other => panic!("unexpected {other:?}"),
        };
        Reply::Bytes(bytes)
    })
    .await
}

#[tokio::test]
async fn bootstraps_and_routes_keys_by_the_cluster_map() {
    let addr = server("password", |m| m).await;
    let mut c = Client::connect(
        addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();
    assert_eq!(c.num_vbuckets(), Some(VBUCKETS as u16));
    assert!(c.has_feature(Feature::MutationSeqno) && c.has_feature(Feature::Xerror));
    assert!(
        !c.has_feature(Feature::Json),
        "the server did not agree to JSON"
    );
    for key in [&b"a"[..], b"hello", b"key:0000000000000000000000000042"] {
        let got = c.get(key).await.unwrap();
        assert_eq!((&got.value[..], got.flags), (&b"doc"[..], 9));
    }
}

#[tokio::test]
async fn wrong_password_is_the_servers_auth_error() {
    let addr = server("other", |m| m).await;
    let err = Client::connect(
        addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap_err();
    assert_eq!(err.status(), Some(Status::AuthError), "{err}");
}

#[tokio::test]
async fn a_forged_server_signature_is_rejected() {
    // Flip one character of v=…: the server claims success without proving the password.
    let addr = server("password", |mut m| {
        assert!(m.starts_with(b"v="));
        m[5] = if m[5] == b'A' { b'B' } else { b'A' };
        m
    })
    .await;
    let err = Client::connect(
        addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ClientError::Auth(_)), "{err}");
}
