//! Certificates for tests: a CA and a node certificate for 127.0.0.1 it signed (rcgen).

use rustls::pki_types::CertificateDer;
use sluice_server::tls::TlsFiles;
use std::path::{Path, PathBuf};

/// A test CA: its PEM file and its DER certificate (what a client trusts).
#[allow(dead_code)]
pub struct TestCa {
    pub pem: PathBuf,
    pub der: CertificateDer<'static>,
}

/// Writes a fresh CA (`ca.pem`) and a certificate for 127.0.0.1 signed by it (`node.pem`,
/// `node-key.pem`) under `dir`.
#[allow(dead_code)]
pub fn make_certs(dir: &Path) -> (TlsFiles, TestCa) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let files = TlsFiles {
        cert: dir.join("node.pem"),
        key: dir.join("node-key.pem"),
    };
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, ca_cert.pem()).unwrap();
    let der = ca_cert.der().clone();
    (files, TestCa { pem, der })
}
