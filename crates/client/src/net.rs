//! Opening TCP connections, optionally from a given source address, and optionally with TLS
//! over them ([`Dial`]).
//!
//! A cluster node may be told which address its connections to other nodes come from
//! (`--source-ip`): peers, and a fault-injecting proxy between nodes, then tell its
//! connections from another node's even when all run on one host. A node whose cluster
//! encrypts its control traffic calls its peers over TLS, trusting the cluster's CA.

use crate::stream::TlsConnect;
pub use crate::stream::{trusting, trusting_pem, ClientStream};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::net::{lookup_host, TcpSocket, TcpStream, ToSocketAddrs};

/// How connections are opened: from which local address, and whether with TLS (verifying
/// the server's certificate against `tls`'s roots, for the host the address names).
#[derive(Clone, Debug, Default)]
pub struct Dial {
    pub source: Option<IpAddr>,
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Dial {
    /// Connects to `addr` (`host:port`, `[v6]:port`), with the TLS handshake done when this
    /// dial has TLS.
    pub async fn connect(&self, addr: &str) -> std::io::Result<ClientStream> {
        let tcp = connect_from(addr, self.source).await?;
        // Calls between nodes are small request/answer pairs: no Nagle delay.
        tcp.set_nodelay(true)?;
        let Some(config) = &self.tls else {
            return Ok(ClientStream::Plain(tcp));
        };
        let tls = TlsConnect::for_host(config.clone(), host_of(addr))?;
        tls.handshake(tcp).await
    }
}

/// Writes from `buf` (the bytes taken), or with `buf` empty flushes (0). Either is one poll
/// of the stream, so a `select!` that drops it loses nothing; one arm serves both, since
/// both need the writer (a TLS stream holds records back until flushed).
pub async fn write_or_flush<W: tokio::io::AsyncWrite + Unpin>(
    wr: &mut W,
    buf: &[u8],
) -> std::io::Result<usize> {
    std::future::poll_fn(|cx| {
        let wr = std::pin::Pin::new(&mut *wr);
        match buf.is_empty() {
            false => wr.poll_write(cx, buf),
            true => wr.poll_flush(cx).map_ok(|()| 0),
        }
    })
    .await
}

/// The host part of `host:port` (brackets of an IPv6 address removed).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Connects to `addr` (each address it resolves to, in order), from `source` when given.
pub async fn connect_from(
    addr: impl ToSocketAddrs,
    source: Option<IpAddr>,
) -> std::io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let mut last = None;
    for target in lookup_host(addr).await? {
        let socket = if target.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.bind(SocketAddr::new(source, 0))?;
        match socket.connect(target).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing")))
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_of_an_address() {
        assert_eq!(host_of("127.0.0.1:8091"), "127.0.0.1");
        assert_eq!(host_of("node-1.example:18091"), "node-1.example");
        assert_eq!(host_of("[::1]:18091"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }
}
