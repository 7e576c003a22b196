//! `--connect` (a fake Sluice with SCRAM and 16 vbuckets) `--vs memcached` (started by the
//! bench): both targets run alternately, medians and ratios land in results.json.

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_and_memcached_side_by_side() {
    let sluice = common::fake_sluice::start().await.to_string();
    let out = tempfile::tempdir().unwrap();
    let args = common::parse(&[
        "--connect",
        &sluice,
        "--vs",
        "memcached",
        "--connections",
        "3",
        "--keys",
        "300",
        "--duration-s",
        "1",
        "--warmup-s",
        "0",
        "--runs",
        "2",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    sluice_bench::run_kv(args).await.unwrap();
    let json = std::fs::read(out.path().join("results.json")).unwrap();
    let r: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let names: Vec<&str> = r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sluice", "memcached"]);
    for t in r["targets"].as_array().unwrap() {
        let runs = t["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for run in runs {
            // Any wrongly routed key would come back NOT_MY_VBUCKET and count as an error.
            assert_eq!(run["errors"], 0, "{}: {run}", t["name"]);
            assert_eq!(run["get_misses"], 0, "{}: {run}", t["name"]);
            assert!(run["ops"].as_u64().unwrap() > 100, "{}: {run}", t["name"]);
        }
        assert!(t["median"]["ops_per_s"].as_f64().unwrap() > 0.0);
    }
    let ratios = &r["ratios"];
    assert_eq!(ratios["peer"], "memcached");
    assert!(ratios["throughput"].as_f64().unwrap() > 0.0);
    assert!(ratios["p99"].as_f64().unwrap() > 0.0);
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("sluice/memcached: throughput"), "{md}");
}
