//! Talking to a remote cluster's admin port, as the credentials of a remote reference:
//! who it is (`GET /pools`: its uuid, and whether the credentials are good), and what a
//! target bucket is there (its conflict resolution, and its map, from which a pipeline
//! learns the KV ports to write to).
//!
//! A reference with a CA certificate is reached over TLS only (Couchbase's
//! `secureType=full`): its hostname names the remote's TLS admin port, the certificates
//! must chain to the CA, and the pipelines write to the KV TLS ports (`kvSSL`) the map
//! names. Without one, everything goes in the clear.
//!
//! Every call is bounded in time ([`REMOTE_TIMEOUT`]) and in answer size (`admin_http`).

use sluice_client::admin_http::{self, AdminAnswer, AdminHttpError, Body, Method};
use sluice_client::net::{trusting_pem, Dial};
use sluice_client::{Credentials, TlsConnect};
use sluice_cluster::metadata::{ConflictMode, RemoteCluster};
use std::sync::Arc;
use std::time::Duration;

/// The longest a call to a remote cluster's admin port may take.
pub const REMOTE_TIMEOUT: Duration = Duration::from_secs(5);
/// The admin ports assumed when a hostname names none (Couchbase's), in the clear and over
/// TLS.
pub const DEFAULT_ADMIN_PORT: u16 = 8091;
pub const DEFAULT_ADMIN_TLS_PORT: u16 = 18091;

/// How a remote cluster is reached: its admin address, as whom, and with TLS trusting the
/// reference's CA when it has one.
#[derive(Clone)]
pub struct RemoteAccess {
    /// `host:port` of the remote's admin port (its TLS one with a CA).
    pub addr: String,
    pub who: Credentials,
    dial: Dial,
}

impl RemoteAccess {
    /// `hostname` (the default port added if it names none), as `who`, over TLS trusting
    /// `ca_pem` when given.
    pub fn new(
        hostname: &str,
        who: Credentials,
        ca_pem: Option<&str>,
    ) -> Result<RemoteAccess, RemoteError> {
        let tls = match ca_pem {
            Some(pem) => {
                Some(
                    trusting_pem(pem.as_bytes()).map_err(|e| RemoteError::BadCertificate {
                        reason: e.to_string(),
                    })?,
                )
            }
            None => None,
        };
        Ok(RemoteAccess {
            addr: admin_addr(hostname, tls.is_some()),
            who,
            dial: Dial { source: None, tls },
        })
    }

    /// How reference `r` is reached.
    pub fn of(r: &RemoteCluster) -> Result<RemoteAccess, RemoteError> {
        RemoteAccess::new(
            &r.hostname,
            Credentials::new(&r.username, &r.password),
            r.ca_pem.as_deref(),
        )
    }

    pub fn encrypted(&self) -> bool {
        self.dial.tls.is_some()
    }

    /// TLS for a KV connection to `host`, when the remote is reached over TLS.
    pub fn kv_tls(&self, host: &str) -> Result<Option<Arc<TlsConnect>>, RemoteError> {
        let Some(config) = &self.dial.tls else {
            return Ok(None);
        };
        let tls = TlsConnect::for_host(config.clone(), host).map_err(|e| {
            RemoteError::BadCertificate {
                reason: format!("{host}: {e}"),
            }
        })?;
        Ok(Some(Arc::new(tls)))
    }
}

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
    #[error("the certificate is not a usable CA certificate (PEM): {reason}")]
    BadCertificate { reason: String },
}

/// `host:port`, the default admin port (its TLS one with `tls`) added when `hostname` names
/// no port.
pub fn admin_addr(hostname: &str, tls: bool) -> String {
    let bracketed_v6 = hostname.starts_with('[') && hostname.ends_with(']');
    let has_port = !bracketed_v6 && hostname.rsplit_once(':').is_some();
    let port = match tls {
        true => DEFAULT_ADMIN_TLS_PORT,
        false => DEFAULT_ADMIN_PORT,
    };
    if has_port {
        hostname.to_string()
    } else {
        format!("{hostname}:{port}")
    }
}

async fn get(remote: &RemoteAccess, path: &str) -> Result<AdminAnswer, RemoteError> {
    let addr = remote.addr.as_str();
    let answer = admin_http::send(
        &remote.dial,
        addr,
        &remote.who,
        Method::GET,
        path,
        Body::None,
        REMOTE_TIMEOUT,
    )
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
pub async fn cluster_uuid(remote: &RemoteAccess) -> Result<String, RemoteError> {
    let addr = remote.addr.as_str();
    let path = "/pools";
    let answer = get(remote, path).await?;
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
    remote: &RemoteAccess,
    bucket: &str,
) -> Result<TargetBucket, RemoteError> {
    let addr = remote.addr.as_str();
    let path = format!(
        "/pools/default/buckets/{}",
        admin_http::percent_encode(bucket)
    );
    let answer = get(remote, &path).await?;
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
    let answer = get(remote, &map_path).await?;
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
    let mut kv_seeds = Vec::with_capacity(view.nodes().len());
    for n in view.nodes() {
        if !remote.encrypted() {
            kv_seeds.push(n.addr.clone());
            continue;
        }
        let tls = n.kv_tls_addr().ok_or_else(|| {
            bad(
                addr,
                &map_path,
                format!(
                    "no TLS KV port (kvSSL) for {}: the remote serves KV in the clear only",
                    n.addr
                ),
            )
        })?;
        kv_seeds.push(tls);
    }
    if kv_seeds.is_empty() {
        return Err(bad(addr, &map_path, "the map lists no node"));
    }
    Ok(TargetBucket { conflict, kv_seeds })
}

/// The collections of bucket `bucket` of the cluster at `addr`, by scope and name.
pub async fn target_collections(
    remote: &RemoteAccess,
    bucket: &str,
) -> Result<std::collections::HashMap<super::collections::Path, u32>, RemoteError> {
    let addr = remote.addr.as_str();
    let path = format!(
        "/pools/default/buckets/{}/scopes",
        admin_http::percent_encode(bucket)
    );
    let answer = get(remote, &path).await?;
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
    use super::*;

    #[test]
    fn a_hostname_without_port_gets_the_admin_default() {
        assert_eq!(admin_addr("10.0.0.1", false), "10.0.0.1:8091");
        assert_eq!(admin_addr("10.0.0.1", true), "10.0.0.1:18091");
        assert_eq!(admin_addr("10.0.0.1:9000", true), "10.0.0.1:9000");
        assert_eq!(admin_addr("[::1]", false), "[::1]:8091");
        assert_eq!(admin_addr("[::1]:9000", false), "[::1]:9000");
    }

    #[test]
    fn a_reference_with_a_ca_is_reached_over_tls_only() {
        let who = Credentials::new("u", "p");
        let clear = RemoteAccess::new("h", who.clone(), None).unwrap();
        assert!(!clear.encrypted() && clear.kv_tls("h").unwrap().is_none());
        assert_eq!(clear.addr, "h:8091");
        let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let pem = ca.cert.pem();
        let tls = RemoteAccess::new("h", who.clone(), Some(&pem)).unwrap();
        assert!(tls.encrypted() && tls.kv_tls("127.0.0.1").unwrap().is_some());
        assert_eq!(tls.addr, "h:18091");
        for bad in [
            "",
            "not a certificate",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            let e = RemoteAccess::new("h", who.clone(), Some(bad))
                .err()
                .unwrap();
            assert!(
                matches!(e, RemoteError::BadCertificate { .. }),
                "{bad:?}: {e}"
            );
        }
    }
}
