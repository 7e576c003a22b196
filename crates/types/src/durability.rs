//! How durable a SyncWrite must be before it is committed (the level a client asks for in
//! the durability frame info, and a DCP_PREPARE carries).

/// The wire values are the frame info's and DCP_PREPARE's level byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
}

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
}
