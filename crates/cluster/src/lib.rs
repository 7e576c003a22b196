//! The cluster planner, without I/O: where each vbucket's copies live, how to get from one
//! layout to another, what a failover promotes, and the map clients route with. The cluster
//! manager feeds it node lists and maps and carries out the plans it returns; nothing here
//! opens a socket, reads a clock or draws a random number, so the same input always gives
//! the same plan (a seeded simulator replays exactly what production decided).
//!
//! Layout:
//! - `limits` — how many vbuckets, replicas and nodes the planner accepts;
//! - `node` — `NodeId` (stable identity) and `NodeInfo` (where a node listens);
//! - `vbmap` — `Chain` (one vbucket's active and replica slots) and `VbMap`, with its
//!   invariant checker;
//! - `balance` — per-node counts and the balance rules every planned map meets;
//! - `placement` — `place`: a balanced map for a fresh bucket;
//! - `rebalance/` — `plan_rebalance`: a balanced target that keeps copies where they are
//!   (`assign`: quotas per slot; `slot_fill`: the min-cost fill of one slot), and the ordered
//!   vbucket moves that reach it (`moves`);
//! - `failover/` — `fail_over_safely`: promote, for each vbucket whose active failed, the
//!   most advanced complete replica the nodes reported (`choice`), list what is lost and
//!   what had no safe copy; `fail_over`: the same with the first live replica;
//! - `auto_failover` — when a node down long enough is failed over without an operator;
//! - `fencing` — when a node cut off from a majority of the voters stops serving its actives;
//! - `janitor` — what the leader repairs when the nodes' copies disagree with the map (a
//!   takeover the map missed, one cut short, copies a move never dropped);
//! - `cluster_map` — `ClusterMap` (revisioned nodes + map) and its CCCP terse JSON;
//! - `collections/` — a bucket's collections `Manifest`: its scopes and collections, their
//!   ids, the changes and the queries the data path asks;
//! - `metadata/` — the replicated metadata as a state machine: `ClusterState`, `MetaCommand`,
//!   `apply`, and `desired_voters` (which nodes vote in the Raft group); `sluice-meta` runs
//!   it under Raft.
#![deny(unsafe_code)]

pub mod auto_failover;
pub mod balance;
pub mod cluster_map;
pub mod collections;
pub mod failover;
pub mod fencing;
pub mod janitor;
pub mod limits;
pub mod metadata;
pub mod node;
pub mod placement;
pub mod rbac;
pub mod rebalance;
pub mod services;
pub mod vbmap;

pub use balance::{check_balance, node_counts, Imbalance, NodeCounts};
pub use cluster_map::{
    bucket_capabilities, BucketInfo, BucketKind, ClusterMap, ClusterMapError, Rev, ServingNode,
};
pub use collections::{Lookup, Manifest, ManifestError};
pub use failover::{
    after_restart, fail_over, fail_over_safely, CopyPosition, FailoverOutcome, Promotion,
    RestartVerdict, WaitReason,
};
pub use metadata::{
    catalog_name, desired_voters, split_catalog_name, Applied, BucketDef, ClusterState,
    IndexRecord, MetaCommand, MetaResponse, NodeEntry, NodeStatus, RebalanceRecord, Rejection,
};
pub use node::{NodeId, NodeInfo, NodeSetError, TlsPorts};
pub use placement::{place, PlaceError};
pub use rebalance::{
    plan_rebalance, ApplyError, PlanMethod, RebalanceError, RebalancePlan, Takeover, VbMove,
};
pub use services::{Service, Services, ServicesError};
pub use vbmap::{Chain, MapError, VbMap};
