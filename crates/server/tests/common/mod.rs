pub mod cluster;
pub mod dcp_peer;
pub mod kv_peer;
