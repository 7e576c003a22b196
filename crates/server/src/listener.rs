//! Accept loops. Connections beyond `connections_max` go into the KV port's reserve for the
//! cluster's own connections (`system_connections`), and must authenticate as the cluster;
//! beyond that they are closed at once and counted.

use crate::node::Node;
pub use crate::session::Port;
use crate::workers::Workers;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The place a connection holds in its listener's limits, given back when it closes.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    /// Taken from the reserve: only the cluster identity may use it.
    pub system_only: bool,
}

/// `tls`: each connection starts with a TLS handshake (the TLS KV port).
pub async fn serve(
    node: Arc<Node>,
    listener: TcpListener,
    port: Port,
    tls: bool,
    workers: Arc<Workers>,
) {
    let slots = Arc::new(Semaphore::new(node.config.connections_max));
    let reserve = match port {
        Port::Kv => node.config.system_connections,
        Port::Memcached => 0,
    };
    let reserve = Arc::new(Semaphore::new(reserve));
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(permit) => Slot {
                _permit: permit,
                system_only: false,
            },
            Err(_) => match reserve.clone().try_acquire_owned() {
                Ok(permit) => Slot {
                    _permit: permit,
                    system_only: true,
                },
                Err(_) => {
                    node.connections_rejected.fetch_add(1, Ordering::Relaxed);
                    drop(stream);
                    continue;
                }
            },
        };
        node.connections_total.fetch_add(1, Ordering::Relaxed);
        node.connections_current.fetch_add(1, Ordering::Relaxed);
        workers.hand_off(stream, port, tls, slot).await;
    }
}
