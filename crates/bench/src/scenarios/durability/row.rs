//! What one row of `bench durability` measures: a target (the Sluice cluster, or Redis in
//! one persistence mode) and the kind of write its loops make (a durability level on Sluice;
//! `SET`, or `SET` + `WAIT 1 0`, on Redis), with the labels the report prints.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use sluice_client::{Durability, DurabilityLevel, StoreOptions};

use crate::harness::redis_peer::RedisPersistence;

/// A Sluice durability level, or none (a plain set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// No durability requirement: answered once the active holds the write in memory.
    None,
    /// In memory on a majority of the vbucket's chain.
    Majority,
    /// In memory on a majority, and persisted on the active.
    MajorityAndPersistActive,
    /// Persisted on a majority.
    PersistToMajority,
}

impl Level {
    pub const ALL: [Level; 4] = [
        Level::None,
        Level::Majority,
        Level::MajorityAndPersistActive,
        Level::PersistToMajority,
    ];

    /// The level's name as the Couchbase SDKs spell it.
    pub fn label(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Majority => "majority",
            Level::MajorityAndPersistActive => "majorityAndPersistActive",
            Level::PersistToMajority => "persistToMajority",
        }
    }

    pub fn wire(self) -> Option<DurabilityLevel> {
        match self {
            Level::None => None,
            Level::Majority => Some(DurabilityLevel::Majority),
            Level::MajorityAndPersistActive => Some(DurabilityLevel::MajorityAndPersistOnMaster),
            Level::PersistToMajority => Some(DurabilityLevel::PersistToMajority),
        }
    }

    /// The set's options: the level and its timeout in the durability frame info.
    pub fn store_options(self, timeout_ms: u16) -> StoreOptions {
        StoreOptions {
            durability: self.wire().map(|level| Durability {
                level,
                timeout_ms: Some(timeout_ms),
            }),
            ..StoreOptions::default()
        }
    }
}

/// What a row runs against: a fresh target per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Sluice,
    Redis(RedisPersistence),
}

impl Target {
    pub fn label(self) -> &'static str {
        match self {
            Target::Sluice => "sluice",
            Target::Redis(RedisPersistence::None) => "redis (no persistence)",
            Target::Redis(RedisPersistence::Aof) => "redis (AOF everysec)",
        }
    }
}

/// The write each loop of a row repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Write {
    /// A Sluice set at this level.
    Sluice(Level),
    /// A Redis `SET`.
    RedisSet,
    /// A Redis `SET`, then `WAIT 1 0` on the same connection once it is answered: one
    /// durable write, timed from the SET's send to WAIT's answer.
    RedisSetWait,
}

impl Write {
    pub fn label(self) -> &'static str {
        match self {
            Write::Sluice(l) => l.label(),
            Write::RedisSet => "SET",
            Write::RedisSetWait => "SET + WAIT 1 0",
        }
    }

    /// The writes a target's rows make, in order.
    pub fn of(target: Target, levels: &[Level]) -> Vec<Write> {
        match target {
            Target::Sluice => levels.iter().map(|l| Write::Sluice(*l)).collect(),
            Target::Redis(_) => vec![Write::RedisSet, Write::RedisSetWait],
        }
    }

    /// The Redis write a Sluice row is compared with: a plain set with SET, a durable one
    /// with SET + WAIT. `None` for Redis rows.
    pub fn redis_counterpart(self) -> Option<Write> {
        match self {
            Write::Sluice(Level::None) => Some(Write::RedisSet),
            Write::Sluice(_) => Some(Write::RedisSetWait),
            Write::RedisSet | Write::RedisSetWait => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_map_to_the_wire_and_their_counterparts() {
        assert_eq!(Level::None.wire(), None);
        assert_eq!(Level::None.store_options(100).durability, None);
        let d = Level::PersistToMajority
            .store_options(2500)
            .durability
            .unwrap();
        assert_eq!((d.level as u8, d.timeout_ms), (3, Some(2500)));
        assert_eq!(
            Level::MajorityAndPersistActive.wire(),
            Some(DurabilityLevel::MajorityAndPersistOnMaster)
        );
        assert_eq!(
            Write::Sluice(Level::None).redis_counterpart(),
            Some(Write::RedisSet)
        );
        assert_eq!(
            Write::Sluice(Level::Majority).redis_counterpart(),
            Some(Write::RedisSetWait)
        );
        assert_eq!(Write::RedisSetWait.redis_counterpart(), None);
    }

    #[test]
    fn each_target_has_its_rows() {
        let sluice = Write::of(Target::Sluice, &[Level::Majority, Level::None]);
        assert_eq!(
            sluice,
            vec![Write::Sluice(Level::Majority), Write::Sluice(Level::None)]
        );
        let redis = Write::of(Target::Redis(RedisPersistence::Aof), &Level::ALL);
        assert_eq!(redis, vec![Write::RedisSet, Write::RedisSetWait]);
        assert_eq!(Write::RedisSetWait.label(), "SET + WAIT 1 0");
        assert_eq!(
            Target::Redis(RedisPersistence::None).label(),
            "redis (no persistence)"
        );
    }
}
