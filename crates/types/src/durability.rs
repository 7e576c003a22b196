//! How durable a SyncWrite must be before it is committed (the level a client asks for in
//! the durability frame info, and a DCP_PREPARE carries).

use serde::{Deserialize, Serialize};

/// The wire values are the frame info's and DCP_PREPARE's level byte. The levels are ordered
/// weakest first, so a bucket's minimum and a client's request combine with `max`. In JSON
/// (a bucket's `durabilityMinLevel`) a level is Couchbase's REST name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum DurabilityLevel {
    /// In memory on a majority of the chain.
    Majority = 1,
    /// In memory on a majority, and persisted on the active.
    MajorityAndPersistOnMaster = 2,
    /// Persisted on a majority.
    PersistToMajority = 3,
}

impl DurabilityLevel {
    /// The level of a wire byte; `None` for 0 (no durability) and unknown values.
    pub fn from_wire(b: u8) -> Option<DurabilityLevel> {
        match b {
            1 => Some(DurabilityLevel::Majority),
            2 => Some(DurabilityLevel::MajorityAndPersistOnMaster),
            3 => Some(DurabilityLevel::PersistToMajority),
            _ => None,
        }
    }

    pub fn to_wire(self) -> u8 {
        self as u8
    }

    /// Whether the active must have persisted the prepare before it counts.
    pub fn persist_active(self) -> bool {
        self != DurabilityLevel::Majority
    }

    /// Whether a replica counts only once it has persisted the prepare.
    pub fn persist_replicas(self) -> bool {
        self == DurabilityLevel::PersistToMajority
    }

    /// Couchbase's REST name (`durabilityMinLevel`, the SDKs' bucket settings).
    pub fn name(self) -> &'static str {
        match self {
            DurabilityLevel::Majority => "majority",
            DurabilityLevel::MajorityAndPersistOnMaster => "majorityAndPersistActive",
            DurabilityLevel::PersistToMajority => "persistToMajority",
        }
    }

    /// The level of a REST name; `None` for unknown names (and for `none`, which is no
    /// level).
    pub fn from_name(name: &str) -> Option<DurabilityLevel> {
        [
            DurabilityLevel::Majority,
            DurabilityLevel::MajorityAndPersistOnMaster,
            DurabilityLevel::PersistToMajority,
        ]
        .into_iter()
        .find(|l| l.name() == name)
    }
}

impl From<DurabilityLevel> for &'static str {
    fn from(level: DurabilityLevel) -> &'static str {
        level.name()
    }
}

impl TryFrom<String> for DurabilityLevel {
    type Error = UnknownLevel;

    fn try_from(name: String) -> Result<DurabilityLevel, UnknownLevel> {
        DurabilityLevel::from_name(&name).ok_or(UnknownLevel(name))
    }
}

/// A durability level name that is not one of Couchbase's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLevel(pub String);

impl std::fmt::Display for UnknownLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown durability level {:?}", self.0)
    }
}

impl std::error::Error for UnknownLevel {}

#[cfg(test)]
mod tests {
    use super::DurabilityLevel;

    #[test]
    fn wire_bytes_round_trip_and_zero_is_none() {
        for b in 0u8..=255 {
            match DurabilityLevel::from_wire(b) {
                Some(l) => assert_eq!(l.to_wire(), b),
                None => assert!(b == 0 || b > 3),
            }
        }
    }

    #[test]
    fn rest_names_round_trip_and_order_weakest_first() {
        for b in 1u8..=3 {
            let l = DurabilityLevel::from_wire(b).unwrap();
            assert_eq!(DurabilityLevel::from_name(l.name()), Some(l));
        }
        assert_eq!(DurabilityLevel::from_name("none"), None);
        assert_eq!(DurabilityLevel::from_name("Majority"), None);
        assert!(DurabilityLevel::Majority < DurabilityLevel::MajorityAndPersistOnMaster);
        assert!(DurabilityLevel::MajorityAndPersistOnMaster < DurabilityLevel::PersistToMajority);
        // A bucket minimum of none leaves a client's level; no level is below every level.
        assert!(None < Some(DurabilityLevel::Majority));
    }
}
