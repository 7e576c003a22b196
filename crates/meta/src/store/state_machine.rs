//! `StateMachine`: the `ClusterState` in memory, applied from committed entries with
//! `sluice_cluster::metadata::apply`, and snapshotted as JSON into the database.
//!
//! The state itself is never written entry by entry: it is rebuilt on start from the last
//! snapshot plus the log. openraft re-applies the entries after the snapshot up to the saved
//! committed id (`LogStore::save_committed`) before the node serves; entries committed later
//! arrive from the leader as usual. So every snapshot is persisted before openraft learns of
//! it (it may purge the log behind it right after).
//!
//! Every applied batch is published on a `watch` channel: the server follows map changes
//! from there.

use crate::config::SNAPSHOT_BYTES_MAX;
use crate::error::StoreError;
use crate::store::{blocking, to_json, MetaDb, Sync, KEY_SNAPSHOT_DATA, KEY_SNAPSHOT_META};
use crate::types::{Peer, TypeConfig};
use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, StorageError, StorageIOError,
    StoredMembership,
};
use serde::{Deserialize, Serialize};
use sluice_cluster::metadata::{self, ClusterState, MetaResponse};
use std::io::Cursor;
use std::sync::Arc;
use tokio::sync::watch;

type Meta = SnapshotMeta<u64, Peer>;

/// The snapshot's bytes: a version, for readers of older snapshots, and the state.
#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    format: u32,
    state: ClusterState,
}

/// 2: many buckets, each with its own map. Format 1 (one bucket and one map) still reads:
/// `ClusterState`'s deserializer takes both shapes.
const SNAPSHOT_FORMAT: u32 = 2;
const SNAPSHOT_FORMATS_READ: [u32; 2] = [1, 2];

/// The applied state and what Raft needs to know about it.
pub(crate) struct StateMachine {
    db: Arc<MetaDb>,
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, Peer>,
    state: Arc<ClusterState>,
    published: watch::Sender<Arc<ClusterState>>,
    /// Tells snapshots built from the same log id apart (openraft asks for unique ids).
    snapshots_built: u64,
}

impl StateMachine {
    /// The state machine as of the last snapshot in `db` (or empty), and the receiver of
    /// its published states.
    pub(crate) async fn open(
        db: Arc<MetaDb>,
    ) -> Result<(StateMachine, watch::Receiver<Arc<ClusterState>>), StoreError> {
        let stored = blocking(&db, read_snapshot).await?;
        let (last_applied, last_membership, state) = match stored {
            Some((meta, data)) => {
                let state = decode_state(&data)?;
                (meta.last_log_id, meta.last_membership, state)
            }
            None => (None, StoredMembership::default(), ClusterState::new()),
        };
        let state = Arc::new(state);
        let (published, receiver) = watch::channel(Arc::clone(&state));
        let sm = StateMachine {
            db,
            last_applied,
            last_membership,
            state,
            published,
            snapshots_built: 0,
        };
        Ok((sm, receiver))
    }
}

/// The stored snapshot, if any: its meta and its bytes.
fn read_snapshot(db: &MetaDb) -> Result<Option<(Meta, Vec<u8>)>, StoreError> {
    let Some(meta) = db.get_json::<Meta>(KEY_SNAPSHOT_META, "the snapshot meta")? else {
        return Ok(None);
    };
    let data = db
        .meta
        .get(KEY_SNAPSHOT_DATA)
        .map_err(StoreError::io)?
        .ok_or_else(|| StoreError::corrupt("the snapshot", "its meta is stored without data"))?;
    Ok(Some((meta, data.to_vec())))
}

/// Stores a snapshot unless a newer one is stored already (a snapshot being built and one
/// being installed can race).
fn write_snapshot(db: &MetaDb, meta: &Meta, data: &[u8]) -> Result<(), StoreError> {
    if let Some(stored) = db.get_json::<Meta>(KEY_SNAPSHOT_META, "the snapshot meta")? {
        if stored.last_log_id > meta.last_log_id {
            return Ok(());
        }
    }
    let mut batch = db.batch();
    batch.insert(&db.meta, KEY_SNAPSHOT_META, to_json(meta)?);
    batch.insert(&db.meta, KEY_SNAPSHOT_DATA, data.to_vec());
    db.commit(batch, Sync::Durable)
}

/// Decodes a snapshot's bytes and checks the state's invariants: a snapshot comes from disk
/// or from another node, and a state that breaks them must not be served.
fn decode_state(data: &[u8]) -> Result<ClusterState, StoreError> {
    if data.len() > SNAPSHOT_BYTES_MAX {
        return Err(StoreError::corrupt(
            "the snapshot",
            format!(
                "{} bytes, above the {SNAPSHOT_BYTES_MAX} accepted",
                data.len()
            ),
        ));
    }
    let body: SnapshotBody =
        serde_json::from_slice(data).map_err(|e| StoreError::corrupt("the snapshot", e))?;
    if !SNAPSHOT_FORMATS_READ.contains(&body.format) {
        return Err(StoreError::corrupt(
            "the snapshot",
            format!(
                "format {}, this version reads {SNAPSHOT_FORMAT}",
                body.format
            ),
        ));
    }
    body.state
        .check()
        .map_err(|e| StoreError::corrupt("the snapshot's state", e))?;
    Ok(body.state)
}

fn encode_state(state: &ClusterState) -> Result<Vec<u8>, StoreError> {
    #[derive(Serialize)]
    struct Borrowed<'a> {
        format: u32,
        state: &'a ClusterState,
    }
    to_json(&Borrowed {
        format: SNAPSHOT_FORMAT,
        state,
    })
}

fn snapshot_err(meta: Option<&Meta>, e: StoreError) -> StorageError<u64> {
    StorageIOError::write_snapshot(meta.map(Meta::signature), &e).into()
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, Peer>), StorageError<u64>> {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Option<MetaResponse>>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // One copy of the state per batch: readers of the previous one keep theirs.
        let state = Arc::make_mut(&mut self.state);
        let mut replies = Vec::new();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            let reply = match entry.payload {
                EntryPayload::Blank => None,
                EntryPayload::Normal(cmd) => Some(metadata::apply(state, &cmd)),
                EntryPayload::Membership(m) => {
                    self.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    None
                }
            };
            replies.push(reply);
        }
        self.published.send_replace(Arc::clone(&self.state));
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        self.snapshots_built += 1;
        SnapshotBuilder {
            db: Arc::clone(&self.db),
            last_applied: self.last_applied,
            last_membership: self.last_membership.clone(),
            state: Arc::clone(&self.state),
            seq: self.snapshots_built,
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let data = snapshot.into_inner();
        let state = decode_state(&data).map_err(|e| snapshot_err(Some(meta), e))?;
        let stored = meta.clone();
        blocking(&self.db, move |db| write_snapshot(db, &stored, &data))
            .await
            .map_err(|e| snapshot_err(Some(meta), e))?;
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        self.state = Arc::new(state);
        self.published.send_replace(Arc::clone(&self.state));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let stored = blocking(&self.db, read_snapshot)
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(stored.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

/// A consistent view of the state machine at one log id, turned into a snapshot off the
/// state machine's task.
pub(crate) struct SnapshotBuilder {
    db: Arc<MetaDb>,
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, Peer>,
    state: Arc<ClusterState>,
    seq: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let id = match self.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, self.seq),
            None => format!("none-{}", self.seq),
        };
        let meta = Meta {
            last_log_id: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshot_id: id,
        };
        let data = encode_state(&self.state).map_err(|e| snapshot_err(Some(&meta), e))?;
        let (stored, bytes) = (meta.clone(), data.clone());
        blocking(&self.db, move |db| write_snapshot(db, &stored, &bytes))
            .await
            .map_err(|e| snapshot_err(Some(&meta), e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_versioned_and_checked() {
        let state = ClusterState::new();
        let bytes = encode_state(&state).unwrap();
        assert_eq!(decode_state(&bytes).unwrap(), state);
        let older = serde_json::json!({"format": 1, "state": state});
        let older = serde_json::to_vec(&older).unwrap();
        assert_eq!(decode_state(&older).unwrap(), state);
        let newer = serde_json::json!({"format": 3, "state": state});
        let newer = serde_json::to_vec(&newer).unwrap();
        assert!(matches!(
            decode_state(&newer),
            Err(StoreError::Corrupt { reason, .. }) if reason.contains("format 3")
        ));
        assert!(decode_state(b"not json").is_err());
    }
}
