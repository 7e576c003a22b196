//! Limits that hold across the protocol, the engine and storage.

/// Longest document key, in bytes (classic framing allows more; Couchbase caps it here).
pub const KEY_BYTES_MAX: usize = 250;
/// Default largest document value, in bytes (`max_item_size`).
pub const VALUE_BYTES_MAX_DEFAULT: usize = 20 * 1024 * 1024;
/// Largest packet body a connection accepts before disconnecting, in bytes.
pub const PACKET_BODY_BYTES_MAX: usize = 30 * 1024 * 1024;
/// Relative expiries are at most this many seconds; larger values are absolute Unix times.
pub const EXPIRY_RELATIVE_SECONDS_MAX: u32 = 30 * 24 * 60 * 60;
