//! STAT: one response per statistic, then an empty terminator with the same opaque.
//!
//! Groups: "" (general), "memory", "vbucket", "vbucket-seqno [vb]", "failovers [vb]",
//! "connections", "dcp" (per DCP connection and stream), "dcpagg" (DCP totals), "index"
//! (the node's indexes on the bucket: state, items, items remaining, lag; feeder totals),
//! "replication" (per feed into this node's replicas: changes, bytes, latency percentiles;
//! the summed high seqnos of the active and of the replica vbuckets; and per stage of a
//! replicated write, its count, percentiles and histogram, see `dcp/stages.rs`).
//! "xdcr" (per replication from this bucket whose pipeline runs or ran on this node: its
//! counters, `changes_left`, and its latency percentiles, see the manager's `xdcr`).
//! An unknown group answers KEY_ENOENT.

use super::{Next, Responder};
use crate::bucket_handle::BucketHandle;
use crate::dcp::stages::{encode_histogram, Stage};
use crate::node::Node;
use sluice_proto::Status;
use std::sync::atomic::Ordering;

pub fn execute(node: &Node, handle: &BucketHandle, group: &[u8], mut r: Responder<'_>) -> Next {
    let group = String::from_utf8_lossy(group);
    let mut words = group.split_whitespace();
    let name = words.next().unwrap_or("");
    let vb_filter: Option<u16> = words.next().and_then(|w| w.parse().ok());
    let Some(stats) = collect(node, handle, name, vb_filter) else {
        r.error(Status::KeyEnoent, "unknown stat group");
        return Next::Continue;
    };
    for (k, v) in &stats {
        let p = r
            .packet(Status::Success)
            .key(k.as_bytes())
            .value(v.as_bytes());
        r.send(p);
    }
    let p = r.packet(Status::Success);
    r.send(p);
    Next::Continue
}

/// The (name, value) pairs of a stat group, or `None` for an unknown group. Also used by the
/// admin HTTP endpoint.
pub fn collect(
    node: &Node,
    handle: &BucketHandle,
    group: &str,
    vb_filter: Option<u16>,
) -> Option<Vec<(String, String)>> {
    let bucket = &handle.engine;
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));
    match group {
        "" => {
            put("pid", std::process::id().to_string());
            put("uptime", node.started.elapsed().as_secs().to_string());
            put(
                "time",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
                    .to_string(),
            );
            put("version", super::session_ops::VERSION.to_string());
            put("bucket", handle.name.clone());
            put(
                "bucket_type",
                format!("{:?}", bucket.config.bucket_type).to_lowercase(),
            );
            put(
                "curr_connections",
                node.connections_current.load(Ordering::Relaxed).to_string(),
            );
            put(
                "total_connections",
                node.connections_total.load(Ordering::Relaxed).to_string(),
            );
            put(
                "rejected_conns",
                node.connections_rejected
                    .load(Ordering::Relaxed)
                    .to_string(),
            );
            for (k, v) in bucket.stats.pairs() {
                put(k, v.to_string());
            }
            for (k, v) in bucket.gauges() {
                put(k, v.to_string());
            }
            put(
                "ep_write_failure_reason",
                bucket.write_failure().unwrap_or_default(),
            );
        }
        // Couchbase's `collections` group: per collection, keyed `0xSCOPE:0xCOLLECTION:`.
        "collections" => {
            let manifest = handle.manifest();
            let usage = bucket.collection_usage();
            put("manifest_uid", format!("{:x}", manifest.uid()));
            for (scope, sid, name, cid) in manifest.collections() {
                let at = |stat: &str| format!("{sid:#x}:{cid:#x}:{stat}");
                put(&at("scope_name"), scope.to_string());
                put(&at("name"), name.to_string());
                let u = usage
                    .get(&sluice_types::CollectionId(cid))
                    .copied()
                    .unwrap_or_default();
                put(&at("items"), u.items.to_string());
                put(&at("mem_used"), u.mem_bytes.to_string());
                put(
                    &at("maxTTL"),
                    manifest.max_ttl_s(cid).unwrap_or(0).to_string(),
                );
            }
        }
        "memory" => {
            let m = bucket.memory();
            put("mem_used", m.used_bytes.to_string());
            put("ep_max_size", m.quota_bytes.to_string());
            put("ep_mem_high_wat", m.high_watermark_bytes.to_string());
            put("ep_mem_low_wat", m.low_watermark_bytes.to_string());
            put("ep_checkpoint_memory", m.checkpoint_bytes.to_string());
            put(
                "ep_checkpoint_memory_quota",
                m.checkpoint_bytes_max.to_string(),
            );
        }
        "connections" => {
            put(
                "curr_connections",
                node.connections_current.load(Ordering::Relaxed).to_string(),
            );
            put("max_connections", node.config.connections_max.to_string());
            put(
                "connection_placement",
                node.placer.placement().as_str().to_string(),
            );
            for (i, open) in node.placer.load().into_iter().enumerate() {
                put(&format!("conn_thread_{i}_connections"), open.to_string());
            }
        }
        "vbucket" | "vbucket-seqno" | "failovers" => {
            for d in bucket.vb_details() {
                if vb_filter.is_some_and(|f| f != d.vb.0) {
                    continue;
                }
                let p = format!("vb_{}", d.vb.0);
                match group {
                    "vbucket" => put(&p, d.state.as_str().to_string()),
                    "vbucket-seqno" => {
                        put(&format!("{p}:high_seqno"), d.high_seqno.0.to_string());
                        put(&format!("{p}:abs_high_seqno"), d.high_seqno.0.to_string());
                        put(
                            &format!("{p}:last_persisted_seqno"),
                            d.persisted_seqno.0.to_string(),
                        );
                        put(&format!("{p}:purge_seqno"), d.purge_seqno.0.to_string());
                        put(&format!("{p}:uuid"), d.uuid.0.to_string());
                        put(&format!("{p}:items"), d.items.to_string());
                    }
                    _ => {
                        let entries = d.failover_log.entries();
                        put(&format!("{p}:num_entries"), entries.len().to_string());
                        for (i, e) in entries.iter().enumerate() {
                            put(&format!("{p}:{i}:id"), e.uuid.0.to_string());
                            put(&format!("{p}:{i}:seq"), e.seqno.0.to_string());
                        }
                    }
                }
            }
        }
        "dcp" => {
            // Per connection and stream, named as the reference server names them.
            for c in node.dcp.snapshot() {
                let p = format!("eq_dcpq:{}", c.name);
                put(&format!("{p}:type"), "producer".to_string());
                put(&format!("{p}:priority"), c.priority.to_string());
                put(&format!("{p}:ssl"), c.tls.to_string());
                put(&format!("{p}:max_buffer_bytes"), c.flow_window.to_string());
                put(&format!("{p}:unacked_bytes"), c.unacked_bytes.to_string());
                put(&format!("{p}:total_bytes_sent"), c.bytes_sent.to_string());
                put(&format!("{p}:items_sent"), c.items_sent.to_string());
                put(
                    &format!("{p}:backfill_buffer_bytes"),
                    c.backfill_bytes_buffered.to_string(),
                );
                put(
                    &format!("{p}:backfills_running"),
                    c.backfills_running.to_string(),
                );
                put(&format!("{p}:paused_reason"), c.paused_reason.to_string());
                put(&format!("{p}:num_streams"), c.streams.len().to_string());
                for st in &c.streams {
                    let sp = match st.sid {
                        None => format!("{p}:stream_{}", st.vb),
                        Some(sid) => format!("{p}:stream_{}_sid_{sid}", st.vb),
                    };
                    put(&format!("{sp}_state"), st.state.to_string());
                    put(&format!("{sp}_opaque"), st.opaque.to_string());
                    put(
                        &format!("{sp}_last_sent_seqno"),
                        st.last_sent_seqno.to_string(),
                    );
                    put(&format!("{sp}_end_seqno"), st.end_seqno.to_string());
                    put(
                        &format!("{sp}_items_remaining"),
                        st.items_remaining.to_string(),
                    );
                    put(&format!("{sp}_items_sent"), st.items_sent.to_string());
                    put(&format!("{sp}_bytes_sent"), st.bytes_sent.to_string());
                    put(
                        &format!("{sp}_ready_queue_bytes"),
                        st.ready_bytes.to_string(),
                    );
                    put(&format!("{sp}_backfills"), st.backfills.to_string());
                    put(
                        &format!("{sp}_cursors_dropped"),
                        st.cursor_drops.to_string(),
                    );
                }
            }
        }
        "replication" => {
            // Summed high seqnos of this node's active and replica vbuckets. Over a cluster
            // whose replicas are all placed, replicas × Σ active − Σ replica is how many
            // changes the replicas have yet to apply (seqnos are per-vbucket offsets), the
            // same measure as a Redis replica's offset lag.
            let total =
                |state| -> u64 { bucket.vb_seqnos(Some(state)).iter().map(|(_, s)| s.0).sum() };
            let active = total(sluice_types::VbState::Active);
            let replica = total(sluice_types::VbState::Replica);
            put("vb_active_high_seqno_total", active.to_string());
            put("vb_replica_high_seqno_total", replica.to_string());
            for (feed, f) in node.replication.snapshot() {
                let p = format!("replication:{feed}");
                put(
                    &format!("{p}:items"),
                    f.items.load(Ordering::Relaxed).to_string(),
                );
                put(
                    &format!("{p}:bytes"),
                    f.bytes.load(Ordering::Relaxed).to_string(),
                );
                let h = f.latency();
                put(&format!("{p}:latency_count"), h.len().to_string());
                for (q, label) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
                    put(
                        &format!("{p}:latency_{label}_us"),
                        h.value_at_quantile(q).to_string(),
                    );
                }
                put(&format!("{p}:latency_max_us"), h.max().to_string());
            }
            // Where replicated writes through this node spend their time (dcp/stages.rs).
            for stage in Stage::ALL {
                let h = node.replication.stages.snapshot(stage);
                let p = format!("stage:{}", stage.name());
                put(&format!("{p}:count"), h.len().to_string());
                for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
                    put(
                        &format!("{p}:{label}_us"),
                        h.value_at_quantile(q).to_string(),
                    );
                }
                put(&format!("{p}:max_us"), h.max().to_string());
                put(&format!("{p}:hist"), encode_histogram(&h));
            }
        }
        "index" => {
            // The node's indexes on this bucket, and the feeders' totals.
            for (name, v) in node.index.counters().into_iter().chain(node.index.memory()) {
                put(name, v.to_string());
            }
            for r in node.index.reports(node) {
                if r.def.bucket != handle.name {
                    continue;
                }
                // A named collection's index as the catalog names it: `scope.collection.name`.
                let p = format!(
                    "index:{}",
                    sluice_cluster::catalog_name(&r.def.scope, &r.def.collection, &r.def.name)
                );
                put(&format!("{p}:state"), r.def.state.as_str().to_string());
                put(&format!("{p}:items"), r.items.to_string());
                put(
                    &format!("{p}:items_remaining"),
                    r.items_remaining.to_string(),
                );
                put(&format!("{p}:disk_bytes"), r.disk_bytes.to_string());
                put(
                    &format!("{p}:changes_applied"),
                    r.changes_applied.to_string(),
                );
                put(
                    &format!("{p}:changes_per_sec"),
                    r.changes_per_sec.to_string(),
                );
                put(&format!("{p}:docs_skipped"), r.docs_skipped.to_string());
                let h = r.lag.latency();
                put(&format!("{p}:lag_count"), h.len().to_string());
                for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
                    put(
                        &format!("{p}:lag_{label}_us"),
                        h.value_at_quantile(q).to_string(),
                    );
                }
                put(&format!("{p}:lag_max_us"), h.max().to_string());
            }
        }
        "dcpagg" => {
            let conns = node.dcp.snapshot();
            let sum = |f: fn(&crate::dcp::registry::ConnStats) -> u64| -> String {
                conns.iter().map(f).sum::<u64>().to_string()
            };
            put("ep_dcp_count", conns.len().to_string());
            put(
                "ep_dcp_stream_count",
                conns
                    .iter()
                    .map(|c| c.streams.len() as u64)
                    .sum::<u64>()
                    .to_string(),
            );
            put("ep_dcp_items_sent", sum(|c| c.items_sent));
            put("ep_dcp_total_bytes", sum(|c| c.bytes_sent));
            put("ep_dcp_unacked_bytes", sum(|c| c.unacked_bytes));
            put(
                "ep_dcp_items_remaining",
                sum(|c| c.streams.iter().map(|s| s.items_remaining).sum()),
            );
            put(
                "ep_dcp_backfill_buffer_bytes",
                sum(|c| c.backfill_bytes_buffered),
            );
            // Per kind of connection, the kind being the name up to its first ':'
            // ("replication:…" for the cluster's own feeds), as the reference server groups
            // them: the seeds' replication items remaining and bytes apart from other clients.
            let mut kinds: std::collections::BTreeMap<&str, [u64; 4]> = Default::default();
            for c in &conns {
                let kind = c.name.split_once(':').map_or("other", |(k, _)| k);
                let t = kinds.entry(kind).or_default();
                t[0] += 1;
                t[1] += c.streams.iter().map(|s| s.items_remaining).sum::<u64>();
                t[2] += c.bytes_sent;
                t[3] += c.items_sent;
            }
            for (kind, [count, remaining, bytes, items]) in kinds {
                put(&format!("ep_dcpq:{kind}:count"), count.to_string());
                put(
                    &format!("ep_dcpq:{kind}:items_remaining"),
                    remaining.to_string(),
                );
                put(&format!("ep_dcpq:{kind}:total_bytes"), bytes.to_string());
                put(&format!("ep_dcpq:{kind}:items_sent"), items.to_string());
            }
            put(
                "ep_dcp_paused_connections",
                conns
                    .iter()
                    .filter(|c| !c.paused_reason.is_empty())
                    .count()
                    .to_string(),
            );
        }
        "xdcr" => {
            let figures = node
                .control_stats
                .get()
                .map(|c| c.xdcr())
                .unwrap_or_default();
            for f in figures.iter().filter(|f| f.bucket == handle.name) {
                let p = format!("replication:{}", f.id);
                for (name, value) in &f.values {
                    put(&format!("{p}:{name}"), value.to_string());
                }
                for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
                    let us = match f.latency_us.len() {
                        0 => 0,
                        _ => f.latency_us.value_at_quantile(q),
                    };
                    put(&format!("{p}:latency_{name}_us"), us.to_string());
                }
                // The whole histogram, for a reader that subtracts two readings (the bench's
                // XDCR column reports the lag of each step alone).
                put(
                    &format!("{p}:latency_hist"),
                    encode_histogram(&f.latency_us),
                );
            }
        }
        _ => return None,
    }
    Some(out)
}
