//! The cluster metadata, replicated with Raft (openraft 0.9): every node holds the same
//! `sluice_cluster::metadata::ClusterState`, changed only by `MetaCommand`s committed by a
//! majority of the voters (up to 3, or 5 at 5 or more nodes; the others are learners). So
//! losing a minority of the voters loses nothing that was committed.
//!
//! Layout:
//! - `node` — `MetaNode`: start, initialize, state, leader, membership, shutdown;
//! - `leader` — what runs on the leader: `propose`, `add_node`, `remove_node` (learner first,
//!   voters per `desired_voters`);
//! - `forward` — running an operation on the leader from any node (local or over HTTP);
//! - `store/` — durable log and vote in fjall (`log`), the state machine applied in memory
//!   and snapshotted as JSON into the same database (`state_machine`);
//! - `network/` — Raft RPCs out: openraft's network traits over an HTTP/JSON client;
//! - `http` — Raft RPCs and forwarded requests in: the axum routes under `/internal/`;
//! - `join` — a node outside the cluster asks a member for an id, then to be admitted;
//! - `secret` — `ClusterSecret`, which every RPC between members proves;
//! - `types` — openraft's type config, `Peer` (a member's admin address), id mapping;
//! - `config` — `MetaConfig` and the limits; `error` — `MetaError`, `StoreError`.
//!
//! This is the only crate that knows openraft; `sluice-cluster` holds the state machine
//! itself, without I/O.
//!
//! How a server uses it:
//! 1. `MetaNode::start(MetaConfig::new(id, admin_addr, data_dir.join("meta"), secret))`, and
//!    merge `http::router(&node)` into the admin router served on `admin_addr`, behind a check
//!    that only the cluster identity (`ClusterSecret::credentials`) reaches `/internal/raft`
//!    and `/internal/meta`, and only an administrator the join routes.
//! 2. A new cluster: node 0 calls `initialize_single()`, then proposes `AllocateNodeId`
//!    (which answers 0 on a fresh state) and `AddNode` for itself.
//! 3. A joiner asks a member (over the server's own REST) to propose `AllocateNodeId`,
//!    starts its `MetaNode` with that id, and the member calls `add_node(id, admin_addr)` and
//!    proposes `AddNode`. A restart needs neither: the directory holds the membership.
//! 4. It follows `state()` and acts on map changes; planners publish maps with
//!    `propose(SetMap { expected_rev, .. })`, retrying from the new map on `StaleRev`.
#![deny(unsafe_code)]

mod config;
mod error;
mod forward;
pub mod http;
pub mod join;
mod leader;
mod network;
mod node;
pub mod secret;
mod store;
mod types;

pub use config::{MetaConfig, RPC_BODY_BYTES_MAX};
pub use error::{MetaError, StoreError};
pub use node::MetaNode;
pub use secret::ClusterSecret;
pub use types::{cluster_id, raft_id, LogPosition, Membership, Peer, TypeConfig};
