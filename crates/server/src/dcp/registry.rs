//! Every open DCP producer connection, by name, with the statistics its task publishes.
//!
//! A connection's task owns its streams; after each pass it copies a small summary here
//! ([`ConnStats`]), so STAT and `/metrics` never touch the task's state.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// One stream's published statistics.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    pub vb: u16,
    /// The consumer's stream id (`enable_stream_id`).
    pub sid: Option<u16>,
    pub state: &'static str,
    pub opaque: u32,
    pub last_sent_seqno: u64,
    pub end_seqno: u64,
    pub items_remaining: u64,
    pub items_sent: u64,
    pub bytes_sent: u64,
    pub ready_bytes: u64,
    pub backfills: u64,
    pub cursor_drops: u64,
}

/// One connection's published statistics.
#[derive(Debug, Clone, Default)]
pub struct ConnStats {
    pub name: String,
    /// The connection came over TLS (the TLS KV port).
    pub tls: bool,
    pub priority: &'static str,
    pub flow_window: u64,
    pub unacked_bytes: u64,
    pub bytes_sent: u64,
    pub items_sent: u64,
    pub backfill_bytes_buffered: u64,
    pub backfills_running: u64,
    /// Why the connection is not sending, if it is not.
    pub paused_reason: &'static str,
    pub streams: Vec<StreamStats>,
}

pub struct ConnShared {
    pub id: u64,
    pub name: String,
    pub stats: Mutex<ConnStats>,
    /// Asks the connection to close (its name was reused, or the node stops).
    pub kick: Notify,
}

#[derive(Default)]
pub struct DcpRegistry {
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<ConnShared>>>,
}

impl DcpRegistry {
    /// Registers a connection (`tls`: it came over TLS); an open one with the same name is
    /// told to close.
    pub fn register(&self, name: &str, tls: bool) -> Arc<ConnShared> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(ConnShared {
            id,
            name: name.to_string(),
            stats: Mutex::new(ConnStats {
                name: name.to_string(),
                tls,
                ..Default::default()
            }),
            kick: Notify::new(),
        });
        let mut conns = self.conns.lock();
        for old in conns.values().filter(|c| c.name == name) {
            tracing::info!(
                name,
                "DCP connection name reused: closing the older connection"
            );
            old.kick.notify_one();
        }
        conns.insert(id, shared.clone());
        shared
    }

    pub fn unregister(&self, id: u64) {
        self.conns.lock().remove(&id);
    }

    pub fn snapshot(&self) -> Vec<ConnStats> {
        let mut v: Vec<ConnStats> = self
            .conns
            .lock()
            .values()
            .map(|c| c.stats.lock().clone())
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}
