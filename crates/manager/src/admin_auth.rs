//! Who may call what on the admin port. Every request but `GET /health` must carry HTTP
//! Basic credentials, checked before its body is read or its route runs, and the caller's
//! roles (`sluice_cluster::rbac`) must allow what the route does:
//!
//! | route | needs |
//! |---|---|
//! | `/health` | nothing (probes, load balancers) |
//! | `/query/service` | any user (each statement is checked against the roles: see `sluice_server::query_service`) |
//! | `GET /pools` (the cluster's uuid, as a remote cluster checks credentials) | any user |
//! | remote clusters and replications (`/pools/default/remoteClusters...`, `/controller/createReplication`, `/controller/cancelXDCR/...`, `/settings/replications/...`) | reading: reading the cluster; changing: managing XDCR (`replication_admin`, `cluster_admin`) |
//! | `GET /api/v1/cluster...`, other GETs | reading the cluster (`ro_admin`, `cluster_admin`, `replication_admin`) |
//! | `POST /api/v1/cluster/...`, `/internal/meta/join/*`, other non-GETs | changing the cluster (`cluster_admin`) |
//! | `/metrics`, `/api/v1/buckets/B/stats` | stats (`stats_reader`, `ro_admin`, `bucket_admin`) |
//! | `/pools/default/b/B` (the map, as SDKs fetch it), `GET /pools/default/buckets/B` | any role on bucket B |
//! | `POST /pools/default/buckets/B` (edit) | managing bucket B (`bucket_admin[B]`) |
//! | `GET /pools/default/buckets/B/scopes` (the collections manifest) | any role on bucket B |
//! | other methods on `/pools/default/buckets/B/scopes...` (scopes and collections) | managing bucket B (`bucket_admin[B]`) |
//! | `POST /pools/default/buckets` (create), `DELETE /pools/default/buckets/B` | changing the cluster (`cluster_admin`) |
//! | `/settings/rbac/...`, `POST /node/controller/reloadCertificate` | security (`admin` only) |
//! | other `/internal/*` (Raft, forwarded proposals, rebalance internals, positions) | the cluster identity only |
//!
//! `admin` allows everything, and so does the cluster identity (`@cluster` with the cluster's
//! secret; see `sluice_meta::secret`). Without credentials, or with wrong ones, the answer is
//! 401; an unknown user and a wrong password look the same, so users cannot be enumerated.
//! Authenticated without the role: 403.
//!
//! On a connection of the members' reserve (the admin port is at `--admin-max-connections`,
//! see `sluice_server::admin_limits`), only the cluster identity is served: anything else,
//! `/health` included, gets 503 and the connection closes.
//!
//! When the cluster encrypts its control traffic (`ServerConfig::cluster_ca`), the cluster
//! identity is taken only over TLS: on the cleartext admin port it gets 403, so a member
//! misconfigured to call in the clear fails loudly instead of working. So are joins (their
//! answer carries the cluster secret): a joiner must come through the TLS admin port.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use sluice_cluster::rbac::{allows, Privilege, Role};
use sluice_server::admin_limits::AdminConn;
use sluice_server::{Caller, CredentialsRefused, Node};
use std::sync::Arc;

/// What a route needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rule {
    Open,
    /// The cluster identity only.
    Cluster,
    /// A caller whose roles allow this.
    Needs(Need),
    /// Any authenticated caller: the route checks the roles itself (the query service,
    /// whose statements name the buckets they touch).
    Authenticated,
}

/// A privilege a route needs (`Privilege`, owning its bucket name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Need {
    AnyOfBucket(String),
    ManageBucket(String),
    ClusterRead,
    ClusterWrite,
    Stats,
    Security,
    Replication,
}

impl Need {
    fn privilege(&self) -> Privilege<'_> {
        match self {
            Need::AnyOfBucket(b) => Privilege::AnyOfBucket(b),
            Need::ManageBucket(b) => Privilege::ManageBucket(b),
            Need::ClusterRead => Privilege::ClusterRead,
            Need::ClusterWrite => Privilege::ClusterWrite,
            Need::Stats => Privilege::Stats,
            Need::Security => Privilege::Security,
            Need::Replication => Privilege::Replication,
        }
    }
}

/// The rule of `method path` (the table above).
pub(crate) fn rule(method: &Method, path: &str) -> Rule {
    let changes = method != Method::GET && method != Method::HEAD;
    if path == "/health" {
        Rule::Open
    } else if path == "/query/service" || path == "/pools" {
        Rule::Authenticated
    } else if is_xdcr(path) {
        match changes {
            true => Rule::Needs(Need::Replication),
            false => Rule::Needs(Need::ClusterRead),
        }
    } else if path.starts_with("/internal/meta/join/") {
        Rule::Needs(Need::ClusterWrite)
    } else if path == "/internal" || path.starts_with("/internal/") {
        Rule::Cluster
    } else if path == "/settings/rbac"
        || path.starts_with("/settings/rbac/")
        || path == "/node/controller/reloadCertificate"
    {
        Rule::Needs(Need::Security)
    } else if path == "/metrics" || is_bucket_stats(path) {
        Rule::Needs(Need::Stats)
    } else if let Some(bucket) = collections_bucket(path) {
        let bucket = bucket.to_string();
        match changes {
            true => Rule::Needs(Need::ManageBucket(bucket)),
            false => Rule::Needs(Need::AnyOfBucket(bucket)),
        }
    } else if let Some(bucket) = path
        .strip_prefix("/pools/default/buckets/")
        .filter(|b| method == Method::POST && !b.is_empty() && !b.contains('/'))
    {
        Rule::Needs(Need::ManageBucket(bucket.to_string()))
    } else if let Some(bucket) = path
        .strip_prefix("/pools/default/b/")
        .or_else(|| path.strip_prefix("/pools/default/bs/"))
        .or_else(|| path.strip_prefix("/pools/default/buckets/"))
        .filter(|b| !changes && !b.is_empty() && !b.contains('/'))
    {
        Rule::Needs(Need::AnyOfBucket(bucket.to_string()))
    } else if changes {
        Rule::Needs(Need::ClusterWrite)
    } else {
        Rule::Needs(Need::ClusterRead)
    }
}

/// The bucket B of `/pools/default/buckets/B/scopes` and the paths below it (its scopes and
/// collections).
fn collections_bucket(path: &str) -> Option<&str> {
    let (bucket, rest) = path
        .strip_prefix("/pools/default/buckets/")?
        .split_once('/')?;
    let scopes = rest == "scopes" || rest.starts_with("scopes/");
    (scopes && !bucket.is_empty()).then_some(bucket)
}

/// Remote clusters and replications (`xdcr::routes`).
fn is_xdcr(path: &str) -> bool {
    path == "/pools/default/remoteClusters"
        || path.starts_with("/pools/default/remoteClusters/")
        || path == "/controller/createReplication"
        || path.starts_with("/controller/cancelXDCR/")
        || path.starts_with("/settings/replications/")
}

fn is_bucket_stats(path: &str) -> bool {
    path.strip_prefix("/api/v1/buckets/")
        .and_then(|rest| rest.strip_suffix("/stats"))
        .is_some_and(|b| !b.is_empty() && !b.contains('/'))
}

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 401: not authenticated.
    Unauthenticated(CredentialsRefused),
    /// 403: authenticated, not allowed here.
    Forbidden,
}

/// Whether `caller` (or its failure to authenticate), with `roles`, may use a route of
/// `rule`.
pub(crate) fn decide(
    rule: &Rule,
    caller: &Result<Caller, CredentialsRefused>,
    roles: &[Role],
) -> Result<(), Refusal> {
    match (rule, caller) {
        (Rule::Open, _) => Ok(()),
        (_, Err(why)) => Err(Refusal::Unauthenticated(*why)),
        (_, Ok(Caller::Cluster)) => Ok(()),
        (Rule::Cluster, Ok(Caller::User(_))) => Err(Refusal::Forbidden),
        (Rule::Authenticated, Ok(Caller::User(_))) => Ok(()),
        (Rule::Needs(need), Ok(Caller::User(_))) => match allows(roles, need.privilege()) {
            true => Ok(()),
            false => Err(Refusal::Forbidden),
        },
    }
}

/// 503 for a request other than a member's on a connection of the members' reserve, and the
/// connection closed after it, so its slot goes back to the members.
fn reserve_refused(path: &str) -> Response {
    tracing::debug!(
        path,
        "admin port full: a connection in the members' reserve refused"
    );
    let error = "the admin port is at its connection limit (--admin-max-connections); \
                 try again later";
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CONNECTION, "close")],
        Json(serde_json::json!({ "error": error })),
    )
        .into_response()
}

/// Marks the requests that came in over TLS (the TLS admin port's router adds it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OverTls;

/// Whether a request must be refused because it came in the clear while the cluster
/// encrypts its control traffic: one as the cluster identity, or a join (answered with the
/// secret).
pub(crate) fn cluster_in_the_clear(
    caller: &Result<Caller, CredentialsRefused>,
    path: &str,
    encrypted: bool,
    over_tls: bool,
) -> bool {
    let member = matches!(caller, Ok(Caller::Cluster)) || path.starts_with("/internal/meta/join/");
    encrypted && !over_tls && member
}

/// The middleware in front of every admin route.
pub(crate) async fn check(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    let rule = rule(req.method(), req.uri().path());
    let reserved = req
        .extensions()
        .get::<ConnectInfo<AdminConn>>()
        .is_some_and(|c| c.0.reserved);
    if rule == Rule::Open && !reserved {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let caller = node.credentials.check_basic(header);
    if reserved && !matches!(caller, Ok(Caller::Cluster)) {
        return reserve_refused(req.uri().path());
    }
    if rule == Rule::Open {
        return next.run(req).await;
    }
    let roles = match &caller {
        Ok(who) => node.credentials.roles(who),
        Err(_) => Arc::from([]),
    };
    let over_tls = req.extensions().get::<OverTls>().is_some();
    let path = req.uri().path();
    if cluster_in_the_clear(&caller, path, node.member_tls.is_some(), over_tls) {
        tracing::warn!(
            path,
            "a member called (or a node tried to join) in the clear, but the cluster \
             encrypts its traffic: 403"
        );
        let error = "this cluster encrypts its control traffic: members call, and nodes join \
                     through, its TLS admin port";
        return (
            StatusCode::FORBIDDEN,
            Json(serde_json::json!({ "error": error })),
        )
            .into_response();
    }
    match decide(&rule, &caller, &roles) {
        Ok(()) => {
            let mut req = req;
            if let Ok(who) = caller {
                req.extensions_mut()
                    .insert(sluice_server::query_service::Authenticated { caller: who, roles });
            }
            next.run(req).await
        }
        Err(Refusal::Unauthenticated(why)) => {
            tracing::debug!(path = req.uri().path(), %why, "admin request refused: 401");
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, r#"Basic realm="Sluice""#)],
                Json(serde_json::json!({ "error": why.to_string() })),
            )
                .into_response()
        }
        Err(Refusal::Forbidden) => {
            tracing::info!(path = req.uri().path(), user = ?caller, "admin request refused: 403");
            let error = match rule {
                Rule::Cluster => {
                    "only the cluster's own members may call /internal/ routes".to_string()
                }
                Rule::Needs(need) => format!("the user's roles do not allow this ({need:?})"),
                Rule::Open | Rule::Authenticated => {
                    unreachable!("open routes and authenticated callers are never refused")
                }
            };
            (
                StatusCode::FORBIDDEN,
                Json(serde_json::json!({ "error": error })),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::rbac::parse_roles;

    #[test]
    fn an_encrypted_cluster_takes_its_identity_over_tls_only() {
        let member = Ok(Caller::Cluster);
        let user = Ok(Caller::User("alice".into()));
        let map_rev = "/internal/rebalance/map_rev";
        assert!(cluster_in_the_clear(&member, map_rev, true, false));
        assert!(!cluster_in_the_clear(&member, map_rev, true, true));
        let plain = !cluster_in_the_clear(&member, map_rev, false, false);
        assert!(plain, "not encrypted");
        let view = "/api/v1/cluster";
        let clear = !cluster_in_the_clear(&user, view, true, false);
        assert!(clear, "users may call in the clear");
        let refused = Err(CredentialsRefused::Missing);
        let unauthenticated = !cluster_in_the_clear(&refused, map_rev, true, false);
        assert!(unauthenticated, "a 401 as before");
        // A join is answered with the secret: only over TLS.
        let join = "/internal/meta/join/allocate";
        assert!(cluster_in_the_clear(&user, join, true, false));
        assert!(!cluster_in_the_clear(&user, join, true, true));
        assert!(!cluster_in_the_clear(&user, join, false, false));
    }

    #[test]
    fn each_route_has_its_rule() {
        let (get, post) = (Method::GET, Method::POST);
        let needs = |n| Rule::Needs(n);
        let table = [
            (&get, "/health", Rule::Open),
            (&get, "/health/", needs(Need::ClusterRead)),
            (&get, "/pools", Rule::Authenticated),
            (
                &get,
                "/pools/default/remoteClusters",
                needs(Need::ClusterRead),
            ),
            (
                &post,
                "/pools/default/remoteClusters",
                needs(Need::Replication),
            ),
            (
                &Method::DELETE,
                "/pools/default/remoteClusters/east",
                needs(Need::Replication),
            ),
            (
                &post,
                "/controller/createReplication",
                needs(Need::Replication),
            ),
            (
                &Method::DELETE,
                "/controller/cancelXDCR/u%2Fa%2Fb",
                needs(Need::Replication),
            ),
            (
                &get,
                "/settings/replications/u%2Fa%2Fb",
                needs(Need::ClusterRead),
            ),
            (
                &post,
                "/settings/replications/u%2Fa%2Fb",
                needs(Need::Replication),
            ),
            (&get, "/pools/default/tasks", needs(Need::ClusterRead)),
            (&get, "/internal/xdcr/stats", Rule::Cluster),
            (&get, "/metrics", needs(Need::Stats)),
            (&get, "/api/v1/buckets/default/stats", needs(Need::Stats)),
            (&get, "/api/v1/cluster", needs(Need::ClusterRead)),
            (&get, "/api/v1/cluster/rebalance", needs(Need::ClusterRead)),
            (&post, "/api/v1/cluster/failover", needs(Need::ClusterWrite)),
            (
                &get,
                "/pools/default/b/default",
                needs(Need::AnyOfBucket("default".into())),
            ),
            (&post, "/pools/default/b/default", needs(Need::ClusterWrite)),
            (&get, "/pools/default/buckets", needs(Need::ClusterRead)),
            (&post, "/pools/default/buckets", needs(Need::ClusterWrite)),
            (
                &get,
                "/pools/default/buckets/orders",
                needs(Need::AnyOfBucket("orders".into())),
            ),
            (
                &post,
                "/pools/default/buckets/orders",
                needs(Need::ManageBucket("orders".into())),
            ),
            (
                &Method::DELETE,
                "/pools/default/buckets/orders",
                needs(Need::ClusterWrite),
            ),
            (
                &get,
                "/pools/default/buckets/orders/scopes",
                needs(Need::AnyOfBucket("orders".into())),
            ),
            (
                &post,
                "/pools/default/buckets/orders/scopes",
                needs(Need::ManageBucket("orders".into())),
            ),
            (
                &Method::DELETE,
                "/pools/default/buckets/orders/scopes/s1",
                needs(Need::ManageBucket("orders".into())),
            ),
            (
                &post,
                "/pools/default/buckets/orders/scopes/s1/collections",
                needs(Need::ManageBucket("orders".into())),
            ),
            (
                &Method::DELETE,
                "/pools/default/buckets/orders/scopes/s1/collections/c1",
                needs(Need::ManageBucket("orders".into())),
            ),
            (
                &post,
                "/pools/default/buckets/orders/scopesx",
                needs(Need::ClusterWrite),
            ),
            (
                &post,
                "/pools/default/buckets//scopes",
                needs(Need::ClusterWrite),
            ),
            (&get, "/settings/rbac/users", needs(Need::Security)),
            (
                &post,
                "/node/controller/reloadCertificate",
                needs(Need::Security),
            ),
            (
                &Method::PUT,
                "/settings/rbac/users/local/u",
                needs(Need::Security),
            ),
            (
                &post,
                "/internal/meta/join/allocate",
                needs(Need::ClusterWrite),
            ),
            (&post, "/internal/meta/propose", Rule::Cluster),
            (&post, "/internal/raft/vote", Rule::Cluster),
            (&get, "/internal/vbuckets/positions", Rule::Cluster),
            (&get, "/internal", Rule::Cluster),
            (&get, "/internalx", needs(Need::ClusterRead)),
            (&Method::DELETE, "/nowhere", needs(Need::ClusterWrite)),
        ];
        for (method, path, want) in table {
            assert_eq!(rule(method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn who_gets_through() {
        let user = || Ok(Caller::User("u".into()));
        let cluster = Ok(Caller::Cluster);
        let missing = Err(CredentialsRefused::Missing);
        let roles = |r: &str| parse_roles(r).unwrap_or_default();
        let write = Rule::Needs(Need::ClusterWrite);
        let read = Rule::Needs(Need::ClusterRead);
        let bucket = Rule::Needs(Need::AnyOfBucket("default".into()));
        let stats = Rule::Needs(Need::Stats);
        let manage = Rule::Needs(Need::ManageBucket("default".into()));
        let security = Rule::Needs(Need::Security);
        let forbidden = Err(Refusal::Forbidden);
        let table = [
            (&Rule::Open, &missing, roles("ro_admin"), Ok(())),
            (
                &write,
                &missing,
                roles("admin"),
                Err(Refusal::Unauthenticated(CredentialsRefused::Missing)),
            ),
            (&write, &user(), roles("admin"), Ok(())),
            (&write, &user(), roles("cluster_admin"), Ok(())),
            (&write, &user(), roles("ro_admin"), forbidden.clone()),
            (&read, &user(), roles("ro_admin"), Ok(())),
            (
                &read,
                &user(),
                roles("data_reader[default]"),
                forbidden.clone(),
            ),
            (&bucket, &user(), roles("data_reader[default]"), Ok(())),
            (
                &bucket,
                &user(),
                roles("data_reader[other]"),
                forbidden.clone(),
            ),
            (&manage, &user(), roles("bucket_admin[default]"), Ok(())),
            (&manage, &user(), roles("cluster_admin"), Ok(())),
            (
                &manage,
                &user(),
                roles("data_writer[default]"),
                forbidden.clone(),
            ),
            (
                &manage,
                &user(),
                roles("bucket_admin[other]"),
                forbidden.clone(),
            ),
            (&stats, &user(), roles("stats_reader"), Ok(())),
            (
                &stats,
                &user(),
                roles("data_writer[default]"),
                forbidden.clone(),
            ),
            (
                &security,
                &user(),
                roles("cluster_admin"),
                forbidden.clone(),
            ),
            (&security, &user(), roles("admin"), Ok(())),
            (&Rule::Cluster, &user(), roles("admin"), forbidden.clone()),
            (&Rule::Cluster, &cluster, roles(""), Ok(())),
            (&security, &cluster, roles(""), Ok(())),
        ];
        for (rule, caller, roles, want) in table {
            assert_eq!(
                decide(rule, caller, &roles),
                want,
                "{rule:?} {caller:?} {roles:?}"
            );
        }
    }
}
