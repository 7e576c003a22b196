//! Prometheus metrics, read from the engine's own counters at scrape time (no second copy).

use crate::node::Node;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Debug)]
struct NodeCollector(Arc<NodeRef>);

/// Collector needs Debug; Node is not Debug.
struct NodeRef(Arc<Node>);

impl std::fmt::Debug for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Node")
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let node = &self.0 .0;
        encode_buckets(node, &mut encoder)?;
        let conns = [
            (
                "curr_connections",
                node.connections_current.load(Ordering::Relaxed),
            ),
            (
                "rejected_connections",
                node.connections_rejected.load(Ordering::Relaxed),
            ),
        ];
        for (name, value) in conns {
            let m = encoder.encode_descriptor(name, name, None, MetricType::Gauge)?;
            ConstGauge::new(value as i64).encode(m)?;
        }
        encode_dcp(node, &mut encoder)?;
        encode_collections(node, &mut encoder)?;
        encode_replication(node, &mut encoder)?;
        encode_index(node, &mut encoder)?;
        encode_xdcr(node, &mut encoder)?;
        let m = encoder.encode_descriptor(
            "uptime_seconds",
            "seconds since start",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(node.started.elapsed().as_secs() as i64).encode(m)?;
        Ok(())
    }
}

/// Every bucket's engine counters and gauges, labelled `bucket="NAME"`: one family per
/// name (the engine reports the same names for every bucket, in the same order).
fn encode_buckets(node: &Node, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let buckets = node.buckets.all();
    let counters: Vec<Vec<(&'static str, u64)>> =
        buckets.iter().map(|b| b.engine.stats.pairs()).collect();
    let gauges: Vec<Vec<(&'static str, u64)>> = buckets.iter().map(|b| b.engine.gauges()).collect();
    let families = [
        (MetricType::Counter, &counters),
        (MetricType::Gauge, &gauges),
    ];
    for (kind, readings) in families {
        let Some(names) = readings.first() else {
            return Ok(());
        };
        for (i, (name, _)) in names.iter().enumerate() {
            let mut family = encoder.encode_descriptor(name, name, None, kind)?;
            for (bucket, values) in buckets.iter().zip(readings.iter()) {
                let labels = [("bucket", bucket.name.as_str())];
                let m = family.encode_family(&labels)?;
                match kind {
                    MetricType::Counter => ConstCounter::new(values[i].1).encode(m)?,
                    _ => ConstGauge::new(values[i].1 as i64).encode(m)?,
                }
            }
        }
    }
    Ok(())
}

/// Per collection, labelled by bucket, scope and collection name: its live documents and
/// the bytes its entries take in memory.
fn encode_collections(node: &Node, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    type Get = fn(&sluice_engine::CollectionUsage) -> u64;
    let families: [(&str, &str, Get); 2] = [
        (
            "collection_items",
            "live documents per collection on this node (replicas included)",
            |u| u.items,
        ),
        (
            "collection_mem_used_bytes",
            "bytes the collection's documents take in this node's memory (replicas included)",
            |u| u.mem_bytes,
        ),
    ];
    let usage: Vec<_> = node
        .buckets
        .all()
        .into_iter()
        .map(|b| (b.engine.collection_usage(), b))
        .collect();
    for (name, help, get) in families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (usage, bucket) in &usage {
            let manifest = bucket.manifest();
            for (scope, _, collection, cid) in manifest.collections() {
                let u = usage
                    .get(&sluice_types::CollectionId(cid))
                    .copied()
                    .unwrap_or_default();
                let labels = [
                    ("bucket", bucket.name.as_str()),
                    ("scope", scope),
                    ("collection", collection),
                ];
                ConstGauge::new(get(&u) as i64).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}

/// Per DCP connection, labelled by its name: the seeds' "items remaining" and bytes sent,
/// plus what flow control and the backfill buffer hold.
fn encode_dcp(node: &Node, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    type Get = fn(&crate::dcp::registry::ConnStats) -> u64;
    let families: [(&str, &str, MetricType, Get); 5] = [
        (
            "dcp_items_remaining",
            "changes not yet sent, over the connection's streams",
            MetricType::Gauge,
            |c| c.streams.iter().map(|s| s.items_remaining).sum(),
        ),
        (
            "dcp_bytes_sent",
            "bytes of DCP messages sent",
            MetricType::Counter,
            |c| c.bytes_sent,
        ),
        ("dcp_items_sent", "changes sent", MetricType::Counter, |c| {
            c.items_sent
        }),
        (
            "dcp_unacked_bytes",
            "bytes sent and not yet acknowledged (flow control)",
            MetricType::Gauge,
            |c| c.unacked_bytes,
        ),
        (
            "dcp_backfill_buffer_bytes",
            "bytes queued in the connection's streams",
            MetricType::Gauge,
            |c| c.backfill_bytes_buffered,
        ),
    ];
    let conns = node.dcp.snapshot();
    for (name, help, kind, get) in families {
        let mut family = encoder.encode_descriptor(name, help, None, kind)?;
        for c in &conns {
            let labels = [("connection", c.name.as_str())];
            let m = family.encode_family(&labels)?;
            match kind {
                MetricType::Counter => ConstCounter::new(get(c)).encode(m)?,
                _ => ConstGauge::new(get(c) as i64).encode(m)?,
            }
        }
    }
    Ok(())
}

/// Per replication feed into this node (labelled by its name): changes and bytes applied,
/// and the replication-latency histogram (write on the active → apply here).
fn encode_replication(node: &Node, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let feeds = node.replication.snapshot();
    type Get = fn(&crate::dcp::replication_stats::FeedStats) -> u64;
    let counters: [(&str, &str, Get); 2] = [
        (
            "replication_items",
            "changes applied to replica vbuckets",
            |f| f.items.load(Ordering::Relaxed),
        ),
        (
            "replication_bytes",
            "key and value bytes applied to replica vbuckets",
            |f| f.bytes.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in counters {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (feed, stats) in &feeds {
            let labels = [("feed", feed.as_str())];
            let m = family.encode_family(&labels)?;
            ConstCounter::new(get(stats)).encode(m)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "replication_latency_seconds",
        "from the write on the active to the apply on this replica",
        None,
        MetricType::Histogram,
    )?;
    for (feed, stats) in &feeds {
        let labels = [("feed", feed.as_str())];
        encode_us_histogram(&stats.latency(), family.encode_family(&labels)?)?;
    }
    let mut family = encoder.encode_descriptor(
        "replication_stage_latency_seconds",
        "from the write on the active to each stage of its replication through this node: \
         cursor_read and sent (this node's producers), received and applied (its replicas)",
        None,
        MetricType::Histogram,
    )?;
    for stage in crate::dcp::stages::Stage::ALL {
        let h = node.replication.stages.snapshot(stage);
        let labels = [("stage", stage.name())];
        encode_us_histogram(&h, family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The index service: per index (labelled `bucket`, `index`) its entries, what it has yet
/// to apply, its disk use, changes applied (in all and per second), and its write-to-index
/// lag; the feeders' totals and the index store's memory unlabelled.
fn encode_index(node: &Node, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    for (name, v) in node.index.counters() {
        let m = encoder.encode_descriptor(name, name, None, MetricType::Counter)?;
        ConstCounter::new(v).encode(m)?;
    }
    for (name, v) in node.index.memory() {
        let m = encoder.encode_descriptor(name, name, None, MetricType::Gauge)?;
        ConstGauge::new(v as i64).encode(m)?;
    }
    let reports = node.index.reports(node);
    type Get = fn(&crate::index_service::IndexReport) -> u64;
    let gauges: [(&str, &str, Get); 6] = [
        ("index_items", "entries of the index (approximate)", |r| {
            r.items
        }),
        (
            "index_items_remaining",
            "seqnos of the cluster's active vbuckets the index has yet to apply",
            |r| r.items_remaining,
        ),
        (
            "index_changes_per_second",
            "document changes applied per second, over the last second",
            |r| r.changes_per_sec,
        ),
        ("index_disk_bytes", "the index's bytes on disk", |r| {
            r.disk_bytes
        }),
        (
            "index_changes_applied",
            "document changes applied since the node started",
            |r| r.changes_applied,
        ),
        (
            "index_docs_skipped",
            "documents left out: their keys do not fit an entry",
            |r| r.docs_skipped,
        ),
    ];
    for (name, help, get) in gauges {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for r in &reports {
            let labels = [
                ("bucket", r.def.bucket.as_str()),
                ("scope", r.def.scope.as_str()),
                ("collection", r.def.collection.as_str()),
                ("index", r.def.name.as_str()),
            ];
            ConstGauge::new(get(r) as i64).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "index_lag_seconds",
        "from a write to its apply in the index (once the index is online)",
        None,
        MetricType::Histogram,
    )?;
    for r in &reports {
        let labels = [
            ("bucket", r.def.bucket.as_str()),
            ("scope", r.def.scope.as_str()),
            ("collection", r.def.collection.as_str()),
            ("index", r.def.name.as_str()),
        ];
        encode_us_histogram(&r.lag.latency(), family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Cross-cluster replication, per replication whose pipeline runs or ran on this node
/// (labelled `bucket`, `replication`): each counter as `xdcr_NAME`, and the latency from
/// the source write to the target's answer.
fn encode_xdcr(node: &Node, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let figures = node
        .control_stats
        .get()
        .map(|c| c.xdcr())
        .unwrap_or_default();
    let Some(first) = figures.first() else {
        return Ok(());
    };
    // Every replication reports the same names in the same order.
    for (i, (name, _)) in first.values.iter().enumerate() {
        let (kind, help) = match *name {
            "changes_left" | "checkpoint_unix_ms" | "resumed_vbuckets" | "resumed_seqnos" => (
                MetricType::Gauge,
                "XDCR figure (see the manager's xdcr::stats)",
            ),
            _ => (
                MetricType::Counter,
                "XDCR counter (see the manager's xdcr::stats)",
            ),
        };
        let metric = format!("xdcr_{name}");
        let mut family = encoder.encode_descriptor(&metric, help, None, kind)?;
        for f in &figures {
            let labels = [
                ("bucket", f.bucket.as_str()),
                ("replication", f.id.as_str()),
            ];
            let value = f.values.get(i).map_or(0, |(_, v)| *v);
            let m = family.encode_family(&labels)?;
            match kind {
                MetricType::Counter => ConstCounter::new(value).encode(m)?,
                _ => ConstGauge::new(value as i64).encode(m)?,
            }
        }
    }
    let mut family = encoder.encode_descriptor(
        "xdcr_latency_seconds",
        "from the write at the source to the target cluster's answer",
        None,
        MetricType::Histogram,
    )?;
    for f in &figures {
        let labels = [
            ("bucket", f.bucket.as_str()),
            ("replication", f.id.as_str()),
        ];
        encode_us_histogram(&f.latency_us, family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A histogram of µs as a Prometheus histogram in seconds, over `EXPORT_BUCKETS_US`.
fn encode_us_histogram(
    h: &hdrhistogram::Histogram<u64>,
    mut m: prometheus_client::encoding::MetricEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    use crate::dcp::replication_stats::EXPORT_BUCKETS_US;
    let mut buckets = Vec::with_capacity(EXPORT_BUCKETS_US.len() + 1);
    let mut below = 0;
    for bound in EXPORT_BUCKETS_US {
        let upto = h.count_between(0, bound);
        buckets.push((bound as f64 / 1e6, upto - below));
        below = upto;
    }
    buckets.push((f64::INFINITY, h.len() - below));
    let sum = h.mean() * h.len() as f64 / 1e6;
    m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, h.len(), &buckets, None)
}

/// The registry for `/metrics`, every name prefixed `sluice_`.
pub fn registry(node: Arc<Node>) -> Registry {
    let mut registry = Registry::with_prefix("sluice");
    registry.register_collector(Box::new(NodeCollector(Arc::new(NodeRef(node)))));
    registry
}
