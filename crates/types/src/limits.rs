//! Limits that hold across the protocol, the engine and storage.

/// Longest document key, in bytes (classic framing allows more; Couchbase caps it here).
pub const KEY_BYTES_MAX: usize = 250;
/// Default largest document value, in bytes (`max_item_size`).
pub const VALUE_BYTES_MAX_DEFAULT: usize = 20 * 1024 * 1024;
/// Largest packet body a connection accepts before disconnecting, in bytes.
pub const PACKET_BODY_BYTES_MAX: usize = 30 * 1024 * 1024;
/// Relative expiries are at most this many seconds; larger values are absolute Unix times.
pub const EXPIRY_RELATIVE_SECONDS_MAX: u32 = 30 * 24 * 60 * 60;

/// Most vbuckets in a bucket. Couchbase's default and maximum; the SDKs hash keys onto the
/// map's length, so a bucket keeps its count for life.
pub const VBUCKETS_MAX: u16 = 1024;

/// Most replicas per vbucket: Couchbase's limit, and what the SDKs' durability levels assume.
pub const REPLICAS_MAX: u8 = 3;

/// Most nodes in a cluster (and in one rebalance plan, or one cluster map a client accepts).
/// The planner's replica fill step costs O(vbuckets × nodes) per vbucket that must move, so
/// this bounds a plan's work; it is far above the clusters Sluice targets.
pub const NODES_MAX: usize = 128;
