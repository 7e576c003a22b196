//! The replicated cluster metadata as a plain state machine: the state every node agrees on
//! (`ClusterState`), the commands that change it (`MetaCommand`), and `apply`, which the Raft
//! layer (`sluice-meta`) calls for each committed command, in log order, on every node.
//!
//! - `state` — `ClusterState`: nodes and their status, the buckets with their maps and
//!   collections manifests, a running rebalance; its invariants and `check`;
//! - `command` — `MetaCommand`, `Applied`, `Rejection`, `MetaResponse`;
//! - `apply` — `apply`, one handler per command;
//! - `indexes` — the index catalog: each bucket's secondary indexes;
//! - `voters` — `desired_voters`: which nodes vote in the Raft group;
//! - `xdcr` — the cluster's uuid, remote cluster references and replications.
//!
//! No I/O, clock or randomness: the same commands give the same state on every replica and
//! in tests. What needs randomness (a bucket uuid) or a decision (the next map) is computed by
//! the proposer and carried in the command.

mod apply;
mod command;
mod index_placement;
pub mod indexes;
mod state;
mod users;
mod voters;
pub mod xdcr;

#[cfg(test)]
mod tests;

pub use apply::apply;
pub use command::{Applied, BucketVbmap, FailOverCommand, MetaCommand, MetaResponse, Rejection};
pub use indexes::{catalog_name, split_catalog_name, IndexRecord, INDEXES_PER_BUCKET_MAX};
pub use state::{
    BucketDef, BucketEntry, BucketError, ClusterState, ConflictMode, NodeEntry, NodeStatus,
    RebalanceRecord, StateError, BUCKETS_MAX, BUCKET_NAME_BYTES_MAX, BUCKET_UUID_BYTES_MAX,
    HOST_BYTES_MAX,
};
pub use users::{
    check_user_name, CredentialRecord, ScramRecord, UserRecord, USERS_MAX, USER_NAME_BYTES_MAX,
};
pub use voters::{desired_voters, voter_count, VOTERS_LARGE, VOTERS_SMALL};
pub use xdcr::{
    replication_id, RemoteCluster, ReplicationDef, ReplicationSettings, XdcrCheckpoint,
    XdcrTargetAck, OPTIMISTIC_THRESHOLD_DEFAULT, OPTIMISTIC_THRESHOLD_MAX,
};
