//! The durable part of the metadata: one fjall database per node, in `MetaConfig::dir`.
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `log` | log index, u64 big-endian | the entry, JSON |
//! | `meta` | `node_id` | the node that owns the directory, JSON |
//! | `meta` | `vote` | the last vote, JSON |
//! | `meta` | `committed` | the last known committed log id, JSON |
//! | `meta` | `purged` | the last purged log id, JSON |
//! | `meta` | `snapshot_meta`, `snapshot_data` | the last snapshot: its meta (JSON) and its bytes |
//!
//! Every write that Raft's safety depends on (vote, log, purge, snapshot) is one atomic
//! fjall batch committed with `SyncAll`: journal written and fsynced before the call
//! returns. A failed write poisons the store (see `StoreError::Poisoned`). All I/O runs on
//! tokio's blocking pool, never on the async workers.
//!
//! - `log` — `LogStore`: openraft's `RaftLogStorage` and `RaftLogReader`;
//! - `state_machine` — `StateMachine`: the `ClusterState` in memory, applied from the log,
//!   snapshotted as JSON into this database.

pub(crate) mod log;
pub(crate) mod state_machine;

#[cfg(test)]
mod tests;

use crate::config::{DB_CACHE_BYTES, DB_MEMTABLE_BYTES};
use crate::error::StoreError;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch, PersistMode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_cluster::NodeId;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub(crate) const KEY_NODE_ID: &[u8] = b"node_id";
pub(crate) const KEY_VOTE: &[u8] = b"vote";
pub(crate) const KEY_COMMITTED: &[u8] = b"committed";
pub(crate) const KEY_PURGED: &[u8] = b"purged";
pub(crate) const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";
pub(crate) const KEY_SNAPSHOT_DATA: &[u8] = b"snapshot_data";

/// The open database. Shared (`Arc`) by the log store, its readers and the state machine;
/// the node handle keeps only a `Weak` so `shutdown` can tell when it is closed.
pub(crate) struct MetaDb {
    db: Database,
    pub(crate) log: Keyspace,
    pub(crate) meta: Keyspace,
    /// Why the store refuses writes, once one failed.
    poison: Mutex<Option<String>>,
}

/// When a batch must be on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// Journal written and fsynced before returning: Raft's safety rests on it.
    Durable,
    /// Journal written, fsync left to fjall: losing it after a crash is harmless.
    Lazy,
}

impl MetaDb {
    /// Opens (or creates) the database in `dir` for `node`. Refuses a directory that belongs
    /// to another node. Blocking: call from the blocking pool.
    pub(crate) fn open(dir: &Path, node: NodeId) -> Result<Arc<MetaDb>, StoreError> {
        std::fs::create_dir_all(dir).map_err(StoreError::io)?;
        // One background worker: the metadata writes little, and the node's cores belong to
        // the data path.
        let db = Database::builder(dir)
            .cache_size(DB_CACHE_BYTES)
            .worker_threads(1)
            .open()
            .map_err(StoreError::io)?;
        let keyspace = |name: &str| {
            db.keyspace(name, || {
                KeyspaceCreateOptions::default().max_memtable_size(DB_MEMTABLE_BYTES)
            })
            .map_err(StoreError::io)
        };
        let store = Arc::new(MetaDb {
            log: keyspace("log")?,
            meta: keyspace("meta")?,
            db,
            poison: Mutex::new(None),
        });
        match store.get_json::<NodeId>(KEY_NODE_ID, "node id")? {
            Some(found) if found != node => {
                return Err(StoreError::WrongNode {
                    found,
                    expected: node,
                })
            }
            Some(_) => {}
            None => {
                let mut batch = store.batch();
                batch.insert(&store.meta, KEY_NODE_ID, to_json(&node)?);
                store.commit(batch, Sync::Durable)?;
            }
        }
        Ok(store)
    }

    pub(crate) fn batch(&self) -> OwnedWriteBatch {
        self.db.batch()
    }

    /// Commits `batch` atomically. A failure poisons the store: fjall may have written part
    /// of the journal entry, and a failed fsync must never be retried.
    pub(crate) fn commit(&self, batch: OwnedWriteBatch, sync: Sync) -> Result<(), StoreError> {
        let mut poison = self.poison.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reason) = poison.as_ref() {
            return Err(StoreError::Poisoned(reason.clone()));
        }
        let mode = match sync {
            Sync::Durable => PersistMode::SyncAll,
            Sync::Lazy => PersistMode::Buffer,
        };
        batch.durability(Some(mode)).commit().map_err(|e| {
            let reason = format!("write failed: {e}");
            *poison = Some(reason.clone());
            StoreError::Io(reason)
        })
    }

    /// Reads and decodes one `meta` value.
    pub(crate) fn get_json<T: DeserializeOwned>(
        &self,
        key: &[u8],
        what: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.meta.get(key).map_err(StoreError::io)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError::corrupt(what, e)),
        }
    }
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::corrupt("a value to store", e))
}

/// Runs `f` on the blocking pool: fjall reads and writes may wait for the disk.
pub(crate) async fn blocking<T, F>(db: &Arc<MetaDb>, f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&MetaDb) -> Result<T, StoreError> + Send + 'static,
{
    let db = Arc::clone(db);
    tokio::task::spawn_blocking(move || f(&db))
        .await
        .map_err(|e| StoreError::Io(format!("storage task failed: {e}")))?
}
