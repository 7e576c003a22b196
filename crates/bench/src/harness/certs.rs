//! A CA and a server certificate for 127.0.0.1, for the runs over TLS (`--tls`): both
//! servers under test serve this certificate, and the load's connections trust the CA.

use std::path::{Path, PathBuf};

pub struct BenchCerts {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// Writes `ca.pem`, `server.pem` and `server-key.pem` under `dir`.
pub fn make(dir: &Path) -> std::io::Result<BenchCerts> {
    let certs = sign().map_err(std::io::Error::other)?;
    let out = BenchCerts {
        cert: dir.join("server.pem"),
        key: dir.join("server-key.pem"),
        ca: dir.join("ca.pem"),
    };
    std::fs::write(&out.cert, certs.0)?;
    std::fs::write(&out.key, certs.1)?;
    std::fs::write(&out.ca, certs.2)?;
    Ok(out)
}

/// (certificate, key, CA) as PEM.
fn sign() -> Result<(String, String, String), rcgen::Error> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "sluice bench CA");
    let ca_cert = ca.self_signed(&ca_key)?;
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])?
        .signed_by(&key, &ca_cert, &ca_key)?;
    Ok((cert.pem(), key.serialize_pem(), ca_cert.pem()))
}
