//! Talking to a remote cluster's admin port, as the credentials of a remote reference:
//! who it is (`GET /pools`: its uuid, and whether the credentials are good), and what a
//! target bucket is there (its conflict resolution, and its map, from which a pipeline
//! learns the KV ports to write to).
//!
//! Every call is bounded in time ([`REMOTE_TIMEOUT`]) and in answer size (`admin_http`).

use sluice_client::admin_http::{self, AdminAnswer, AdminHttpError};
use sluice_client::Credentials;
use sluice_cluster::metadata::ConflictMode;
use std::time::Duration;

/// The longest a call to a remote cluster's admin port may take.
pub const REMOTE_TIMEOUT: Duration = Duration::from_secs(5);
/// The admin port assumed when a hostname names none (Couchbase's).
pub const DEFAULT_ADMIN_PORT: u16 = 8091;

/// Why a remote cluster could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot reach the remote cluster at {addr}: {source}")]
    Unreachable {
        addr: String,
        #[source]
        source: AdminHttpError,
    },
    #[error("Authentication failed. Verify username and password. (HTTP 401 from {addr})")]
    Authentication { addr: String },
    #[error(
        "the remote cluster at {addr} refused the user: it lacks the role to {what} (HTTP 403)"
    )]
    Forbidden { addr: String, what: &'static str },
    #[error("the remote cluster at {addr} answered {path} with HTTP {status}")]
    Status {
        addr: String,
        path: String,
        status: u16,
    },
    #[error("the remote cluster at {addr} gave an unusable answer to {path}: {why}")]
    BadAnswer {
        addr: String,
        path: String,
        why: String,
    },
    #[error("the remote cluster has no bucket {bucket:?}")]
    NoBucket { bucket: String },
}

/// `host:port`, the default admin port added when `hostname` names no port.
pub fn admin_addr(hostname: &str) -> String {
    let bracketed_v6 = hostname.starts_with('[') && hostname.ends_with(']');
    let has_port = !bracketed_v6 && hostname.rsplit_once(':').is_some();
    if has_port {
        hostname.to_string()
    } else {
        format!("{hostname}:{DEFAULT_ADMIN_PORT}")
    }
}

async fn get(addr: &str, who: &Credentials, path: &str) -> Result<AdminAnswer, RemoteError> {
    let answer = admin_http::get(addr, who, path, REMOTE_TIMEOUT)
        .await
        .map_err(|source| RemoteError::Unreachable {
            addr: addr.to_string(),
            source,
        })?;
    match answer.status {
        401 => Err(RemoteError::Authentication {
            addr: addr.to_string(),
        }),
        _ => Ok(answer),
    }
}

fn bad(addr: &str, path: &str, why: impl Into<String>) -> RemoteError {
    RemoteError::BadAnswer {
        addr: addr.to_string(),
        path: path.to_string(),
        why: why.into(),
    }
}

/// The uuid of the cluster at `addr`, checking the credentials on the way.
pub async fn cluster_uuid(addr: &str, who: &Credentials) -> Result<String, RemoteError> {
    let path = "/pools";
    let answer = get(addr, who, path).await?;
    if answer.status == 403 {
        return Err(RemoteError::Forbidden {
            addr: addr.to_string(),
            what: "read the cluster",
        });
    }
    if !answer.ok() {
        return Err(RemoteError::Status {
            addr: addr.to_string(),
            path: path.to_string(),
            status: answer.status,
        });
    }
    match answer.body.get("uuid").and_then(|u| u.as_str()) {
        Some(uuid) if !uuid.is_empty() => Ok(uuid.to_string()),
        _ => Err(bad(
            addr,
            path,
            "no cluster uuid (is it a cluster that was initialized?)",
        )),
    }
}

/// What a replication needs to know of its target bucket.
#[derive(Debug, Clone)]
pub struct TargetBucket {
    pub conflict: ConflictMode,
    /// The bucket's map as the remote serves it (`/pools/default/b/B`): its nodes' KV
    /// addresses are the pipeline's seeds.
    pub kv_seeds: Vec<String>,
}

/// Bucket `bucket` of the cluster at `addr`.
pub async fn target_bucket(
    addr: &str,
    who: &Credentials,
    bucket: &str,
) -> Result<TargetBucket, RemoteError> {
    let path = format!(
        "/pools/default/buckets/{}",
        admin_http::percent_encode(bucket)
    );
    let answer = get(addr, who, &path).await?;
    match answer.status {
        404 => {
            return Err(RemoteError::NoBucket {
                bucket: bucket.to_string(),
            })
        }
        403 => {
            return Err(RemoteError::Forbidden {
                addr: addr.to_string(),
                what: "read the target bucket",
            })
        }
        s if !(200..300).contains(&s) => {
            return Err(RemoteError::Status {
                addr: addr.to_string(),
                path,
                status: s,
            })
        }
        _ => {}
    }
    let word = answer
        .body
        .get("conflictResolutionType")
        .and_then(|c| c.as_str())
        .unwrap_or("seqno");
    let conflict = ConflictMode::parse(word)
        .ok_or_else(|| bad(addr, &path, format!("conflict resolution {word:?}")))?;
    let map_path = format!("/pools/default/b/{}", admin_http::percent_encode(bucket));
    let answer = get(addr, who, &map_path).await?;
    if !answer.ok() {
        return Err(RemoteError::Status {
            addr: addr.to_string(),
            path: map_path,
            status: answer.status,
        });
    }
    let raw = serde_json::to_vec(&answer.body).map_err(|e| bad(addr, &map_path, e.to_string()))?;
    let view =
        sluice_client::ClusterView::parse(&raw).map_err(|e| bad(addr, &map_path, e.to_string()))?;
    let kv_seeds: Vec<String> = view.nodes().iter().map(|n| n.addr.clone()).collect();
    if kv_seeds.is_empty() {
        return Err(bad(addr, &map_path, "the map lists no node"));
    }
    Ok(TargetBucket { conflict, kv_seeds })
}

/// The collections of bucket `bucket` of the cluster at `addr`, by scope and name.
pub async fn target_collections(
    addr: &str,
    who: &Credentials,
    bucket: &str,
) -> Result<std::collections::HashMap<super::collections::Path, u32>, RemoteError> {
    let path = format!(
        "/pools/default/buckets/{}/scopes",
        admin_http::percent_encode(bucket)
    );
    let answer = get(addr, who, &path).await?;
    match answer.status {
        404 => Err(RemoteError::NoBucket {
            bucket: bucket.to_string(),
        }),
        s if !(200..300).contains(&s) => Err(RemoteError::Status {
            addr: addr.to_string(),
            path,
            status: s,
        }),
        _ => super::collections::parse_manifest(&answer.body)
            .map_err(|e| bad(addr, &path, e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::admin_addr;

    #[test]
    fn a_hostname_without_port_gets_the_admin_default() {
        assert_eq!(admin_addr("10.0.0.1"), "10.0.0.1:8091");
        assert_eq!(admin_addr("10.0.0.1:9000"), "10.0.0.1:9000");
        assert_eq!(admin_addr("[::1]"), "[::1]:8091");
        assert_eq!(admin_addr("[::1]:9000"), "[::1]:9000");
    }
}
