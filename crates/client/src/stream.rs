//! The byte stream under a [`Client`](crate::Client): a TCP socket, or TLS over one (a node's
//! TLS KV port, or memcached started with `-Z`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How to open TLS over a connection: the client configuration (what it trusts) and the
/// name the server's certificate must carry.
#[derive(Clone, Debug)]
pub struct TlsConnect {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: rustls::pki_types::ServerName<'static>,
}

impl TlsConnect {
    /// Trusts the certificates of `ca_pem` (a PEM file) for a server named `server_name` (a
    /// host name or an IP address, as its certificate names it).
    pub fn with_ca_file(
        ca_pem: &std::path::Path,
        server_name: &str,
    ) -> Result<TlsConnect, std::io::Error> {
        TlsConnect::for_host(trusting(ca_pem)?, server_name)
    }

    /// Verifies with `config` a server named `host` (a host name or an IP address).
    pub fn for_host(
        config: Arc<rustls::ClientConfig>,
        host: &str,
    ) -> Result<TlsConnect, std::io::Error> {
        Ok(TlsConnect {
            config,
            server_name: server_name_of(host)?,
        })
    }

    /// The client side of the handshake over `tcp`.
    pub(crate) async fn handshake(&self, tcp: TcpStream) -> std::io::Result<ClientStream> {
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let transport = crate::tls_transport::TlsTransport(tcp);
        let tls = connector
            .connect(self.server_name.clone(), transport)
            .await?;
        Ok(ClientStream::Tls(Box::new(tls)))
    }
}

/// A client configuration that trusts the certificates of `ca_pem` (a PEM file) and presents
/// none of its own.
pub fn trusting(ca_pem: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, std::io::Error> {
    let pem = std::fs::read(ca_pem)?;
    trusting_pem(&pem).map_err(|e| bad(format!("{}: {e}", ca_pem.display())))
}

/// [`trusting`] the certificates of `pem` (PEM text, one or more certificates).
pub fn trusting_pem(pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, std::io::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no certificate in the PEM text".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The name a server's certificate must carry: a host name or an IP address.
fn server_name_of(host: &str) -> Result<rustls::pki_types::ServerName<'static>, std::io::Error> {
    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| bad(e.to_string()))
}

fn bad(reason: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, reason)
}

pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<crate::tls_transport::TlsTransport>>),
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
