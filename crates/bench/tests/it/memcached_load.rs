//! `run_kv` end to end against a real memcached (plain binary protocol, no auth, vbucket 0):
//! a 2-second closed-loop run and a 2-second open-loop run, checked through results.json.

use crate::common;

use common::memcached::Memcached;

/// Runs the bench with `extra` options and returns results.json.
async fn run(extra: &[&str]) -> serde_json::Value {
    let mc = Memcached::start();
    let out = tempfile::tempdir().unwrap();
    let addr = mc.addr.to_string();
    let mut argv = vec![
        "--target-memcached",
        &addr,
        "--connections",
        "4",
        "--keys",
        "1000",
        "--duration-s",
        "2",
        "--warmup-s",
        "0",
        "--out",
        out.path().to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    let args = common::parse(&argv);
    sluice_bench::run_kv(args).await.unwrap();
    assert!(out.path().join("report.md").exists());
    let json = std::fs::read(out.path().join("results.json")).unwrap();
    serde_json::from_slice(&json).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_against_memcached() {
    let r = run(&["--get-ratio", "0.9"]).await;
    let run = &r["targets"][0]["runs"][0];
    assert_eq!(r["targets"][0]["name"], "memcached");
    assert_eq!(r["mode"], "closed-loop");
    assert!(run["ops"].as_u64().unwrap() > 1000, "{run}");
    assert_eq!(run["errors"], 0, "{run}");
    assert_eq!(run["get_misses"], 0, "the key space was prefilled: {run}");
    assert!(run["sets"].as_u64().unwrap() > 0 && run["gets"].as_u64().unwrap() > 0);
    assert!(run["latency"]["p99_us"].as_f64().unwrap() > 0.0);
    assert!(r.get("settings").unwrap().get("password").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_holds_the_target_rate() {
    let r = run(&["--rate", "2000", "--pipeline", "8"]).await;
    let run = &r["targets"][0]["runs"][0];
    assert_eq!(r["mode"], "open-loop");
    let rate = run["ops_per_s"].as_f64().unwrap();
    assert!(
        (1800.0..=2200.0).contains(&rate),
        "2000 ops/s asked, got {rate}: {run}"
    );
    assert_eq!(run["behind_schedule"], 0, "{run}");
    assert_eq!(run["errors"], 0, "{run}");
}
