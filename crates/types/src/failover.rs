//! The failover log: one vbucket's history as (uuid, seqno) branch points, newest first.

use crate::{Seqno, VbUuid};
use serde::{Deserialize, Serialize};

/// The reference server keeps at most 25 entries; the oldest fall off.
pub const FAILOVER_LOG_MAX_ENTRIES: usize = 25;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverEntry {
    pub uuid: VbUuid,
    /// The seqno at which this branch began.
    pub seqno: Seqno,
}

/// Newest entry first. Never empty once a vbucket exists.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FailoverLog {
    entries: Vec<FailoverEntry>,
}

impl FailoverLog {
    /// A fresh history that starts at `seqno` with `uuid`.
    pub fn new(uuid: VbUuid, seqno: Seqno) -> FailoverLog {
        assert_ne!(uuid.0, 0, "a vbucket uuid is never 0");
        FailoverLog {
            entries: vec![FailoverEntry { uuid, seqno }],
        }
    }

    /// Rebuilds a log from entries (newest first), e.g. read from disk or from a producer.
    pub fn from_entries(entries: Vec<FailoverEntry>) -> FailoverLog {
        assert!(!entries.is_empty(), "a failover log has at least one entry");
        FailoverLog { entries }
    }

    pub fn entries(&self) -> &[FailoverEntry] {
        &self.entries
    }

    pub fn latest(&self) -> FailoverEntry {
        self.entries[0]
    }

    /// Starts a new branch at `high_seqno`: drops entries of abandoned branches above it,
    /// then pushes (uuid, high_seqno). Called on takeover and after an unclean restart.
    pub fn new_branch(&mut self, uuid: VbUuid, high_seqno: Seqno) {
        assert_ne!(uuid.0, 0, "a vbucket uuid is never 0");
        self.entries.retain(|e| e.seqno <= high_seqno);
        self.entries.insert(
            0,
            FailoverEntry {
                uuid,
                seqno: high_seqno,
            },
        );
        self.entries.truncate(FAILOVER_LOG_MAX_ENTRIES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_branch_drops_abandoned_entries_and_caps_length() {
        let mut log = FailoverLog::new(VbUuid(1), Seqno(0));
        log.new_branch(VbUuid(2), Seqno(100));
        log.new_branch(VbUuid(3), Seqno(50)); // history rolled back below 100
        let uuids: Vec<u64> = log.entries().iter().map(|e| e.uuid.0).collect();
        assert_eq!(uuids, vec![3, 1]);
        for i in 0..40 {
            log.new_branch(VbUuid(10 + i), Seqno(50 + i));
        }
        assert_eq!(log.entries().len(), FAILOVER_LOG_MAX_ENTRIES);
        assert_eq!(log.latest().uuid, VbUuid(49));
    }
}
