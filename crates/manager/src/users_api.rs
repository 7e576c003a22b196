//! Users, through REST shaped like Couchbase's (so the SDKs' user managers work):
//!
//! - `PUT /settings/rbac/users/local/NAME` — form body `password=…&roles=data_reader[b],…`
//!   (`name`, the full name, is accepted and ignored): creates the user or replaces its
//!   roles, and its password when one is given (a new user needs one). 200; 400 with
//!   `{"errors": {field: why}}` for a bad name, roles or password.
//! - `GET /settings/rbac/users` (or `.../users/local`) — every user: `[{"id", "domain": "local", "roles":
//!   [{"role", "bucket_name"?}]}]`; `GET /settings/rbac/users/local/NAME` — one, or 404.
//! - `DELETE /settings/rbac/users/local/NAME` — 200, or 404.
//!
//! The password never leaves this node: its verifiers are derived here (PBKDF2, off the
//! async workers) and only they are proposed to the replicated metadata. Only `admin` may
//! call these routes (`admin_auth`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Form, Json, Router};
use serde_json::json;
use sluice_cluster::metadata::{MetaCommand, Rejection, UserRecord};
use sluice_cluster::rbac::{parse_roles, Role};
use sluice_meta::MetaNode;
use sluice_server::Node;
use std::sync::Arc;

#[derive(Clone)]
struct Users {
    node: Arc<Node>,
    meta: MetaNode,
}

/// The user routes, for the admin port.
pub(crate) fn router(node: Arc<Node>, meta: MetaNode) -> Router {
    Router::new()
        .route("/settings/rbac/users", get(list))
        .route("/settings/rbac/users/local", get(list))
        .route(
            "/settings/rbac/users/local/{name}",
            get(one).put(put).delete(delete),
        )
        .with_state(Users { node, meta })
}

/// The form of `PUT /settings/rbac/users/local/NAME`.
#[derive(Debug, serde::Deserialize)]
struct PutForm {
    password: Option<String>,
    roles: Option<String>,
}

fn bad(field: &str, why: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "errors": { field: why.to_string() } })),
    )
        .into_response()
}

fn user_json(name: &str, roles: &[Role]) -> serde_json::Value {
    let roles: Vec<_> = roles
        .iter()
        .map(|r| match r.bucket() {
            Some(b) => json!({ "role": r.name(), "bucket_name": b }),
            None => json!({ "role": r.name() }),
        })
        .collect();
    json!({ "id": name, "domain": "local", "name": "", "roles": roles })
}

async fn list(State(s): State<Users>) -> Response {
    let state = s.meta.state().borrow().clone();
    let users: Vec<_> = state
        .users()
        .iter()
        .map(|(name, u)| user_json(name, &u.roles))
        .collect();
    Json(users).into_response()
}

async fn one(State(s): State<Users>, Path(name): Path<String>) -> Response {
    let state = s.meta.state().borrow().clone();
    match state.users().get(&name) {
        Some(u) => Json(user_json(&name, &u.roles)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": "no such user" })),
        )
            .into_response(),
    }
}

async fn put(
    State(s): State<Users>,
    Path(name): Path<String>,
    Form(form): Form<PutForm>,
) -> Response {
    if let Err(why) = sluice_cluster::metadata::check_user_name(&name) {
        return bad("name", why);
    }
    if name == s.node.config.username {
        return bad(
            "name",
            "that is the administrator this node was started with",
        );
    }
    let roles = match parse_roles(form.roles.as_deref().unwrap_or_default()) {
        Ok(roles) => roles,
        Err(why) => return bad("roles", why),
    };
    let existing = s.meta.state().borrow().users().get(&name).cloned();
    let credentials = match (form.password, existing) {
        (Some(password), _) => {
            let who = name.clone();
            let derived = tokio::task::spawn_blocking(move || {
                sluice_server::credential_record(&who, &password)
            })
            .await;
            match derived {
                Ok(Ok(record)) => record,
                Ok(Err(why)) => return bad("password", why),
                Err(e) => {
                    return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
                }
            }
        }
        (None, Some(kept)) => kept.credentials,
        (None, None) => return bad("password", "a new user needs a password"),
    };
    let cmd = MetaCommand::PutUser {
        name,
        user: UserRecord { roles, credentials },
    };
    answer(s.meta.propose(cmd).await)
}

async fn delete(State(s): State<Users>, Path(name): Path<String>) -> Response {
    answer(s.meta.propose(MetaCommand::DeleteUser { name }).await)
}

fn answer(
    outcome: Result<Result<sluice_cluster::metadata::Applied, Rejection>, sluice_meta::MetaError>,
) -> Response {
    match outcome {
        Ok(Ok(_)) => Json(json!({})).into_response(),
        Ok(Err(Rejection::NoSuchUser { .. })) => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": "no such user" })),
        )
            .into_response(),
        Ok(Err(why)) => bad("user", why),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": e.to_string() })),
        )
            .into_response(),
    }
}
