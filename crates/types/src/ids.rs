//! Small integer newtypes, so a seqno can never be passed where a CAS is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A vbucket id (a partition of a bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct VbId(pub u16);

/// A per-vbucket sequence number; 0 means "nothing".
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Seqno(pub u64);

/// A vbucket uuid: names one branch of a vbucket's history. Never 0 once assigned.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct VbUuid(pub u64);

/// A document's compare-and-swap value, from the vbucket's hybrid logical clock.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Cas(pub u64);

/// One checkpoint of a vbucket's in-memory changes. Ids are consecutive within a vbucket:
/// a stream's snapshot marker says Checkpoint when the id it reads from changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CheckpointId(pub u64);

impl CheckpointId {
    /// The checkpoint opened after this one.
    pub fn next(self) -> CheckpointId {
        CheckpointId(self.0.checked_add(1).expect("checkpoint id overflow"))
    }
}

impl Seqno {
    pub const ZERO: Seqno = Seqno(0);
    pub const MAX: Seqno = Seqno(u64::MAX);

    /// The next seqno. Overflow of a u64 seqno is a bug, not an operating condition.
    pub fn next(self) -> Seqno {
        Seqno(self.0.checked_add(1).expect("seqno overflow"))
    }
}

impl Cas {
    pub const ZERO: Cas = Cas(0);
    /// What a reader sees on a locked document.
    pub const LOCKED: Cas = Cas(u64::MAX);
}

impl fmt::Display for VbId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vb:{}", self.0)
    }
}

impl fmt::Display for Seqno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
