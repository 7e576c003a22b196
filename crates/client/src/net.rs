//! Opening TCP connections, optionally from a given source address.
//!
//! A cluster node may be told which address its connections to other nodes come from
//! (`--source-ip`): peers, and a fault-injecting proxy between nodes, then tell its
//! connections from another node's even when all run on one host.

use std::net::{IpAddr, SocketAddr};
use tokio::net::{lookup_host, TcpSocket, TcpStream, ToSocketAddrs};

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
