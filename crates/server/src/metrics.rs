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
        for (name, value) in node.bucket.stats.pairs() {
            let m = encoder.encode_descriptor(name, name, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(m)?;
        }
        for (name, value) in node.bucket.gauges() {
            let m = encoder.encode_descriptor(name, name, None, MetricType::Gauge)?;
            ConstGauge::new(value as i64).encode(m)?;
        }
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

/// The registry for `/metrics`, every name prefixed `sluice_`.
pub fn registry(node: Arc<Node>) -> Registry {
    let mut registry = Registry::with_prefix("sluice");
    registry.register_collector(Box::new(NodeCollector(Arc::new(NodeRef(node)))));
    registry
}
