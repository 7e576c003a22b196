//! A plain authenticated KV connection for tests: one request, one answer.

#![allow(dead_code)]

use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Answer {
    pub status: u16,
    pub cas: u64,
    pub key: Vec<u8>,
    pub extras: Vec<u8>,
    pub value: Vec<u8>,
}

pub struct Kv {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Kv {
    pub async fn open(addr: SocketAddr) -> Kv {
        Kv::open_as(addr, "Administrator", "password").await
    }

    /// Logged in as `user` (SASL PLAIN), bucket `default` selected.
    pub async fn open_as(addr: SocketAddr, user: &str, password: &str) -> Kv {
        Kv::open_with_features(addr, user, password, &[]).await
    }

    /// As [`Kv::open_as`], after a HELLO asking for `features` (all must be acknowledged).
    pub async fn open_with_features(
        addr: SocketAddr,
        user: &str,
        password: &str,
        features: &[u16],
    ) -> Kv {
        let mut kv = Kv {
            s: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
        };
        if !features.is_empty() {
            let asked: Vec<u8> = features.iter().flat_map(|f| f.to_be_bytes()).collect();
            let hello = kv
                .call(Packet::request(0x1f, 0, 0).key(b"test").value(&asked))
                .await;
            assert_eq!(
                (hello.status, &hello.value),
                (0, &asked),
                "HELLO {features:x?}"
            );
        }
        let plain = format!("\0{user}\0{password}");
        let auth = kv
            .call(
                Packet::request(0x21, 0, 1)
                    .key(b"PLAIN")
                    .value(plain.as_bytes()),
            )
            .await;
        assert_eq!(auth.status, 0, "login as {user}");
        assert_eq!(
            kv.call(Packet::request(0x89, 0, 2).key(b"default"))
                .await
                .status,
            0
        );
        kv
    }

    /// The socket and what was read past the last answer.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        (self.s, self.buf)
    }

    pub async fn call(&mut self, p: Packet<'_>) -> Answer {
        self.s.write_all(&p.to_vec()).await.unwrap();
        self.answer().await
    }

    /// STAT `group`: every key and value, up to the empty key that ends the answer.
    pub async fn stats(&mut self, group: &[u8]) -> std::collections::BTreeMap<String, String> {
        let p = Packet::request(0x10, 0, 0x57a7).key(group);
        self.s.write_all(&p.to_vec()).await.unwrap();
        let mut out = std::collections::BTreeMap::new();
        loop {
            let a = self.answer().await;
            assert_eq!(a.status, 0, "STAT {}", String::from_utf8_lossy(group));
            if a.key.is_empty() {
                return out;
            }
            out.insert(
                String::from_utf8(a.key).unwrap(),
                String::from_utf8(a.value).unwrap(),
            );
        }
    }

    /// The next answer on the connection.
    async fn answer(&mut self) -> Answer {
        loop {
            if let Decoded::Frame(f, used) = decode_frame(&self.buf, 1 << 26).unwrap() {
                let a = Answer {
                    status: f.vbucket_or_status,
                    cas: f.cas,
                    key: f.key.to_vec(),
                    extras: f.extras.to_vec(),
                    value: f.value.to_vec(),
                };
                self.buf.drain(..used);
                return a;
            }
            let mut chunk = [0u8; 65536];
            let n =
                tokio::time::timeout(std::time::Duration::from_secs(10), self.s.read(&mut chunk))
                    .await
                    .expect("answer within 10 s")
                    .unwrap();
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub async fn get(&mut self, key: &[u8], vb: u16) -> Answer {
        self.call(Packet::request(0x00, vb, 9).key(key)).await
    }

    pub async fn get_replica(&mut self, key: &[u8], vb: u16) -> Answer {
        self.call(Packet::request(0x83, vb, 9).key(key)).await
    }

    pub async fn set(&mut self, key: &[u8], value: &[u8], vb: u16) -> Answer {
        self.call(
            Packet::request(0x01, vb, 9)
                .key(key)
                .extras(&[0u8; 8])
                .value(value),
        )
        .await
    }
}
