//! Scopes and collections over REST against one in-process node: created, listed and
//! dropped on Couchbase's paths, refusals with the statuses and body words the SDKs match,
//! who may change them, and the node serving the new manifest (its map's
//! `collectionsManifestUid`) by the time a change is answered.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use serde_json::{json, Value};
use sluice_client::admin_http::{self, Body, Method};
use sluice_client::Credentials;
use sluice_engine::BucketType;
use sluice_server::ServerConfig;
use std::time::Duration;

const T: Duration = Duration::from_secs(15);
const SCOPES: &str = "/pools/default/buckets/default/scopes";

/// A form's fields.
type Form<'a> = [(&'a str, &'a str)];

struct Node {
    running: sluice_manager::Running,
    addr: String,
    _dir: tempfile::TempDir,
}

async fn start() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut c = ServerConfig::new(dir.path());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = 16;
    c.replicas = 0;
    c.memory_quota_mb = 64;
    c.bucket_type = BucketType::Ephemeral;
    c.connection_threads = 1;
    let running = sluice_manager::start(c).await.unwrap();
    let addr = running.admin_addr.to_string();
    Node {
        running,
        addr,
        _dir: dir,
    }
}

fn admin() -> Credentials {
    Credentials::new("Administrator", "password")
}

/// `method path` as `who`, with a form body unless `form` is empty: the status and the body
/// as the server wrote it (compact JSON, which is how axum's `Json` writes it).
async fn call(
    node: &Node,
    who: &Credentials,
    method: Method,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let body = match form.is_empty() {
        true => Body::None,
        false => Body::Form(form),
    };
    let a = admin_http::send(&Default::default(), &node.addr, who, method, path, body, T)
        .await
        .unwrap();
    (a.status, a.body)
}

/// Whether `text` matches the SDKs' regex `{before} .+ {after}`: `before`, then at least one
/// character, then `after` (as std::regex_search does, anywhere in the text).
fn sdk_match(text: &str, before: &str, after: &str) -> bool {
    text.match_indices(before).any(|(i, _)| {
        let rest = &text[i + before.len()..];
        rest.find(after).is_some_and(|j| j > 0)
    })
}

#[test]
fn the_sdk_match_is_the_regex() {
    let body = r#"{"errors":{"_":"Scope with name \"s1\" already exists"}}"#;
    assert!(sdk_match(body, "Scope with name ", " already exists"));
    assert!(!sdk_match(body, "Scope with name ", " is not found"));
    assert!(!sdk_match(
        "Scope with name  already exists",
        "Scope with name ",
        " already exists"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_and_collections_over_rest() {
    let node = start().await;
    let who = admin();
    let uid = |body: &Value| body["uid"].as_str().unwrap().to_string();

    // A new bucket holds the default manifest.
    let (status, manifest) = call(&node, &who, Method::GET, SCOPES, &[]).await;
    assert_eq!(status, 200, "{manifest}");
    assert_eq!(
        manifest,
        json!({"uid": "0", "scopes": [{"name": "_default", "uid": "0",
            "collections": [{"name": "_default", "uid": "0"}]}]})
    );

    let (status, body) = call(&node, &who, Method::POST, SCOPES, &[("name", "s1")]).await;
    assert_eq!((status, uid(&body)), (200, "1".into()), "{body}");
    let (status, body) = call(&node, &who, Method::POST, SCOPES, &[("name", "s1")]).await;
    assert_eq!(status, 400);
    assert!(
        sdk_match(&body.to_string(), "Scope with name ", " already exists"),
        "{body}"
    );
    assert_eq!(
        body["errors"]["_"],
        r#"Scope with name "s1" already exists"#
    );

    let s1 = format!("{SCOPES}/s1/collections");
    let form = [("name", "c1"), ("maxTTL", "60"), ("history", "false")];
    let (status, body) = call(&node, &who, Method::POST, &s1, &form).await;
    assert_eq!((status, uid(&body)), (200, "2".into()), "{body}");
    // The answer came once this node serves the manifest: its bucket and its map show it.
    let bucket = node.running.node.buckets.get("default").unwrap();
    assert_eq!(bucket.manifest().collection_id("s1", "c1"), Ok(8));
    let map_path = "/pools/default/b/default";
    let (status, map) = call(&node, &who, Method::GET, map_path, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(map["collectionsManifestUid"], "2");

    let (status, body) = call(&node, &who, Method::POST, &s1, &[("name", "c1")]).await;
    assert_eq!(status, 400);
    let text = body.to_string();
    assert!(
        sdk_match(&text, "Collection with name ", " already exists"),
        "{text}"
    );
    let nope = format!("{SCOPES}/nope/collections");
    let (status, body) = call(&node, &who, Method::POST, &nope, &[("name", "c1")]).await;
    assert_eq!(status, 404);
    assert!(
        sdk_match(&body.to_string(), "Scope with name ", " is not found"),
        "{body}"
    );

    // What Sluice does not have, and names it refuses: 400, nothing changed.
    let refusals: [(&str, &Form, &str); 5] = [
        (s1.as_str(), &[("name", "c2"), ("maxTTL", "-1")], "maxTTL"),
        (
            s1.as_str(),
            &[("name", "c2"), ("history", "true")],
            "history",
        ),
        (s1.as_str(), &[("name", "_c2")], "name"),
        (SCOPES, &[("name", "a.b")], "name"),
        (SCOPES, &[("nom", "s2")], "name"),
    ];
    for (path, form, field) in refusals {
        let (status, body) = call(&node, &who, Method::POST, path, form).await;
        assert_eq!(status, 400, "{form:?}: {body}");
        assert!(body["errors"][field].is_string(), "{form:?}: {body}");
    }
    let history = call(
        &node,
        &who,
        Method::POST,
        &s1,
        &[("name", "c"), ("history", "true")],
    );
    assert_eq!(
        history.await.1["errors"]["history"],
        "history is not supported"
    );
    let default = format!("{SCOPES}/_default/collections/_default");
    assert_eq!(
        call(&node, &who, Method::DELETE, &default, &[]).await.0,
        400
    );
    let default_scope = format!("{SCOPES}/_default");
    assert_eq!(
        call(&node, &who, Method::DELETE, &default_scope, &[])
            .await
            .0,
        400
    );

    let (_, manifest) = call(&node, &who, Method::GET, SCOPES, &[]).await;
    assert_eq!(manifest["uid"], "2", "refusals changed nothing");
    assert_eq!(
        manifest["scopes"][1],
        json!({"name": "s1", "uid": "8",
            "collections": [{"name": "c1", "uid": "8", "maxTTL": 60}]})
    );

    // Drops: what is not there is 404, with the words the SDKs match.
    let c9 = format!("{SCOPES}/s1/collections/c9");
    let (status, body) = call(&node, &who, Method::DELETE, &c9, &[]).await;
    assert_eq!(status, 404);
    assert!(
        sdk_match(&body.to_string(), "Collection with name ", " is not found"),
        "{body}"
    );
    let (status, body) = call(&node, &who, Method::DELETE, &format!("{SCOPES}/nope"), &[]).await;
    assert_eq!(status, 404);
    assert!(
        sdk_match(&body.to_string(), "Scope with name ", " is not found"),
        "{body}"
    );
    let c1 = format!("{SCOPES}/s1/collections/c1");
    let (status, body) = call(&node, &who, Method::DELETE, &c1, &[]).await;
    assert_eq!((status, uid(&body)), (200, "3".into()), "{body}");
    let (status, body) = call(&node, &who, Method::DELETE, &format!("{SCOPES}/s1"), &[]).await;
    assert_eq!((status, uid(&body)), (200, "4".into()), "{body}");
    assert!(bucket.manifest().is_dropped_collection(8));
    let (_, map) = call(&node, &who, Method::GET, map_path, &[]).await;
    assert_eq!(map["collectionsManifestUid"], "4");
    let (_, manifest) = call(&node, &who, Method::GET, SCOPES, &[]).await;
    assert_eq!(manifest["scopes"].as_array().unwrap().len(), 1);

    // An unknown bucket is 404, as the buckets API answers it.
    let other = "/pools/default/buckets/nope/scopes";
    assert_eq!(
        call(&node, &who, Method::POST, other, &[("name", "s")])
            .await
            .0,
        404
    );
    assert_eq!(call(&node, &who, Method::GET, other, &[]).await.0, 404);

    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_admins_change_collections_and_any_role_on_the_bucket_reads_them() {
    let node = start().await;
    for (user, roles) in [
        ("manager", "bucket_admin[default]"),
        ("reader", "data_reader[default]"),
        ("stranger", "bucket_admin[other]"),
    ] {
        let path = format!("/settings/rbac/users/local/{user}");
        let form = [("roles", roles), ("password", "secret-pw")];
        let (status, body) = call(&node, &admin(), Method::PUT, &path, &form).await;
        assert!((200..300).contains(&status), "{user}: {status} {body}");
    }
    let as_user = |u: &str| Credentials::new(u, "secret-pw");
    // The users reach this node's credentials through the metadata's follower.
    let deadline = tokio::time::Instant::now() + T;
    while call(&node, &as_user("stranger"), Method::GET, SCOPES, &[])
        .await
        .0
        == 401
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "users never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let form = [("name", "s1")];
    let table = [
        ("reader", Method::GET, 200),
        ("reader", Method::POST, 403),
        ("stranger", Method::GET, 403),
        ("stranger", Method::POST, 403),
        ("manager", Method::POST, 200),
        ("manager", Method::GET, 200),
    ];
    for (user, method, want) in table {
        let form: &[(&str, &str)] = if method == Method::POST { &form } else { &[] };
        let (status, body) = call(&node, &as_user(user), method.clone(), SCOPES, form).await;
        assert_eq!(status, want, "{user} {method}: {body}");
    }
    node.running.shutdown().await.unwrap();
}
