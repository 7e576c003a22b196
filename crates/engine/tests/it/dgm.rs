//! A bucket several times larger than its quota serves every key, before and after a restart.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;

#[test]
fn data_greater_than_memory_serves_every_key_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let n = 80_000;
    let vlen = 1024;
    {
        let b = open(dir.path(), config(8, 64));
        for i in 0..n {
            set(&b, &key(i), &value(i, vlen));
        }
        let m = b.memory();
        assert!(m.used_bytes <= m.quota_bytes, "{m:?}");
        let gauges: std::collections::HashMap<_, _> = b.gauges().into_iter().collect();
        assert_eq!(gauges["curr_items"], n as u64);
        assert!(gauges["ep_num_non_resident"] > 0, "{gauges:?}");
        assert!(
            gauges["ep_vbuckets_metadata_evicted"] > 0,
            "metadata too: {gauges:?}"
        );
        // Metadata reads see evicted documents too (from disk), before anything fetches them.
        for i in (0..n).step_by(13) {
            let k = key(i);
            let meta = b
                .get_meta(vb(&b, &k), &k)
                .expect("every document has metadata")
                .meta;
            assert!(!meta.deleted, "key {i}");
        }
        for i in (0..n).step_by(7) {
            assert_eq!(get(&b, &key(i)), Some(value(i, vlen)), "key {i}");
        }
        b.shutdown().unwrap();
    }
    let b = open(dir.path(), config(8, 64));
    let gauges: std::collections::HashMap<_, _> = b.gauges().into_iter().collect();
    assert_eq!(
        gauges["curr_items"], n as u64,
        "warmup counts non-resident items"
    );
    for i in 0..n {
        assert_eq!(
            get(&b, &key(i)),
            Some(value(i, vlen)),
            "key {i} after restart"
        );
    }
    assert_eq!(get(&b, b"never-written"), None);
    b.shutdown().unwrap();
}
