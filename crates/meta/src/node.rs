//! `MetaNode`: one node's handle on the replicated metadata.
//!
//! ```text
//!  start ──► running ──(shutdown)──► shut down
//!              │  initialize_single: a new one-node cluster (once; a no-op on a restart)
//!              │  propose / add_node / remove_node: run on the leader, forwarded if needed
//!              │  state(): every applied state, as it is applied
//! ```
//!
//! A node that was started on a directory with history recovers it (vote, log, last snapshot)
//! and rejoins the cluster it belonged to: it needs neither `initialize_single` nor
//! `add_node` again.

use crate::config::{
    MetaConfig, CLOSE_TIMEOUT, ENTRIES_PER_APPEND_MAX, RPC_CONCURRENT_MAX, SNAPSHOT_CHUNK_BYTES,
    SNAPSHOT_CHUNK_TIMEOUT,
};
use crate::error::{MetaError, StoreError};
use crate::network::NetworkFactory;
use crate::store::log::LogStore;
use crate::store::state_machine::StateMachine;
use crate::store::MetaDb;
use crate::types::{cluster_id, raft_id, LogPosition, Membership, Peer, TypeConfig};
use openraft::error::{InitializeError, RaftError};
use openraft::{Raft, SnapshotPolicy};
use sluice_cluster::metadata::ClusterState;
use sluice_cluster::NodeId;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// A running meta node. Clones share it.
#[derive(Clone)]
pub struct MetaNode {
    inner: Arc<Inner>,
}

struct Inner {
    config: MetaConfig,
    raft: Raft<TypeConfig>,
    state: watch::Receiver<Arc<ClusterState>>,
    /// Only a weak reference: Raft's tasks own the store, and `shutdown` waits until they
    /// have let go of it, so the directory can be opened again at once.
    db: Weak<MetaDb>,
    closed: AtomicBool,
    /// Raft RPCs served at once (`RPC_CONCURRENT_MAX`).
    rpc_permits: Arc<Semaphore>,
    /// Forwarded requests served at once. Separate from the RPC permits: a forwarded
    /// proposal waits up to `request_timeout`, and must not starve the heartbeats.
    forward_permits: Arc<Semaphore>,
}

impl MetaNode {
    /// Opens the node's store in `config.dir` (recovering what it holds) and starts its Raft
    /// node. The node answers RPCs once `http::router(&node)` is served on `admin_addr`.
    pub async fn start(config: MetaConfig) -> Result<MetaNode, MetaError> {
        check_addr(&config.admin_addr)?;
        let raft_config = raft_config(&config)?;
        let (dir, id) = (config.dir.clone(), config.node_id);
        let db = tokio::task::spawn_blocking(move || MetaDb::open(&dir, id))
            .await
            .map_err(|e| StoreError::Io(format!("opening task failed: {e}")))??;
        let (state_machine, state) = StateMachine::open(Arc::clone(&db)).await?;
        let log = LogStore::new(Arc::clone(&db));
        let weak = Arc::downgrade(&db);
        drop(db);
        let raft = Raft::new(
            raft_id(id),
            Arc::new(raft_config),
            NetworkFactory::new(
                raft_id(id),
                config.dial.clone(),
                state.clone(),
                config.secret.credentials(),
            ),
            log,
            state_machine,
        )
        .await
        .map_err(MetaError::from_fatal)?;
        let inner = Inner {
            config,
            raft,
            state,
            db: weak,
            closed: AtomicBool::new(false),
            rpc_permits: Arc::new(Semaphore::new(RPC_CONCURRENT_MAX)),
            forward_permits: Arc::new(Semaphore::new(RPC_CONCURRENT_MAX / 4)),
        };
        Ok(MetaNode {
            inner: Arc::new(inner),
        })
    }

    pub fn id(&self) -> NodeId {
        self.inner.config.node_id
    }

    pub fn config(&self) -> &MetaConfig {
        &self.inner.config
    }

    /// Makes this node a new cluster of one voter (itself). Does nothing if its log already
    /// holds a membership: a restarted node, or one that was added to a cluster.
    pub async fn initialize_single(&self) -> Result<(), MetaError> {
        self.check_open()?;
        let raft = &self.inner.raft;
        if raft.is_initialized().await.map_err(MetaError::from_fatal)? {
            return Ok(());
        }
        let me = Peer {
            admin_addr: self.inner.config.admin_addr.clone(),
        };
        let members = BTreeMap::from([(raft_id(self.id()), me)]);
        match raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotInMembers(e))) => {
                Err(MetaError::BadReply {
                    peer: self.inner.config.admin_addr.clone(),
                    reason: e.to_string(),
                })
            }
            Err(RaftError::Fatal(f)) => Err(MetaError::from_fatal(f)),
        }
    }

    /// Every state this node applies, newest first: `borrow()` is the current one, and
    /// `changed()` wakes on the next. A follower's state may lag the leader's by the commits
    /// it has not yet heard of.
    pub fn state(&self) -> watch::Receiver<Arc<ClusterState>> {
        self.inner.state.clone()
    }

    /// The leader this node knows of, if any.
    pub fn leader(&self) -> Option<NodeId> {
        self.inner
            .raft
            .metrics()
            .borrow()
            .current_leader
            .and_then(cluster_id)
    }

    /// The Raft membership this node knows (the newest it has in its log, committed or not).
    pub fn membership(&self) -> Membership {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        Membership::of(m.membership_config.membership())
    }

    /// Where this node's log stands.
    pub fn log_position(&self) -> LogPosition {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        LogPosition {
            term: m.current_term,
            last_log: m.last_log_index,
            applied: m.last_applied.map(|l| l.index),
            snapshot: m.snapshot.map(|l| l.index),
            purged: m.purged.map(|l| l.index),
        }
    }

    /// Stops the Raft node and waits (up to `CLOSE_TIMEOUT`) until its store is closed, so
    /// the same directory can be started again. Idempotent. The HTTP routes of a shut-down
    /// node answer 503, which peers treat as a node that is down.
    pub async fn shutdown(&self) -> Result<(), MetaError> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!("meta raft task ended badly: {e}");
        }
        let started = Instant::now();
        while self.inner.db.strong_count() > 0 {
            if started.elapsed() > CLOSE_TIMEOUT {
                return Err(StoreError::StillOpen {
                    waited_ms: millis(started.elapsed()),
                }
                .into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    pub(crate) fn raft(&self) -> &Raft<TypeConfig> {
        &self.inner.raft
    }

    pub(crate) fn check_open(&self) -> Result<(), MetaError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            Err(MetaError::Shutdown)
        } else {
            Ok(())
        }
    }

    /// A permit to serve one Raft RPC, if the node is open and under its limit.
    pub(crate) fn admit_rpc(&self) -> Option<OwnedSemaphorePermit> {
        self.check_open().ok()?;
        Arc::clone(&self.inner.rpc_permits).try_acquire_owned().ok()
    }

    /// A permit to serve one forwarded request, if the node is open and under its limit.
    pub(crate) fn admit_forward(&self) -> Option<OwnedSemaphorePermit> {
        self.check_open().ok()?;
        Arc::clone(&self.inner.forward_permits)
            .try_acquire_owned()
            .ok()
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `host:port` with a numeric port: what the Raft client will dial.
fn check_addr(addr: &str) -> Result<(), MetaError> {
    let ok = addr
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if ok {
        Ok(())
    } else {
        Err(MetaError::BadAddress {
            addr: addr.to_string(),
        })
    }
}

fn raft_config(config: &MetaConfig) -> Result<openraft::Config, MetaError> {
    openraft::Config {
        cluster_name: "sluice-meta".to_string(),
        heartbeat_interval: millis(config.heartbeat_interval),
        election_timeout_min: millis(config.election_timeout_min),
        election_timeout_max: millis(config.election_timeout_max),
        install_snapshot_timeout: millis(SNAPSHOT_CHUNK_TIMEOUT),
        max_payload_entries: ENTRIES_PER_APPEND_MAX,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every_entries),
        snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
        max_in_snapshot_log_to_keep: config.log_kept_after_snapshot,
        ..openraft::Config::default()
    }
    .validate()
    .map_err(|e| MetaError::Config {
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_host_and_a_port() {
        assert!(check_addr("127.0.0.1:9000").is_ok());
        assert!(check_addr("node-a.local:1").is_ok());
        assert!(check_addr("[::1]:9000").is_ok());
        assert!(check_addr("127.0.0.1").is_err());
        assert!(check_addr(":9000").is_err());
        assert!(check_addr("h:99999").is_err());
    }

    #[test]
    fn timing_is_checked() {
        let secret = crate::ClusterSecret::from_bytes([7; crate::secret::SECRET_BYTES]);
        let mut config = MetaConfig::new(NodeId(0), "h:1", "/nonexistent", secret);
        assert!(raft_config(&config).is_ok());
        config.election_timeout_min = config.heartbeat_interval;
        assert!(matches!(
            raft_config(&config),
            Err(MetaError::Config { .. })
        ));
    }
}
