//! Figures the control plane keeps (its XDCR pipelines, in `sluice-manager`), offered to
//! STAT (group `xdcr`) and `/metrics` without the data plane knowing what they mean: the
//! manager installs a [`ControlStats`] on the node, and the data plane only prints.

use hdrhistogram::Histogram;

/// One replication's figures on this node.
#[derive(Debug, Clone)]
pub struct XdcrFigures {
    /// The replication's id (`REMOTE_UUID/FROM/TO`).
    pub id: String,
    /// Its source bucket.
    pub bucket: String,
    /// Counters and gauges by name (`docs_written`, `changes_left`, ...).
    pub values: Vec<(&'static str, u64)>,
    /// From the write at the source to the target's answer, in µs.
    pub latency_us: Histogram<u64>,
}

/// What the control plane tells the data plane's STAT and `/metrics`.
pub trait ControlStats: Send + Sync {
    /// Every replication's figures on this node.
    fn xdcr(&self) -> Vec<XdcrFigures>;
}
