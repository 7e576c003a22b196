//! The certificates `sluice cluster up` serves TLS with: a cluster CA and one certificate
//! per node signed by it, kept in `DIR/tls/`, or the user's own (`--tls-cert`, `--tls-key`,
//! `--tls-ca`), which every node then serves.
//!
//! - `ca.pem` is what clients trust (`couchbases://…` with the SDK's trust store set to it);
//!   `ca-key.pem` (mode 0600) stays beside it so a later run can sign a certificate for a
//!   node it has not seen yet;
//! - `node-I.pem` / `node-I-key.pem` (0600) name the node's advertised and bound addresses,
//!   127.0.0.1 and localhost.
//!
//! A later run on the same directory reuses every file it finds.

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// What a node serves TLS with, and what clients trust.
#[derive(Debug, Clone)]
pub struct NodeTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// The user's own certificate, key and CA, for every node.
pub fn given(cert: &Path, key: &Path, ca: &Path) -> anyhow::Result<NodeTls> {
    for f in [cert, key, ca] {
        anyhow::ensure!(f.is_file(), "{} is not a file", f.display());
    }
    Ok(NodeTls {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        ca: ca.to_path_buf(),
    })
}

/// Node `i`'s certificate under `dir/tls`, made (with the CA, the first time) if missing.
pub fn for_node(dir: &Path, i: u16, hosts: &[&str]) -> anyhow::Result<NodeTls> {
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).with_context(|| format!("creating {}", tls.display()))?;
    let (ca, ca_key) = (tls.join("ca.pem"), tls.join("ca-key.pem"));
    let (cert, key) = (
        tls.join(format!("node-{i}.pem")),
        tls.join(format!("node-{i}-key.pem")),
    );
    let out = NodeTls {
        cert: cert.clone(),
        key: key.clone(),
        ca: ca.clone(),
    };
    if cert.is_file() && key.is_file() && ca.is_file() {
        return Ok(out);
    }
    let issuer_key = match ca_key.is_file() && ca.is_file() {
        true => KeyPair::from_pem(&std::fs::read_to_string(&ca_key)?)
            .with_context(|| format!("reading {}", ca_key.display()))?,
        false => {
            let k = KeyPair::generate().context("generating the CA key")?;
            let ca_cert = ca_params().self_signed(&k).context("signing the CA")?;
            write_secret(&ca_key, &k.serialize_pem())?;
            std::fs::write(&ca, ca_cert.pem())
                .with_context(|| format!("writing {}", ca.display()))?;
            k
        }
    };
    // The issuer is the CA's name and key: the same on every run (the key is kept), so a
    // certificate signed now verifies against the ca.pem written by the first run.
    let issuer = ca_params()
        .self_signed(&issuer_key)
        .context("rebuilding the CA")?;
    let node_key = KeyPair::generate().context("generating a node key")?;
    let node_cert = node_params(i, hosts)?
        .signed_by(&node_key, &issuer, &issuer_key)
        .context("signing a node certificate")?;
    write_secret(&key, &node_key.serialize_pem())?;
    std::fs::write(&cert, node_cert.pem())
        .with_context(|| format!("writing {}", cert.display()))?;
    Ok(out)
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Sluice");
    dn.push(DnType::CommonName, "Sluice cluster CA");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p
}

fn node_params(i: u16, hosts: &[&str]) -> anyhow::Result<CertificateParams> {
    let mut names: Vec<SanType> = vec![SanType::DnsName("localhost".try_into()?)];
    let mut ips: Vec<IpAddr> = vec!["127.0.0.1".parse()?];
    for h in hosts {
        match h.parse::<IpAddr>() {
            Ok(ip) => ips.push(ip),
            Err(_) => names.push(SanType::DnsName((*h).try_into()?)),
        }
    }
    ips.sort();
    ips.dedup();
    names.extend(ips.into_iter().map(SanType::IpAddress));
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Sluice");
    dn.push(DnType::CommonName, format!("sluice node {i}"));
    p.distinguished_name = dn;
    p.subject_alt_names = names;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    Ok(p)
}

/// Writes a private key readable by its owner only.
fn write_secret(path: &Path, pem: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(pem.as_bytes())?;
    Ok(())
}
