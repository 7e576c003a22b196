//! TLS: a node with a certificate serves the KV protocol and the admin HTTP on TLS ports
//! beside the cleartext ones; the map lists them as `kvSSL` / `mgmtSSL`; SASL PLAIN is
//! offered over TLS (and only there); a client that never finishes its handshake, or speaks
//! cleartext to the TLS port, is dropped; a node whose certificate cannot be read does not
//! start; `POST /node/controller/reloadCertificate` serves new certificate files to new
//! connections without a restart, and keeps the old one when the new files are bad.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use rustls::pki_types::{CertificateDer, ServerName};
use sluice_engine::BucketType;
use sluice_server::tls::TlsFiles;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(10);

/// A CA and a certificate for 127.0.0.1 signed by it, written under `dir`: the node's files
/// and the CA a client trusts.
fn make_certs(dir: &std::path::Path) -> (TlsFiles, CertificateDer<'static>) {
    let (files, ca) = common::certs::make_certs(dir);
    (files, ca.der)
}

async fn tls_connect(
    port: u16,
    ca: &CertificateDer<'static>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    try_tls_connect(port, ca).await.unwrap()
}

/// A TLS connection trusting only `ca`, or why the handshake failed.
async fn try_tls_connect(
    port: u16,
    ca: &CertificateDer<'static>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio::time::timeout(T, connector.connect(name, tcp))
        .await
        .unwrap()
}

/// One request, its answer: (status, value).
async fn call<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    opcode: u8,
    key: &[u8],
    extras: &[u8],
    value: &[u8],
) -> (u16, Vec<u8>) {
    let body = extras.len() + key.len() + value.len();
    let mut p = vec![0x80, opcode];
    p.extend_from_slice(&(key.len() as u16).to_be_bytes());
    p.push(extras.len() as u8);
    p.push(0); // datatype
    p.extend_from_slice(&0u16.to_be_bytes()); // vbucket 0
    p.extend_from_slice(&(body as u32).to_be_bytes());
    p.extend_from_slice(&7u32.to_be_bytes()); // opaque
    p.extend_from_slice(&0u64.to_be_bytes()); // cas
    p.extend_from_slice(extras);
    p.extend_from_slice(key);
    p.extend_from_slice(value);
    s.write_all(&p).await.unwrap();
    s.flush().await.unwrap();
    let mut h = [0u8; 24];
    tokio::time::timeout(T, s.read_exact(&mut h))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(h[0], 0x81, "a response");
    assert_eq!(h[1], opcode);
    let status = u16::from_be_bytes([h[6], h[7]]);
    let (klen, elen) = (u16::from_be_bytes([h[2], h[3]]) as usize, h[4] as usize);
    let blen = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let mut b = vec![0u8; blen];
    s.read_exact(&mut b).await.unwrap();
    (status, b[elen + klen..].to_vec())
}

const SASL_LIST_MECHS: u8 = 0x20;
const SASL_AUTH: u8 = 0x21;
const SELECT_BUCKET: u8 = 0x89;
const SET: u8 = 0x01;
const GET: u8 = 0x00;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_and_admin_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (files, ca) = make_certs(dir.path());
    let mut cfg = common::loopback_config(&dir.path().join("data"), BucketType::Ephemeral, 4, 64);
    cfg.tls = Some(files);
    cfg.kv_tls_port = 0;
    cfg.admin_tls_port = 0;
    let running = sluice_manager::start(cfg).await.unwrap();
    let tls = running.node.tls_ports().expect("TLS ports bound");

    // KV over TLS: PLAIN is offered and works; documents go in and come out.
    let mut s = tls_connect(tls.kv, &ca).await;
    let (st, mechs) = call(&mut s, SASL_LIST_MECHS, b"", b"", b"").await;
    assert_eq!(st, 0);
    let mechs = String::from_utf8(mechs).unwrap();
    assert!(mechs.split(' ').any(|m| m == "PLAIN"), "{mechs}");
    assert!(mechs.contains("SCRAM-SHA512"), "{mechs}");
    let (st, _) = call(
        &mut s,
        SASL_AUTH,
        b"PLAIN",
        b"",
        b"\0Administrator\0password",
    )
    .await;
    assert_eq!(st, 0, "PLAIN over TLS");
    let (st, _) = call(&mut s, SELECT_BUCKET, b"default", b"", b"").await;
    assert_eq!(st, 0);
    let (st, _) = call(&mut s, SET, b"k", &[0u8; 8], b"over tls").await;
    assert_eq!(st, 0);
    let (st, v) = call(&mut s, GET, b"k", b"", b"").await;
    assert_eq!((st, v.as_slice()), (0, b"over tls".as_slice()));
    // A wrong password over TLS is refused like anywhere else.
    let mut bad = tls_connect(tls.kv, &ca).await;
    let (st, _) = call(
        &mut bad,
        SASL_AUTH,
        b"PLAIN",
        b"",
        b"\0Administrator\0wrong",
    )
    .await;
    assert_eq!(st, 0x20, "AUTH_ERROR");

    // The cleartext port still offers no PLAIN.
    let mut plain = TcpStream::connect(running.kv_addr).await.unwrap();
    let (_, mechs) = call(&mut plain, SASL_LIST_MECHS, b"", b"", b"").await;
    assert!(!String::from_utf8(mechs).unwrap().contains("PLAIN"));

    // The admin port over TLS: the bucket's map, whose nodesExt names the TLS ports.
    let mut h = tls_connect(tls.admin, &ca).await;
    let auth = sluice_sasl::basic_header("Administrator", "password");
    let req = format!(
        "GET /pools/default/b/default HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    h.write_all(req.as_bytes()).await.unwrap();
    h.flush().await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(T, h.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
    let doc: serde_json::Value = serde_json::from_str(body).unwrap();
    let services = &doc["nodesExt"][0]["services"];
    assert_eq!(services["kvSSL"], tls.kv, "{services}");
    assert_eq!(services["mgmtSSL"], tls.admin, "{services}");
    assert_eq!(services["kv"], running.kv_addr.port(), "{services}");

    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_port_drops_cleartext_and_silent_clients() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = make_certs(dir.path());
    let mut cfg = common::loopback_config(&dir.path().join("data"), BucketType::Ephemeral, 4, 64);
    cfg.tls = Some(files);
    cfg.kv_tls_port = 0;
    cfg.admin_tls_port = 0;
    cfg.auth_timeout = Duration::from_millis(500);
    let running = sluice_manager::start(cfg).await.unwrap();
    let tls = running.node.tls_ports().unwrap();

    for port in [tls.kv, tls.admin] {
        // Cleartext memcached bytes are no TLS ClientHello: the server closes.
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(&[
            0x80, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ])
        .await
        .unwrap();
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(T, s.read(&mut buf)).await.unwrap();
        // Either an alert then EOF, or EOF / reset: never a memcached answer.
        if let Ok(n) = n {
            assert!(n == 0 || buf[0] == 0x15, "port {port}: {:?}", &buf[..n]);
        }
        // Silence: closed at the handshake timeout.
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let started = std::time::Instant::now();
        let n = tokio::time::timeout(T, s.read(&mut buf)).await.unwrap();
        assert!(matches!(n, Ok(0) | Err(_)), "port {port}: {n:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    running.shutdown().await.unwrap();
}

#[test]
fn a_node_whose_certificate_cannot_be_read_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::loopback_config(dir.path(), BucketType::Ephemeral, 4, 64);
    cfg.tls = Some(TlsFiles {
        cert: dir.path().join("missing.pem"),
        key: dir.path().join("missing-key.pem"),
    });
    let err = sluice_server::Node::open(cfg).err().expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("TLS") && msg.contains("missing.pem"), "{msg}");
    // Not PEM at all.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let mut cfg = common::loopback_config(dir.path(), BucketType::Ephemeral, 4, 64);
    cfg.tls = Some(TlsFiles {
        cert: junk.clone(),
        key: junk,
    });
    let msg = sluice_server::Node::open(cfg)
        .err()
        .expect("refused")
        .to_string();
    assert!(msg.contains("no PEM certificate"), "{msg}");
}

/// One admin request over cleartext: (status, body).
async fn admin_post(
    addr: std::net::SocketAddr,
    user: &str,
    password: &str,
    path: &str,
) -> (u16, String) {
    let mut h = TcpStream::connect(addr).await.unwrap();
    let auth = sluice_sasl::basic_header(user, password);
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    h.write_all(req.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(T, h.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer[9..12].parse().unwrap();
    let body = answer[answer.find("\r\n\r\n").unwrap() + 4..].to_string();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_is_reloaded_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (files, old_ca) = make_certs(dir.path());
    let mut cfg = common::loopback_config(&dir.path().join("data"), BucketType::Ephemeral, 4, 64);
    cfg.tls = Some(files.clone());
    cfg.kv_tls_port = 0;
    cfg.admin_tls_port = 0;
    let running = sluice_manager::start(cfg).await.unwrap();
    let tls = running.node.tls_ports().expect("TLS ports bound");
    let path = "/node/controller/reloadCertificate";
    let mut open_before = tls_connect(tls.kv, &old_ca).await;

    // A certificate from another CA replaces the files; nothing changes until the reload.
    let other = tempfile::tempdir().unwrap();
    let (fresh, new_ca) = make_certs(other.path());
    std::fs::copy(&fresh.cert, &files.cert).unwrap();
    std::fs::copy(&fresh.key, &files.key).unwrap();
    assert!(try_tls_connect(tls.kv, &new_ca).await.is_err());
    // Only an administrator may reload (and a wrong password is 401, as everywhere).
    let (st, _) = admin_post(running.admin_addr, "Administrator", "wrong", path).await;
    assert_eq!(st, 401);
    let (st, body) = admin_post(running.admin_addr, "Administrator", "password", path).await;
    assert_eq!(st, 200, "{body}");

    // New connections, on both TLS ports, get the new certificate; the old CA is refused.
    for port in [tls.kv, tls.admin] {
        assert!(try_tls_connect(port, &new_ca).await.is_ok(), "port {port}");
        assert!(try_tls_connect(port, &old_ca).await.is_err(), "port {port}");
    }
    // A connection made before keeps working.
    let (st, mechs) = call(&mut open_before, SASL_LIST_MECHS, b"", b"", b"").await;
    assert_eq!(st, 0);
    assert!(!mechs.is_empty());

    // Bad files: refused with the reason, and the certificate serving stays.
    std::fs::write(&files.key, "not a key").unwrap();
    let (st, body) = admin_post(running.admin_addr, "Administrator", "password", path).await;
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("old one still serves"), "{body}");
    assert!(try_tls_connect(tls.kv, &new_ca).await.is_ok());

    running.shutdown().await.unwrap();
}
