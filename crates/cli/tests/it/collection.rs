//! `sluice collection`, the built binary, against an in-process node over 127.0.0.1: a scope
//! and a collection created, listed with their ids and maxTTL, a refusal's reason printed,
//! and both dropped.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

async fn start_node() -> (sluice_manager::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = sluice_server::ServerConfig::new(dir.path());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = 16;
    c.memory_quota_mb = 64;
    c.connection_threads = 1;
    (sluice_manager::start(c).await.unwrap(), dir)
}

/// `sluice collection ARGS` against the node at `admin`, run to completion off the runtime
/// (the node serves on the test's runtime).
async fn collection(admin: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("collection")
        .args(args)
        .args(["--admin", admin, "--bucket", "default"])
        .env("SLUICE_USERNAME", "Administrator")
        .env("SLUICE_PASSWORD", "password")
        .env("SLUICE_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || cmd.spawn().unwrap().wait_with_output());
    tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("sluice collection finishes")
        .unwrap()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_and_collections_from_the_command_line() {
    let (node, _dir) = start_node().await;
    let admin = node.admin_addr.to_string();
    let created = stdout(&collection(&admin, &["create-scope", "orders"]).await);
    assert_eq!(
        created.trim(),
        "scope orders created in bucket default (manifest uid 0x1)"
    );
    let out = collection(&admin, &["create", "orders.eu", "--max-ttl", "3600"]).await;
    assert!(stdout(&out).contains("collection orders.eu created"));
    assert_eq!(
        stdout(&collection(&admin, &["list"]).await),
        "uid 0x2\n_default 0x0\n    _default 0x0\norders 0x8\n    eu 0x8 maxTTL 3600s\n"
    );
    // A refusal exits non-zero with the server's reason.
    let again = collection(&admin, &["create-scope", "orders"]).await;
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains(r#"Scope with name "orders" already exists"#),
        "{err}"
    );
    let bad = collection(&admin, &["create", "orders-eu"]).await;
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("SCOPE.COLLECTION"));

    // An edit changes the maxTTL in place: same id, new uid.
    let edited = collection(&admin, &["edit", "orders.eu", "--max-ttl", "60"]).await;
    assert!(stdout(&edited).contains("now has maxTTL 60s (manifest uid 0x3)"));
    assert_eq!(
        stdout(&collection(&admin, &["list"]).await),
        "uid 0x3\n_default 0x0\n    _default 0x0\norders 0x8\n    eu 0x8 maxTTL 60s\n"
    );
    let missing = collection(&admin, &["edit", "orders.nope", "--max-ttl", "60"]).await;
    assert!(!missing.status.success());

    assert!(stdout(&collection(&admin, &["drop", "orders.eu"]).await).contains("dropped"));
    assert!(stdout(&collection(&admin, &["drop-scope", "orders"]).await).contains("dropped"));
    assert_eq!(
        stdout(&collection(&admin, &["list"]).await),
        "uid 0x5\n_default 0x0\n    _default 0x0\n"
    );
    node.shutdown().await.unwrap();
}
