//! `Client` over TLS: to a node's TLS KV port, trusting the CA that signed its certificate;
//! and refused when the CA is another.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_client::{Client, ConnectOptions, StoreOptions, TlsConnect};
use sluice_server::tls::TlsFiles;
use sluice_server::ServerConfig;
use std::path::Path;
use std::sync::Arc;

/// A CA (written as `name`.pem) and, if `server`, a certificate for 127.0.0.1 it signed.
fn ca_and_cert(dir: &Path, name: &str) -> (std::path::PathBuf, TlsFiles) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    let files = TlsFiles {
        cert: dir.join(format!("{name}-node.pem")),
        key: dir.join(format!("{name}-node-key.pem")),
    };
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    let ca_path = dir.join(format!("{name}.pem"));
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    (ca_path, files)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_tls_trusts_only_the_ca_that_signed_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, files) = ca_and_cert(dir.path(), "ca");
    let (other_ca, _) = ca_and_cert(dir.path(), "other");
    let mut c = ServerConfig::new(dir.path().join("data"));
    c.kv_port = 0;
    c.admin_port = 0;
    c.kv_tls_port = 0;
    c.admin_tls_port = 0;
    c.vbuckets = 8;
    c.memory_quota_mb = 64;
    c.tls = Some(files);
    let running = sluice_manager::start(c).await.unwrap();
    let port = running.node.tls_ports().unwrap().kv;

    let mut opts = ConnectOptions::sluice("Administrator", "password", "default");
    opts.tls = Some(Arc::new(
        TlsConnect::with_ca_file(&ca, "127.0.0.1").unwrap(),
    ));
    let mut client = Client::connect(("127.0.0.1", port), opts.clone())
        .await
        .unwrap();
    // Many requests one after another on the one TLS stream.
    for i in 0..200u32 {
        let key = format!("k{i}");
        client
            .set(key.as_bytes(), &i.to_be_bytes(), StoreOptions::default())
            .await
            .unwrap();
    }
    let got = client.get(b"k199").await.unwrap();
    assert_eq!(&got.value[..], &199u32.to_be_bytes());

    opts.tls = Some(Arc::new(
        TlsConnect::with_ca_file(&other_ca, "127.0.0.1").unwrap(),
    ));
    let refused = Client::connect(("127.0.0.1", port), opts).await;
    assert!(
        refused.is_err(),
        "a certificate from another CA was accepted"
    );
    running.shutdown().await.unwrap();
}
