//! Who may call what on the admin port. Every request but `GET /health` must carry HTTP
//! Basic credentials, checked before its body is read or its route runs:
//!
//! | path | who | without credentials, or wrong ones | a user, on a cluster-only path |
//! |---|---|---|---|
//! | `/health` | anyone (probes, load balancers) | — | — |
//! | `/internal/meta/join/*` | an administrator, or the cluster | 401 | — |
//! | other `/internal/*` (Raft, forwarded proposals, rebalance internals, positions) | the cluster identity only | 401 | 403 |
//! | everything else (`/api/v1/...`, `/metrics`, stats, the map) | an administrator, or the cluster | 401 | — |
//!
//! Users are the node's (today one administrator, from `--username` / `--password`); the
//! cluster identity is `@cluster` with the cluster's secret (see `sluice_meta::secret`). An
//! unknown user and a wrong password get the same 401, so users cannot be enumerated.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use sluice_server::{Caller, CredentialsRefused, Node};
use std::sync::Arc;

/// Who a path is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Open,
    /// An administrator or the cluster.
    Admin,
    /// The cluster identity only.
    Cluster,
}

/// The access rule of `path` (the table above).
pub(crate) fn access(path: &str) -> Access {
    if path == "/health" {
        Access::Open
    } else if path.starts_with("/internal/meta/join/") {
        Access::Admin
    } else if path == "/internal" || path.starts_with("/internal/") {
        Access::Cluster
    } else {
        Access::Admin
    }
}

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 401: not authenticated.
    Unauthenticated(CredentialsRefused),
    /// 403: authenticated, not allowed here.
    Forbidden,
}

/// Whether `caller` (or its failure to authenticate) may use a path of rule `rule`.
pub(crate) fn decide(
    rule: Access,
    caller: Result<Caller, CredentialsRefused>,
) -> Result<(), Refusal> {
    match (rule, caller) {
        (Access::Open, _) => Ok(()),
        (_, Err(why)) => Err(Refusal::Unauthenticated(why)),
        (Access::Admin, Ok(_)) | (Access::Cluster, Ok(Caller::Cluster)) => Ok(()),
        (Access::Cluster, Ok(Caller::User(_))) => Err(Refusal::Forbidden),
    }
}

/// The middleware in front of every admin route.
pub(crate) async fn check(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    let rule = access(req.uri().path());
    if rule == Access::Open {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let caller = node.credentials.check_basic(header);
    match decide(rule, caller) {
        Ok(()) => next.run(req).await,
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
            tracing::info!(path = req.uri().path(), "admin request refused: 403");
            let error = "only the cluster's own members may call /internal/ routes";
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

    #[test]
    fn each_path_has_its_rule() {
        let table = [
            ("/health", Access::Open),
            ("/health/", Access::Admin),
            ("/metrics", Access::Admin),
            ("/api/v1/cluster/failover", Access::Admin),
            ("/pools/default/b/default", Access::Admin),
            ("/internal/meta/join/allocate", Access::Admin),
            ("/internal/meta/join/admit", Access::Admin),
            ("/internal/meta/propose", Access::Cluster),
            ("/internal/raft/vote", Access::Cluster),
            ("/internal/rebalance/takeover", Access::Cluster),
            ("/internal/vbuckets/positions", Access::Cluster),
            ("/internal", Access::Cluster),
            ("/internalx", Access::Admin),
            ("/nowhere", Access::Admin),
        ];
        for (path, rule) in table {
            assert_eq!(access(path), rule, "{path}");
        }
    }

    #[test]
    fn who_gets_through() {
        let admin = || Ok(Caller::User("Administrator".into()));
        let missing = || Err(CredentialsRefused::Missing);
        let wrong = || Err(CredentialsRefused::Wrong);
        let unauth = |why| Err(Refusal::Unauthenticated(why));
        let table = [
            (Access::Open, missing(), Ok(())),
            (Access::Open, wrong(), Ok(())),
            (Access::Admin, admin(), Ok(())),
            (Access::Admin, Ok(Caller::Cluster), Ok(())),
            (
                Access::Admin,
                missing(),
                unauth(CredentialsRefused::Missing),
            ),
            (Access::Admin, wrong(), unauth(CredentialsRefused::Wrong)),
            (Access::Cluster, Ok(Caller::Cluster), Ok(())),
            (Access::Cluster, admin(), Err(Refusal::Forbidden)),
            (Access::Cluster, wrong(), unauth(CredentialsRefused::Wrong)),
        ];
        for (rule, caller, want) in table {
            assert_eq!(decide(rule, caller.clone()), want, "{rule:?} {caller:?}");
        }
    }
}
