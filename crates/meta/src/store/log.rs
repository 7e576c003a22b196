//! `LogStore`: the Raft log and vote, durable in the `log` and `meta` keyspaces.
//!
//! What must stay true (openraft's storage contract):
//! - the log is contiguous: `truncate` removes a suffix, `purge` a prefix, never a middle;
//! - every write is on disk before the call returns (`append` reports it through its
//!   callback after the fsync), and writes are applied in the order they are made: openraft
//!   calls one at a time and each awaits its fsync;
//! - in particular a vote is on disk before openraft answers the RequestVote that caused it,
//!   so a restarted node never votes twice in one term.

use crate::error::StoreError;
use crate::store::{blocking, to_json, MetaDb, Sync, KEY_COMMITTED, KEY_PURGED, KEY_VOTE};
use crate::types::TypeConfig;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// The log and the vote. Clones share the database; openraft hands clones to its
/// replication tasks as readers.
#[derive(Clone)]
pub(crate) struct LogStore {
    db: Arc<MetaDb>,
}

impl LogStore {
    pub(crate) fn new(db: Arc<MetaDb>) -> LogStore {
        LogStore { db }
    }
}

fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn index_of(key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| StoreError::corrupt("a log key", format!("{} bytes, not 8", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

/// `[start, end)` of a range of log indexes; `end` is `None` when unbounded.
fn index_range(range: &impl RangeBounds<u64>) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&i) => Some(i.saturating_add(1)),
        Bound::Excluded(&i) => Some(i),
        Bound::Unbounded => None,
    };
    (start, end)
}

fn read_entries(
    db: &MetaDb,
    start: u64,
    end: Option<u64>,
) -> Result<Vec<Entry<TypeConfig>>, StoreError> {
    let iter = match end {
        Some(end) if end <= start => return Ok(Vec::new()),
        Some(end) => db.log.range(log_key(start)..log_key(end)),
        None => db.log.range(log_key(start)..),
    };
    let mut entries = Vec::new();
    for guard in iter {
        let (key, value) = guard.into_inner().map_err(StoreError::io)?;
        let index = index_of(&key)?;
        let entry: Entry<TypeConfig> = serde_json::from_slice(&value)
            .map_err(|e| StoreError::corrupt(format!("log entry {index}"), e))?;
        if entry.log_id.index != index {
            return Err(StoreError::corrupt(
                format!("log entry {index}"),
                format!("it holds index {}", entry.log_id.index),
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn last_log_id(db: &MetaDb) -> Result<Option<LogId<u64>>, StoreError> {
    let Some(guard) = db.log.last_key_value() else {
        return Ok(None);
    };
    let (key, value) = guard.into_inner().map_err(StoreError::io)?;
    let index = index_of(&key)?;
    let entry: Entry<TypeConfig> = serde_json::from_slice(&value)
        .map_err(|e| StoreError::corrupt(format!("log entry {index}"), e))?;
    Ok(Some(entry.log_id))
}

/// Keys of the log entries in `[start, end)`.
fn keys_in(db: &MetaDb, start: u64, end: Option<u64>) -> Result<Vec<fjall::UserKey>, StoreError> {
    let iter = match end {
        Some(end) => db.log.range(log_key(start)..log_key(end)),
        None => db.log.range(log_key(start)..),
    };
    iter.map(|guard| guard.key().map_err(StoreError::io))
        .collect()
}

fn read_err(e: StoreError) -> StorageError<u64> {
    StorageIOError::read_logs(&e).into()
}

fn write_err(e: StoreError) -> StorageError<u64> {
    StorageIOError::write_logs(&e).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        let (start, end) = index_range(&range);
        blocking(&self.db, move |db| read_entries(db, start, end))
            .await
            .map_err(read_err)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        blocking(&self.db, |db| {
            let purged: Option<LogId<u64>> = db.get_json(KEY_PURGED, "the purged log id")?;
            // With every entry purged, the last log id is the last purged one.
            let last = last_log_id(db)?.or(purged);
            Ok(LogState {
                last_purged_log_id: purged,
                last_log_id: last,
            })
        })
        .await
        .map_err(read_err)
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        let bytes = to_json(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        blocking(&self.db, move |db| {
            let mut batch = db.batch();
            batch.insert(&db.meta, KEY_VOTE, bytes);
            db.commit(batch, Sync::Durable)
        })
        .await
        .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        blocking(&self.db, |db| db.get_json(KEY_VOTE, "the vote"))
            .await
            .map_err(|e| StorageIOError::read_vote(&e).into())
    }

    /// Saved so a restart re-applies the log up to it (the state machine itself is only on
    /// disk as snapshots). Lazily synced: a committed id lost in a crash only means the
    /// restarted node applies a little less until the leader tells it again.
    async fn save_committed(
        &mut self,
        committed: Option<LogId<u64>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = to_json(&committed).map_err(write_err)?;
        blocking(&self.db, move |db| {
            let mut batch = db.batch();
            batch.insert(&db.meta, KEY_COMMITTED, bytes);
            db.commit(batch, Sync::Lazy)
        })
        .await
        .map_err(write_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        blocking(&self.db, |db| {
            Ok(db
                .get_json::<Option<LogId<u64>>>(KEY_COMMITTED, "the committed log id")?
                .flatten())
        })
        .await
        .map_err(read_err)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        for entry in entries {
            encoded.push((entry.log_id.index, to_json(&entry).map_err(write_err)?));
        }
        let result = blocking(&self.db, move |db| {
            let mut batch = db.batch();
            for (index, bytes) in encoded {
                batch.insert(&db.log, log_key(index), bytes);
            }
            db.commit(batch, Sync::Durable)
        })
        .await;
        // Entries are readable once `commit` returns, and on disk: report both at once.
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        blocking(&self.db, move |db| {
            let keys = keys_in(db, log_id.index, None)?;
            let mut batch = db.batch();
            for key in keys {
                batch.remove(&db.log, key);
            }
            db.commit(batch, Sync::Durable)
        })
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        let purged = to_json(&log_id).map_err(write_err)?;
        blocking(&self.db, move |db| {
            // The purged id and the removal go in one batch, so a crash cannot leave a log
            // whose first entry does not follow the recorded purge point.
            let keys = keys_in(db, 0, Some(log_id.index.saturating_add(1)))?;
            let mut batch = db.batch();
            batch.insert(&db.meta, KEY_PURGED, purged);
            for key in keys {
                batch.remove(&db.log, key);
            }
            db.commit(batch, Sync::Durable)
        })
        .await
        .map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_become_half_open_index_ranges() {
        assert_eq!(index_range(&(3..7)), (3, Some(7)));
        assert_eq!(index_range(&(3..=7)), (3, Some(8)));
        assert_eq!(index_range(&(3..)), (3, None));
        assert_eq!(index_range(&(..)), (0, None));
        assert_eq!(index_range(&(..=u64::MAX)), (0, Some(u64::MAX)));
    }

    #[test]
    fn log_keys_sort_by_index() {
        assert!(log_key(255) < log_key(256));
        assert_eq!(index_of(&log_key(42)), Ok(42));
        assert!(index_of(b"short").is_err());
    }
}
