//! What the planner accepts. Inputs past these are refused as values, never planned.

/// Most vbuckets in a bucket. Couchbase's default and maximum; the SDKs hash keys onto the
/// map's length, so a bucket keeps its count for life.
pub const VBUCKETS_MAX: u16 = 1024;

/// Most replicas per vbucket: Couchbase's limit, and what the SDKs' durability levels assume.
pub const REPLICAS_MAX: u8 = 3;

/// Most nodes in one plan. The replica fill step costs O(vbuckets × nodes) per vbucket that
/// must move, so this bounds a plan's work; it is far above the clusters Sluice targets.
pub const NODES_MAX: usize = 128;
