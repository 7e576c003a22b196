//! Accept loops. Connections beyond `connections_max` are closed at once and counted.

use crate::node::Node;
pub use crate::session::Port;
use crate::workers::Workers;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub async fn serve(node: Arc<Node>, listener: TcpListener, port: Port, workers: Arc<Workers>) {
    let slots = Arc::new(Semaphore::new(node.config.connections_max));
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
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            node.connections_rejected.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        };
        node.connections_total.fetch_add(1, Ordering::Relaxed);
        node.connections_current.fetch_add(1, Ordering::Relaxed);
        workers.hand_off(stream, port, permit).await;
    }
}
