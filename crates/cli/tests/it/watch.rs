//! `sluice watch`, the built binary, against an in-process node over 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_client::dcp::StreamPositions;
use sluice_client::{Client, ConnectOptions, StoreOptions};
use sluice_types::Cas;

struct Node {
    running: sluice_manager::Running,
    _dir: tempfile::TempDir,
    addr: String,
}

async fn start_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut c = sluice_server::ServerConfig::new(dir.path());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = 16;
    c.memory_quota_mb = 64;
    c.connection_threads = 1;
    let running = sluice_manager::start(c).await.unwrap();
    let addr = running.kv_addr.to_string();
    Node {
        running,
        _dir: dir,
        addr,
    }
}

async fn kv(node: &Node) -> Client {
    let opts = ConnectOptions::sluice("Administrator", "password", "default");
    Client::connect(&node.addr, opts).await.unwrap()
}

fn watch_cmd(addr: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["watch", "--addr", addr]).args(args);
    // The node's defaults; set through the environment like any deployment would.
    cmd.env("SLUICE_USERNAME", "Administrator")
        .env("SLUICE_PASSWORD", "password")
        .env("SLUICE_LOG", "warn");
    cmd
}

/// Runs the command to completion off the runtime (the node serves on the test's runtime).
async fn run(mut cmd: Command) -> Output {
    let out = tokio::task::spawn_blocking(move || {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.wait_with_output().unwrap()
    });
    tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("sluice watch finishes")
        .unwrap()
}

fn lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn by_key(lines: &[Value], key: &str) -> Value {
    let found: Vec<&Value> = lines.iter().filter(|l| l["key"] == key).collect();
    assert_eq!(found.len(), 1, "one line for {key}: {lines:?}");
    found[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_changes_as_json_and_resumes_from_its_position_file() {
    let node = start_node().await;
    let mut c = kv(&node).await;
    for i in 0..5 {
        let doc = format!(r#"{{"n":{i},"name":"user {i}","score":1.50}}"#);
        c.set(
            format!("user-{i}").as_bytes(),
            doc.as_bytes(),
            StoreOptions {
                flags: 7,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    c.set(b"blob", b"\x00\x01binary", StoreOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pos = dir.path().join("watch.pos");
    let pos_arg = pos.to_str().unwrap();

    let args = ["--from", "beginning", "--limit", "6", "--position", pos_arg];
    let first = lines(&run(watch_cmd(&node.addr, &args)).await);
    assert_eq!(first.len(), 6, "{first:?}");
    let user = by_key(&first, "user-3");
    assert_eq!(user["type"], "mutation");
    assert_eq!(user["flags"], 7);
    assert_eq!(user["rev"], 1);
    assert!(user["cas"].as_u64().unwrap() > 0 && user["seqno"].as_u64().unwrap() > 0);
    assert_eq!(
        user["value"],
        serde_json::json!({"n": 3, "name": "user 3", "score": 1.5})
    );
    let blob = by_key(&first, "blob");
    assert_eq!(blob["value_b64"], "AAFiaW5hcnk=");
    assert!(blob.get("value").is_none());
    assert!(
        StreamPositions::load(&pos).is_ok(),
        "positions saved on exit"
    );

    // Changes made while no watch runs; the next watch resumes from the file and prints
    // exactly those, nothing twice.
    c.delete(b"user-1", Cas::ZERO).await.unwrap();
    c.set(b"late", b"[1,2,3]", StoreOptions::default())
        .await
        .unwrap();
    let args = ["--from", "beginning", "--limit", "2", "--position", pos_arg];
    let second = lines(&run(watch_cmd(&node.addr, &args)).await);
    assert_eq!(second.len(), 2, "{second:?}");
    let gone = by_key(&second, "user-1");
    assert_eq!(gone["type"], "deletion");
    assert!(gone.get("value").is_none() && gone.get("value_b64").is_none());
    assert_eq!(
        by_key(&second, "late")["value"],
        serde_json::json!([1, 2, 3])
    );

    // --no-value: keys and metadata only.
    let no_value = ["--from", "beginning", "--limit", "3", "--no-value"];
    let third = lines(&run(watch_cmd(&node.addr, &no_value)).await);
    assert_eq!(third.len(), 3);
    for l in &third {
        assert!(
            l.get("value").is_none() && l.get("value_b64").is_none(),
            "{l}"
        );
    }
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_wrong_passwords_and_missing_servers_clearly() {
    let node = start_node().await;
    let mut cmd = watch_cmd(&node.addr, &["--limit", "1"]);
    cmd.env("SLUICE_PASSWORD", "not-the-password");
    let out = run(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("authentication failed"), "{stderr}");

    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let out = run(watch_cmd(&addr, &["--limit", "1"])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("cannot connect to {addr}")),
        "{stderr}"
    );
    node.running.shutdown().await.unwrap();
}

/// Waits for `path` to exist (the watch saves its starting point at once).
async fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_cleanly_with_the_position_saved() {
    let node = start_node().await;
    let dir = tempfile::tempdir().unwrap();
    let pos = dir.path().join("watch.pos");
    let mut child = watch_cmd(&node.addr, &["--position", pos.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&pos).await;
    let mut c = kv(&node).await;
    let token = c
        .set(b"watched", b"{\"a\":1}", StoreOptions::default())
        .await
        .unwrap()
        .token
        .unwrap();
    // The line for the write, read off the runtime.
    let stdout = child.stdout.take().unwrap();
    let line = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).unwrap();
            line
        }),
    )
    .await
    .expect("the change is printed")
    .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (v["key"].as_str(), v["seqno"].as_u64()),
        (Some("watched"), Some(token.seqno.0))
    );

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "SIGTERM is a clean exit: {status:?}");
    let saved = StreamPositions::load(&pos).unwrap();
    let p = saved.get(token.vb).unwrap();
    assert_eq!((p.vb_uuid, p.seqno), (token.vb_uuid, token.seqno));
    node.running.shutdown().await.unwrap();
}
