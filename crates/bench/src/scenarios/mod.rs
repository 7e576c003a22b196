//! One folder per `sluice bench` scenario, each with its command line (`args`), its top level
//! (`run`) and its results (`report`). They share the pieces in `load`, `harness` and
//! `report`; `dcp` and `footprint` also reuse `kv`'s targets and bucket options.

pub mod clients;
pub mod dcp;
pub mod durability;
pub mod footprint;
pub mod kv;
pub mod parallel;
pub mod query;
pub mod replication;
