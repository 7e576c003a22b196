//! What the planner accepts. Inputs past these are refused as values, never planned. The
//! numbers are shared with the client, which refuses cluster maps past them.

pub use sluice_types::limits::{NODES_MAX, REPLICAS_MAX, VBUCKETS_MAX};
