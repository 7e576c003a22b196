pub mod dcp_peer;
