//! Domain types shared by every Sluice crate.
//!
//! Layout: `cccp` (the terse cluster config clients route with), `collection` (collection ids, LEB128 key prefixes, qualified keys),
//! `system_event` (a vbucket's scope and collection records), `ids` (VbId, Seqno, VbUuid, Cas), `vbset` (a set of vbuckets as a bitmap), `vbstate` (vbucket states), `failover`
//! (the failover log and its entries), `item` (document metadata as stored and streamed),
//! `durability` (SyncWrite levels), `hash` (key → vbucket), `limits` (protocol-wide limits).
#![deny(unsafe_code)]

pub mod cccp;
pub mod collection;
mod durability;
mod failover;
mod hash;
pub mod hex;
pub mod identity;
mod ids;
mod include_value;
mod item;
pub mod limits;
mod map_version;
pub mod system_event;
mod vbset;
mod vbstate;

pub use collection::CollectionId;
pub use durability::{DurabilityLevel, UnknownLevel};
pub use failover::{FailoverEntry, FailoverLog, FAILOVER_LOG_MAX_ENTRIES};
pub use hash::vbucket_of;
pub use ids::{Cas, CheckpointId, Seqno, VbId, VbUuid};
pub use include_value::IncludeValue;
pub use item::{Datatype, Expiry, ItemMeta};
pub use map_version::MapVersion;
pub use vbset::VbSet;
pub use vbstate::VbState;
