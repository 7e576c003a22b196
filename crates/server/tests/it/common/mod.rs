pub mod certs;
pub mod cluster;
pub mod dcp_peer;
pub mod kv_peer;

use sluice_engine::BucketType;
use sluice_server::ServerConfig;

/// A single node on loopback with every port chosen by the OS, a memcached listener, and the
/// given bucket. Tests adjust the rest before starting it.
#[allow(dead_code)]
pub fn loopback_config(
    dir: &std::path::Path,
    bucket_type: BucketType,
    vbuckets: u16,
    quota_mb: u64,
) -> ServerConfig {
    let mut c = ServerConfig::new(dir);
    c.kv_port = 0;
    c.admin_port = 0;
    c.memcached_port = Some(0);
    c.vbuckets = vbuckets;
    c.memory_quota_mb = quota_mb;
    c.bucket_type = bucket_type;
    c
}
