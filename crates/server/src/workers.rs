//! Connection workers: one single-threaded runtime per thread, each owning the connections
//! it is handed. A connection never migrates between threads, so a request's read, execution
//! and write stay on one core with no cross-thread wake-ups (the work-stealing scheduler's
//! cost showed up as ~10 % of throughput at one request in flight per connection).

use crate::connection;
use crate::node::Node;
use crate::placement;
use crate::session::Port;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Connections waiting to be picked up by one worker; the acceptor blocks beyond this.
const HANDOFF_QUEUE_MAX: usize = 1024;

/// An accepted connection on its way to a worker.
struct Accepted {
    stream: std::net::TcpStream,
    port: Port,
    /// Starts with a TLS handshake.
    tls: bool,
    slot: crate::listener::Slot,
}

pub struct Workers {
    senders: Vec<mpsc::Sender<Accepted>>,
    node: Arc<Node>,
}

impl Workers {
    /// Starts the node's connection threads (as many as its placer places on).
    pub fn start(node: Arc<Node>) -> std::io::Result<Workers> {
        let mut senders = Vec::new();
        for i in 0..node.placer.threads() {
            let pin = node.placer.pin_of(i);
            let (tx, mut rx) = mpsc::channel::<Accepted>(HANDOFF_QUEUE_MAX);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let node = node.clone();
            std::thread::Builder::new()
                .name(format!("sluice-conn-{i}"))
                .spawn(move || {
                    if let Some(cpu) = pin {
                        placement::pin_current_thread(cpu);
                    }
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&rt, async move {
                        while let Some(a) = rx.recv().await {
                            let node = node.clone();
                            tokio::task::spawn_local(async move {
                                if let Ok(stream) = tokio::net::TcpStream::from_std(a.stream) {
                                    let system_only = a.slot.system_only;
                                    match a.tls {
                                        false => {
                                            connection::handle(
                                                node.clone(),
                                                stream,
                                                a.port,
                                                system_only,
                                            )
                                            .await
                                        }
                                        true => {
                                            connection::handle_tls(
                                                node.clone(),
                                                stream,
                                                a.port,
                                                system_only,
                                            )
                                            .await
                                        }
                                    }
                                }
                                let slot = a.slot;
                                node.connections_current.fetch_sub(1, Ordering::Relaxed);
                                node.placer.closed(i);
                                drop(slot);
                            });
                        }
                    });
                })?;
            senders.push(tx);
        }
        Ok(Workers { senders, node })
    }

    /// Hands a connection to the worker the placement picks.
    pub async fn hand_off(
        &self,
        stream: tokio::net::TcpStream,
        port: Port,
        tls: bool,
        slot: crate::listener::Slot,
    ) {
        let Ok(stream) = stream.into_std() else {
            self.node
                .connections_current
                .fetch_sub(1, Ordering::Relaxed);
            return;
        };
        let i = self.node.placer.place(placement::incoming_cpu(&stream));
        let accepted = Accepted {
            stream,
            port,
            tls,
            slot,
        };
        if self.senders[i].send(accepted).await.is_err() {
            // The thread is gone (shutting down): the connection closed unserved.
            self.node
                .connections_current
                .fetch_sub(1, Ordering::Relaxed);
            self.node.placer.closed(i);
        }
    }
}
