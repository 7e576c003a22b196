//! Users and roles: users created through `/settings/rbac/users` (on one node) log in on
//! every node with the roles they were given, and nothing more: a data_reader reads and
//! cannot write, a data_writer writes and cannot read, a user with no role on the bucket
//! cannot select it, only data_dcp_reader opens DCP, and on the admin port stats_reader,
//! ro_admin and the data roles get 403 where their roles stop. The metadata never holds a
//! password, and a deleted user can no longer log in.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{admin, node, until};
use common::kv_peer::Kv;
use sluice_client::admin_http::{self, Body, Method};
use sluice_client::{Client, ConnectOptions, Credentials, StoreOptions};
use sluice_proto::Status;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;

const T: Duration = Duration::from_secs(15);

const USERS: &[(&str, &str)] = &[
    ("reader", "data_reader[default]"),
    ("writer", "data_writer[default]"),
    ("streamer", "data_dcp_reader[default]"),
    ("stats", "stats_reader"),
    ("viewer", "ro_admin"),
    ("elsewhere", "data_reader[other]"),
];

fn password(user: &str) -> String {
    format!("{user}-secret-pw")
}

async fn put_user(addr: SocketAddr, who: &Credentials, name: &str, roles: &str) -> u16 {
    let pw = password(name);
    let form = [("roles", roles), ("password", pw.as_str())];
    let path = format!("/settings/rbac/users/local/{name}");
    let a = admin_http::send(
        &Default::default(),
        &addr.to_string(),
        who,
        Method::PUT,
        &path,
        Body::Form(&form),
        T,
    )
    .await
    .unwrap();
    a.status
}

async fn status(addr: SocketAddr, user: &str, method: Method, path: &str) -> u16 {
    let who = Credentials::new(user, password(user));
    let body = serde_json::json!({});
    let body = match method {
        Method::GET => Body::None,
        _ => Body::Json(&body),
    };
    admin_http::send(
        &Default::default(),
        &addr.to_string(),
        &who,
        method,
        path,
        body,
        T,
    )
    .await
    .unwrap()
    .status
}

async fn client(addr: SocketAddr, user: &str) -> Result<Client, sluice_client::ClientError> {
    let pw = password(user);
    Client::connect(addr, ConnectOptions::sluice(user, &pw, "default")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_get_what_their_roles_allow_on_every_node() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, |c| c.replicas = 0).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), |c| c.replicas = 0).await;
    // Created through node 1 (which holds no vbucket: it forwards to the leader), used on
    // node 0.
    for (name, roles) in USERS {
        assert_eq!(
            put_user(b.admin_addr, &admin(), name, roles).await,
            200,
            "{name}"
        );
    }
    // Bad requests change nothing.
    assert_eq!(
        put_user(a.admin_addr, &admin(), "@cluster", "admin").await,
        400
    );
    assert_eq!(
        put_user(a.admin_addr, &admin(), "x", "superuser").await,
        400
    );
    assert_eq!(
        put_user(a.admin_addr, &admin(), "Administrator", "ro_admin").await,
        400
    );
    // Only admin manages users.
    let viewer = Credentials::new("viewer", password("viewer"));
    assert_eq!(
        put_user(a.admin_addr, &viewer, "mallory", "admin").await,
        403
    );
    // The metadata keeps verifiers, never a password.
    let state = serde_json::to_string(&*a.meta.state().borrow().clone()).unwrap();
    assert!(
        !state.contains(&password("reader")),
        "a password in the metadata"
    );
    until("node 0 knows every user", || {
        USERS
            .iter()
            .all(|(u, _)| !a.node.credentials.roles_of(u).is_empty())
    })
    .await;

    // KV, on the node the users were not created on.
    let (kv, key) = (a.kv_addr, b"doc".as_slice());
    let mut w = client(kv, "writer").await.unwrap();
    w.set(key, b"v", StoreOptions::default()).await.unwrap();
    let denied = w.get(key).await.unwrap_err();
    assert_eq!(denied.status(), Some(Status::Eaccess), "a writer reads");
    let mut r = client(kv, "reader").await.unwrap();
    assert_eq!(&r.get(key).await.unwrap().value[..], b"v");
    let denied = r.set(key, b"w", StoreOptions::default()).await.unwrap_err();
    assert_eq!(denied.status(), Some(Status::Eaccess), "a reader writes");
    let denied = r.delete(key, sluice_types::Cas(0)).await.unwrap_err();
    assert_eq!(denied.status(), Some(Status::Eaccess), "a reader deletes");
    let refused = client(kv, "elsewhere").await.err().unwrap();
    assert_eq!(refused.status(), Some(Status::Eaccess), "{refused}");
    let refused = client(kv, "stats").await.err().unwrap();
    assert_eq!(refused.status(), Some(Status::Eaccess), "{refused}");

    // DCP: only the stream role opens it.
    let mut streaming = None;
    for (user, want) in [("reader", Status::Eaccess), ("streamer", Status::Success)] {
        let mut c = Kv::open_as(kv, user, &password(user)).await;
        let mut extras = [0u8; 8];
        extras[4..].copy_from_slice(&1u32.to_be_bytes()); // producer
        let open = c
            .call(
                sluice_client::Packet::request(0x50, 0, 9)
                    .extras(&extras)
                    .key(b"t"),
            )
            .await;
        assert_eq!(open.status, want.code(), "{user} opening DCP");
        streaming = Some(c);
    }
    let streaming = streaming.expect("the streamer's DCP connection");

    // The admin port.
    let table = [
        ("stats", Method::GET, "/metrics", 200),
        ("stats", Method::GET, "/api/v1/cluster", 403),
        ("stats", Method::POST, "/api/v1/cluster/failover", 403),
        ("viewer", Method::GET, "/api/v1/cluster", 200),
        ("viewer", Method::GET, "/metrics", 200),
        ("viewer", Method::POST, "/api/v1/cluster/rebalance", 403),
        ("viewer", Method::GET, "/settings/rbac/users", 403),
        ("reader", Method::GET, "/pools/default/b/default", 200),
        ("elsewhere", Method::GET, "/pools/default/b/default", 403),
        ("reader", Method::GET, "/metrics", 403),
        ("writer", Method::GET, "/api/v1/cluster", 403),
        ("streamer", Method::GET, "/internal/vbuckets/positions", 403),
    ];
    for (user, method, path, want) in table {
        let got = status(a.admin_addr, user, method.clone(), path).await;
        assert_eq!(got, want, "{user}: {method} {path}");
    }
    let listed = admin_http::get(
        &b.admin_addr.to_string(),
        &admin(),
        "/settings/rbac/users",
        T,
    )
    .await
    .unwrap();
    assert_eq!(
        listed.body.as_array().unwrap().len(),
        USERS.len(),
        "{}",
        listed.body
    );
    assert_eq!(listed.body[0]["id"], "elsewhere");
    assert_eq!(listed.body[0]["roles"][0]["role"], "data_reader");
    assert_eq!(listed.body[0]["roles"][0]["bucket_name"], "other");

    // Roles changed under an open connection apply from its next command: the writer made
    // a reader reads and no longer writes, on the connection it opened as a writer.
    assert_eq!(
        put_user(b.admin_addr, &admin(), "writer", "data_reader[default]").await,
        200
    );
    until("node 0 knows the writer's new role", || {
        a.node
            .credentials
            .roles_of("writer")
            .iter()
            .any(|r| r.name() == "data_reader")
    })
    .await;
    assert_eq!(&w.get(key).await.unwrap().value[..], b"v");
    let denied = w.set(key, b"x", StoreOptions::default()).await.unwrap_err();
    assert_eq!(
        denied.status(),
        Some(Status::Eaccess),
        "a revoked writer writes"
    );

    // A DCP connection whose user loses the DCP role is closed (within the producer's
    // one-second check), as Couchbase closes one whose privileges were revoked.
    assert_eq!(
        put_user(b.admin_addr, &admin(), "streamer", "data_reader[default]").await,
        200
    );
    let (mut sock, _) = streaming.into_parts();
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {} // a noop, say
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "a DCP connection outlived its user's DCP role"
    );

    // A deleted user logs in nowhere, and its open connections can do nothing more.
    assert_eq!(&r.get(key).await.unwrap().value[..], b"v");
    let path = "/settings/rbac/users/local/reader";
    let gone = admin_http::send(
        &Default::default(),
        &b.admin_addr.to_string(),
        &admin(),
        Method::DELETE,
        path,
        Body::None,
        T,
    )
    .await
    .unwrap();
    assert_eq!(gone.status, 200);
    until("node 0 forgets the reader", || {
        a.node.credentials.roles_of("reader").is_empty()
    })
    .await;
    let refused = client(kv, "reader").await.err().unwrap();
    assert_eq!(refused.status(), Some(Status::AuthError), "{refused}");
    let denied = r.get(key).await.unwrap_err();
    assert_eq!(
        denied.status(),
        Some(Status::Eaccess),
        "a deleted user's connection reads"
    );
    assert_eq!(
        status(
            a.admin_addr,
            "reader",
            Method::GET,
            "/pools/default/b/default"
        )
        .await,
        401
    );
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}
