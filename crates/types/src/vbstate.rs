//! vbucket states, with their wire values (SET_VBUCKET extras, GET_ALL_VB_SEQNOS filters).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum VbState {
    /// Reads and writes; the only state that assigns seqnos.
    Active = 1,
    /// Fed by DCP; only replica reads.
    Replica = 2,
    /// A takeover target: operations wait until it turns active.
    Pending = 3,
    /// Holds data but serves nothing.
    Dead = 4,
}

impl VbState {
    pub fn from_wire(v: u32) -> Option<VbState> {
        match v {
            1 => Some(VbState::Active),
            2 => Some(VbState::Replica),
            3 => Some(VbState::Pending),
            4 => Some(VbState::Dead),
            _ => None,
        }
    }

    /// The state [`VbState::as_str`] names.
    pub fn from_name(name: &str) -> Option<VbState> {
        [
            VbState::Active,
            VbState::Replica,
            VbState::Pending,
            VbState::Dead,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VbState::Active => "active",
            VbState::Replica => "replica",
            VbState::Pending => "pending",
            VbState::Dead => "dead",
        }
    }
}
