//! `sluice bench dcp`, the built binary, with tiny sizes: it starts its own servers (this
//! same binary's `server` subcommand), loads them, drains, catches up under a small write
//! load, measures the write rate, and writes results.json, report.md and the server logs.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const ITEMS: u64 = 3000;

fn bench_dcp(out: &std::path::Path) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["bench", "dcp"])
        .args(["--items", &ITEMS.to_string(), "--value-bytes", "100"])
        .args(["--memory-quota-mb", "256"])
        .args([
            "--ltm-items",
            &ITEMS.to_string(),
            "--ltm-value-bytes",
            "8192",
        ])
        .args(["--ltm-quota-mb", "16"])
        .args(["--vbuckets", "16", "--connections", "4"])
        .args(["--consumers", "3", "--write-rate", "500"])
        .args(["--write-duration-s", "1", "--write-warmup-s", "0"])
        .args(["--runs", "2", "--stall-timeout-s", "30"])
        .arg("--out")
        .arg(out)
        .env("SLUICE_LOG", "warn");
    let child = cmd.output().expect("sluice runs");
    assert!(
        child.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        child.status,
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    child
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

#[test]
fn drains_catches_up_and_reports() {
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let run = bench_dcp(out.path());
    assert!(started.elapsed() < Duration::from_secs(240));
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert!(stdout.contains("Drain vs write throughput"), "{stdout}");
    assert!(stdout.contains("Catch-up"), "{stdout}");

    let json = std::fs::read(out.path().join("results.json")).unwrap();
    let r: Value = serde_json::from_slice(&json).unwrap();
    assert!(r["settings"].get("password").is_none());
    let setups = r["setups"].as_array().unwrap();
    let names: Vec<&str> = setups
        .iter()
        .map(|s| s["shape"]["setup"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["in-memory", "larger-than-memory"]);

    for s in setups {
        let name = &s["shape"]["setup"];
        let drains = s["drains"].as_array().unwrap();
        assert_eq!(drains.len(), 2, "{name}");
        for d in drains {
            let c = &d["consumer"];
            // Loaded once, no writes since: exactly one item per document.
            assert_eq!(c["mutations"], ITEMS, "{name}: {d}");
            assert_eq!(c["deletions"], 0, "{name}: {d}");
            assert_eq!(d["target_seqnos"], ITEMS, "{name}: {d}");
            assert_eq!(c["stream_ends"], c["vbuckets"], "{name}: {d}");
            assert_eq!(c["stream_ends_other"], 0, "{name}: {d}");
            assert_eq!(c["rollbacks"], 0, "{name}: {d}");
            assert_eq!(c["missed_documents"], 0, "{name}: {d}");
            assert!(f(&d["items_per_s"]) > 0.0, "{name}: {d}");
            assert!(
                f(&d["wire_mb_per_s"]) > f(&d["payload_mb_per_s"]),
                "{name}: {d}"
            );
        }
        let writes = s["writes"].as_array().unwrap();
        assert_eq!(writes.len(), 2, "{name}");
        assert!(writes.iter().all(|w| f(&w["sets_per_s"]) > 0.0), "{name}");
        let m = &s["median"];
        assert!(f(&m["drain_vs_write"]) > 0.0, "{name}: {m}");
    }

    // The catch-up runs on the larger-than-memory setup by default.
    assert!(setups[0]["catch_ups"].as_array().unwrap().is_empty());
    let catch_ups = setups[1]["catch_ups"].as_array().unwrap();
    assert_eq!(catch_ups.len(), 2);
    for c in catch_ups {
        let consumers = c["consumers"].as_array().unwrap();
        assert_eq!(consumers.len(), 3, "{c}");
        for k in consumers {
            // Writes ran meanwhile: a caught-up consumer still holds every document.
            assert_eq!(k["missed_documents"], 0, "{k}");
            assert!(k["mutations"].as_u64().unwrap() >= ITEMS, "{k}");
            assert_eq!(k["stream_ends"], k["vbuckets"], "{k}");
            assert!(f(&k["done_s"]) <= f(&c["total_s"]) + 1e-6, "{c}");
        }
        assert!(f(&c["consumer_max_s"]) <= f(&c["total_s"]) + 1e-6, "{c}");
        assert!(c["rss"]["peak_bytes"].as_u64().unwrap() > 0, "{c}");
        let w = &c["writes"];
        assert!(f(&w["ops_per_s"]) > 0.0, "the write load ran: {c}");
        assert!(
            f(&w["measured_s"]) <= f(&c["total_s"]) + 1.0,
            "and stopped: {c}"
        );
    }

    for file in [
        "report.md",
        "server-in-memory.log",
        "server-larger-than-memory.log",
    ] {
        assert!(out.path().join(file).exists(), "{file}");
    }
}
