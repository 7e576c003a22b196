//! A fake Sluice KV port: HELLO, SCRAM-SHA512 (a real `sluice-sasl` server session),
//! SELECT_BUCKET, a 16-vbucket cluster map, and GET / SET on a shared map. A key sent to the
//! wrong vbucket gets NOT_MY_VBUCKET, so the bench's routing is checked too.

use rand::rngs::OsRng;
use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded, Opcode, Status};
use sluice_sasl::{MemoryCredentialStore, ServerSession, Step};
use sluice_types::vbucket_of;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const VBUCKETS: u16 = 16;

type Docs = Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>;

/// Serves until the test's runtime ends.
pub async fn start() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut store = MemoryCredentialStore::new(&mut OsRng);
    store
        .add_user("Administrator", "password", &mut OsRng)
        .unwrap();
    let store = Arc::new(store);
    let docs = Docs::default();
    tokio::spawn(async move {
        loop {
            let (sock, _) = listener.accept().await.unwrap();
            tokio::spawn(serve(sock, store.clone(), docs.clone()));
        }
    });
    addr
}

async fn serve(mut sock: TcpStream, store: Arc<MemoryCredentialStore>, docs: Docs) {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut sasl: Option<ServerSession> = None;
    loop {
        // Answer everything buffered, then write once (the bench pipelines).
        while let Ok(Decoded::Frame(f, used)) = decode_frame(&buf, 1 << 26) {
            let op = Opcode::from_byte(f.opcode).unwrap();
            let ok = Packet::response(f.opcode, Status::Success, f.opaque);
            let status = |s| Packet::response(f.opcode, s, f.opaque);
            match op {
                Opcode::Hello => ok.value(f.value).encode_into(&mut out),
                Opcode::SaslAuth | Opcode::SaslStep => {
                    let step = match sasl.as_mut() {
                        None => {
                            let (s, step) =
                                ServerSession::start("SCRAM-SHA512", f.value, &*store, &mut OsRng);
                            sasl = Some(s);
                            step
                        }
                        Some(s) => s.step(f.value),
                    };
                    match step {
                        Step::Continue(c) => {
                            status(Status::AuthContinue).value(&c).encode_into(&mut out)
                        }
                        Step::Success { final_message, .. } => {
                            ok.value(&final_message).encode_into(&mut out)
                        }
                        Step::Failure(_) => status(Status::AuthError).encode_into(&mut out),
                    }
                }
                Opcode::SelectBucket => ok.encode_into(&mut out),
                Opcode::GetClusterConfig => {
                    let map = vec!["[0]"; usize::from(VBUCKETS)].join(",");
                    let json =
                        format!(r#"{{"rev":1,"vBucketServerMap":{{"vBucketMap":[{map}]}}}}"#);
                    ok.value(json.as_bytes()).encode_into(&mut out)
                }
                Opcode::Get | Opcode::Set
                    if f.vbucket_or_status != vbucket_of(f.key, VBUCKETS).0 =>
                {
                    status(Status::NotMyVbucket).encode_into(&mut out)
                }
                Opcode::Get => match docs.lock().unwrap().get(f.key) {
                    Some(v) => ok.extras(&[0; 4]).value(v).encode_into(&mut out),
                    None => status(Status::KeyEnoent).encode_into(&mut out),
                },
                Opcode::Set => {
                    docs.lock()
                        .unwrap()
                        .insert(f.key.to_vec(), f.value.to_vec());
                    ok.cas(1).encode_into(&mut out)
                }
                other => panic!("the fake does not know {other:?}"),
            }
            buf.drain(..used);
        }
        if !out.is_empty() {
            if sock.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        let mut chunk = [0u8; 65536];
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
