//! TLS for the KV and admin ports: the node's certificate and key, read at start into one
//! rustls server configuration both TLS listeners share, and read again on
//! `POST /node/controller/reloadCertificate` (Couchbase's route): new handshakes use the new
//! certificate, connections already open keep theirs, and files that do not make a
//! configuration leave the old one serving.
//!
//! Couchbase's conventions: the TLS KV port (11207) speaks the same binary protocol as the
//! cleartext one, and the TLS admin port (18091) the same HTTP; the map lists them in
//! `nodesExt` as `kvSSL` and `mgmtSSL`, which is how an SDK given `couchbases://` finds them.
//! Over TLS, SASL PLAIN is offered (the password is no longer in the clear), as the SDKs
//! expect: they choose PLAIN there and SCRAM on cleartext.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sluice_client::tls_transport::TlsTransport;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Where a node's TLS identity is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the node's certificate, then any intermediates.
    pub cert: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{0} holds no PEM certificate")]
    NoCertificate(PathBuf),
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("the cluster's CA {path}: {reason}")]
    ClusterCa { path: PathBuf, reason: String },
    #[error("encrypting the cluster's traffic needs this node's own certificate and key (--tls-cert, --tls-key): its peers call it over TLS")]
    ClusterCaWithoutCertificate,
    #[error("encrypting the cluster's traffic needs the cluster's CA (--tls-ca): this node verifies its peers against it")]
    NoClusterCa,
}

/// The client side members call each other with when the cluster encrypts its control
/// traffic: trusting the cluster's CA at `ca`. Checked at start, so a node given a CA it
/// cannot use stops instead of failing every call to its peers.
pub fn member_client(
    ca: Option<&Path>,
    own: Option<&TlsFiles>,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    if own.is_none() {
        return Err(TlsError::ClusterCaWithoutCertificate);
    }
    let ca = ca.ok_or(TlsError::NoClusterCa)?;
    sluice_client::net::trusting(ca).map_err(|e| TlsError::ClusterCa {
        path: ca.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The TLS side of a node: an acceptor for both TLS listeners, shared by every clone, and
/// the files it was read from.
#[derive(Clone)]
pub struct Tls {
    acceptor: Arc<parking_lot::RwLock<TlsAcceptor>>,
    files: TlsFiles,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// Reads the certificate chain and key: a node with a broken TLS identity refuses to
    /// start instead of serving its TLS ports with nothing.
    pub fn load(files: &TlsFiles) -> Result<Tls, TlsError> {
        Ok(Tls {
            acceptor: Arc::new(parking_lot::RwLock::new(acceptor(files)?)),
            files: files.clone(),
        })
    }

    /// Reads the files again and, if they make a configuration, serves it from the next
    /// handshake on (every clone of this `Tls`, so both TLS ports). Blocking (file reads).
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = acceptor(&self.files)?;
        *self.acceptor.write() = fresh;
        Ok(())
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// The server side of the handshake, within `timeout` (a client that opens a socket and
    /// says nothing must not hold it for ever).
    pub async fn accept(
        &self,
        stream: TcpStream,
        timeout: Duration,
    ) -> std::io::Result<TlsStream<TlsTransport>> {
        let acceptor = self.acceptor.read().clone();
        match tokio::time::timeout(timeout, acceptor.accept(TlsTransport(stream))).await {
            Ok(done) => done,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no TLS handshake within the auth timeout",
            )),
        }
    }
}

/// An acceptor for the certificate chain and key in `files`.
fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs = read_certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Read {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Every certificate in a PEM file, in order.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |e: rustls::pki_types::pem::Error| TlsError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

/// Handshakes the TLS admin listener runs at once; more connections wait in the backlog.
const ADMIN_HANDSHAKES_MAX: usize = 64;

/// The TLS admin port as an `axum::serve` listener: connections are accepted and their
/// handshakes run in tasks of their own (a client that stalls its handshake holds one task
/// until the timeout, not the port), and the server gets only the completed ones.
pub struct TlsAdminListener {
    ready: tokio::sync::mpsc::Receiver<(TlsStream<TlsTransport>, std::net::SocketAddr)>,
    addr: std::net::SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsAdminListener {
    pub fn new(
        listener: tokio::net::TcpListener,
        tls: Tls,
        timeout: Duration,
    ) -> std::io::Result<TlsAdminListener> {
        let addr = listener.local_addr()?;
        let (tx, ready) = tokio::sync::mpsc::channel(ADMIN_HANDSHAKES_MAX);
        let slots = Arc::new(tokio::sync::Semaphore::new(ADMIN_HANDSHAKES_MAX));
        let accepting = tokio::spawn(async move {
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (stream, peer) = match listener.accept().await {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "TLS admin accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // An answer is written as several TLS records (head, then body): with
                // Nagle's algorithm the later ones wait for the client's delayed ACK (40 ms).
                let _ = stream.set_nodelay(true);
                let (tls, tx) = (tls.clone(), tx.clone());
                tokio::spawn(async move {
                    match tls.accept(stream, timeout).await {
                        Ok(s) => {
                            let _ = tx.send((s, peer)).await;
                        }
                        Err(e) => tracing::debug!(%peer, error = %e, "TLS admin handshake failed"),
                    }
                    drop(permit);
                });
            }
        });
        Ok(TlsAdminListener {
            ready,
            addr,
            accepting,
        })
    }
}

impl Drop for TlsAdminListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsAdminListener {
    type Io = TlsStream<TlsTransport>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop ended (its runtime is shutting down): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
