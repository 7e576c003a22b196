//! The `xdcr` column: real cross-cluster replication running beside the cluster's own.
//!
//! Before the column's ladder the bench starts a second local cluster (`--xdcr-nodes`,
//! `--xdcr-replicas`, ports from `--base-port` + [`XDCR_PORT_OFFSET`]), registers it as a
//! remote cluster of the source (`POST /pools/default/remoteClusters`), creates a continuous
//! replication of the bucket to the bucket of the same name there
//! (`POST /controller/createReplication`), and waits until the prefilled documents have
//! crossed: the initial copy, timed.
//!
//! Each step then reports the XDCR figures of its measured part, from the source nodes'
//! STAT `xdcr` read when the warm-up ends and when the step ends (the later reading less the
//! earlier): documents written to the target, their bytes, and the lag from each write at
//! the source to the target's answer. The lag is the pipeline's own histogram of every
//! document it wrote, not a sample. After the step the bench waits until the replication has
//! drained (`changes_left` 0 on every node) and reports how long that took.
//!
//! After the ladder the replication and the reference are deleted and the target cluster is
//! stopped.

use hdrhistogram::errors::{AdditionError, SubtractionError};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use sluice_client::admin_http::{self, AdminAnswer, AdminHttpError, Body, Method};
use sluice_client::net::Dial;
use sluice_client::Credentials;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::local_cluster::{ClusterSpec, ClusterUpError, LocalCluster};
use crate::scenarios::replication::args::{ReplArgs, ReplArgsError};
use crate::scenarios::replication::sluice::SluiceTarget;
use crate::scenarios::replication::stages::{decode_histogram, StageError};
use crate::scenarios::replication::target::TargetError;

/// The target cluster's ports start this far above the source's.
pub const XDCR_PORT_OFFSET: u16 = 500;
/// The remote cluster reference's name on the source.
const REMOTE_NAME: &str = "bench-xdcr-target";
/// The longest wait for the replication to drain (the initial copy of 1 M documents
/// included).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(900);
/// How often a drain reads the figures.
const DRAIN_POLL: Duration = Duration::from_millis(100);
/// The longest a REST call to the source may take.
const REST_TIMEOUT: Duration = Duration::from_secs(30);

/// A source node's STAT `xdcr` figures that cannot be read or combined.
#[derive(Debug, thiserror::Error)]
pub enum XdcrStatError {
    #[error("STAT {key}: not a number: {value:?}")]
    NotANumber {
        key: String,
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error(transparent)]
    Histogram(#[from] StageError),
    #[error("merging STAT {key}")]
    Merge {
        key: String,
        #[source]
        source: AdditionError,
    },
    #[error("an XDCR window of {seconds} s")]
    EmptyWindow { seconds: f64 },
    #[error("the XDCR latency went backwards")]
    Backwards(#[source] SubtractionError),
}

/// Why the column's XDCR could not be set up, read or taken down.
#[derive(Debug, thiserror::Error)]
pub enum XdcrError {
    /// The target cluster's ports.
    #[error(transparent)]
    Args(#[from] ReplArgsError),
    /// Starting or stopping the target cluster.
    #[error(transparent)]
    Cluster(#[from] ClusterUpError),
    #[error("the target has no node")]
    NoTargetNode,
    /// `what` names the REST call: registering the target cluster, creating the
    /// replication, deleting either.
    #[error("{what}")]
    Rest {
        what: &'static str,
        #[source]
        source: AdminHttpError,
    },
    /// `body` is the source's answer.
    #[error("{what}: HTTP {status}: {body}")]
    Refused {
        what: &'static str,
        status: u16,
        body: serde_json::Value,
    },
    #[error("createReplication answered no id")]
    NoReplicationId,
    /// Reading the source nodes' STAT `xdcr`.
    #[error(transparent)]
    Source(#[from] TargetError),
    #[error(transparent)]
    Figures(#[from] XdcrStatError),
    #[error(
        "XDCR still has {changes_left} changes left after {waited:?} ({reporting} of {nodes} \
         nodes report it)"
    )]
    NotDrained {
        changes_left: u64,
        waited: Duration,
        reporting: usize,
        nodes: usize,
    },
}

/// The source cluster's admin port, as the bench's login.
struct SourceAdmin {
    addr: String,
    who: Credentials,
}

impl SourceAdmin {
    /// `method` on `path` with `body`; the answer's JSON, or an error naming `what` and the
    /// answer when it is not a success.
    async fn call(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Body<'_>,
    ) -> Result<serde_json::Value, XdcrError> {
        let dial = Dial::default();
        let AdminAnswer { status, body } = admin_http::send(
            &dial,
            &self.addr,
            &self.who,
            method,
            path,
            body,
            REST_TIMEOUT,
        )
        .await
        .map_err(|source| XdcrError::Rest { what, source })?;
        if !(200..300).contains(&status) {
            return Err(XdcrError::Refused { what, status, body });
        }
        Ok(body)
    }
}

/// One replication's figures summed over the source nodes at one instant (STAT `xdcr`,
/// `replication:ID:NAME`).
#[derive(Debug, Clone, Default)]
pub struct XdcrSnapshot {
    /// Source nodes that report the replication.
    pub nodes_reporting: usize,
    pub docs_written: u64,
    pub bytes_written: u64,
    pub docs_failed_cr_target: u64,
    pub changes_left: u64,
    pub latency: Option<Histogram<u64>>,
}

/// The XDCR figures of one step's measured part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct XdcrWindow {
    /// Documents the target stored.
    pub docs: u64,
    pub docs_per_s: f64,
    /// Key and value bytes of those documents, per second.
    pub mb_per_s: f64,
    /// From the write at the source to the target's answer, over every document written.
    pub lag_p50_us: f64,
    pub lag_p99_us: f64,
    pub lag_max_us: f64,
    /// Changes not yet replicated when the step ended, and how long after the step's end
    /// the replication had none left.
    pub changes_left_end: u64,
    pub drain_s: f64,
}

/// How the column's replication was set up, and its initial copy.
#[derive(Debug, Clone, Serialize)]
pub struct XdcrSetup {
    pub target_nodes: u16,
    pub target_replicas: u8,
    pub replication: String,
    /// Documents the initial copy wrote to the target, and how long it took.
    pub initial_docs: u64,
    pub initial_s: f64,
}

impl XdcrSnapshot {
    /// Adds one source node's STAT `xdcr` answer for replication `id`.
    pub fn add_node(&mut self, stats: &[(String, String)], id: &str) -> Result<(), XdcrStatError> {
        let prefix = format!("replication:{id}:");
        let mut seen = false;
        for (key, value) in stats {
            let Some(name) = key.strip_prefix(&prefix) else {
                continue;
            };
            seen = true;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|source| XdcrStatError::NotANumber {
                        key: key.clone(),
                        value: value.clone(),
                        source,
                    })
            };
            match name {
                "docs_written" => self.docs_written += number()?,
                "data_replicated" => self.bytes_written += number()?,
                "docs_failed_cr_target" => self.docs_failed_cr_target += number()?,
                "changes_left" => self.changes_left += number()?,
                "latency_hist" => {
                    let h = decode_histogram(key, value)?;
                    match &mut self.latency {
                        Some(merged) => merged.add(&h).map_err(|source| XdcrStatError::Merge {
                            key: key.clone(),
                            source,
                        })?,
                        None => self.latency = Some(h),
                    }
                }
                _ => {}
            }
        }
        if seen {
            self.nodes_reporting += 1;
        }
        Ok(())
    }

    /// What happened between `earlier` and this snapshot, `seconds` apart.
    pub fn since(&self, earlier: &XdcrSnapshot, seconds: f64) -> Result<XdcrWindow, XdcrStatError> {
        // Asked as "above 0", so that a NaN is refused too.
        let positive = seconds > 0.0;
        if !positive {
            return Err(XdcrStatError::EmptyWindow { seconds });
        }
        let docs = self.docs_written.saturating_sub(earlier.docs_written);
        let bytes = self.bytes_written.saturating_sub(earlier.bytes_written);
        let mut h = match &self.latency {
            Some(h) => h.clone(),
            None => Histogram::<u64>::new(2).expect("2 significant digits are valid"),
        };
        if let Some(before) = &earlier.latency {
            h.subtract(before).map_err(XdcrStatError::Backwards)?;
        }
        let q = |q: f64| match h.len() {
            0 => 0.0,
            _ => h.value_at_quantile(q) as f64,
        };
        Ok(XdcrWindow {
            docs,
            docs_per_s: docs as f64 / seconds,
            mb_per_s: bytes as f64 / seconds / 1e6,
            lag_p50_us: q(0.5),
            lag_p99_us: q(0.99),
            lag_max_us: q(1.0),
            changes_left_end: self.changes_left,
            drain_s: 0.0,
        })
    }
}

/// The target cluster and the replication into it, for one column's ladder.
pub struct XdcrColumn {
    cluster: LocalCluster,
    source: SourceAdmin,
    pub setup: XdcrSetup,
}

impl XdcrColumn {
    /// Starts the target cluster, replicates the bucket into it from `source` (whose admin
    /// port is `source_admin`), and waits for the initial copy.
    pub async fn start(
        args: &ReplArgs,
        run: u32,
        out_dir: &Path,
        source: &SluiceTarget,
        source_admin: SocketAddr,
    ) -> Result<XdcrColumn, XdcrError> {
        let spec = ClusterSpec {
            nodes: args.xdcr_nodes,
            replicas: args.xdcr_replicas,
            base_port: args.xdcr_base_port()?,
            data_dir: args
                .data_dir
                .as_ref()
                .map(|d| d.join(format!("run{}-xdcr-target", run + 1))),
            memory_quota_mb: args.memory_quota_mb,
            vbuckets: args.vbuckets,
            bucket_type: args.bucket_type,
            login: &args.login,
            scenario: "repl-xdcr",
        };
        eprintln!(
            "xdcr: starting a {}-node target cluster ({} replica(s))",
            spec.nodes, spec.replicas
        );
        let cluster = LocalCluster::start(spec, &out_dir.join("xdcr-target.log")).await?;
        let admin = SourceAdmin {
            addr: source_admin.to_string(),
            who: Credentials::new(&args.login.username, &args.login.password),
        };
        let target_admin = cluster.admins.first().ok_or(XdcrError::NoTargetNode)?;
        let (user, pass, bucket) = (
            args.login.username.as_str(),
            args.login.password.as_str(),
            args.login.bucket.as_str(),
        );
        let reference = [
            ("name", REMOTE_NAME),
            ("hostname", target_admin.as_str()),
            ("username", user),
            ("password", pass),
        ];
        admin
            .call(
                "registering the target cluster",
                Method::POST,
                "/pools/default/remoteClusters",
                Body::Form(&reference),
            )
            .await?;
        let replication = [
            ("fromBucket", bucket),
            ("toCluster", REMOTE_NAME),
            ("toBucket", bucket),
            ("replicationType", "continuous"),
        ];
        let created = admin
            .call(
                "creating the replication",
                Method::POST,
                "/controller/createReplication",
                Body::Form(&replication),
            )
            .await?;
        let replication = created["id"]
            .as_str()
            .ok_or(XdcrError::NoReplicationId)?
            .to_string();
        let began = Instant::now();
        let copied = drain(source, &replication).await?;
        let setup = XdcrSetup {
            target_nodes: args.xdcr_nodes,
            target_replicas: args.xdcr_replicas,
            replication,
            initial_docs: copied.docs_written,
            initial_s: began.elapsed().as_secs_f64(),
        };
        eprintln!(
            "xdcr: the initial copy wrote {} documents in {:.1} s",
            setup.initial_docs, setup.initial_s
        );
        Ok(XdcrColumn {
            cluster,
            source: admin,
            setup,
        })
    }

    /// The figures of `from..until` (a step's measured part), then how long the
    /// replication took to drain after it.
    pub async fn window(
        &self,
        source: &SluiceTarget,
        from: Instant,
        until: Instant,
    ) -> Result<XdcrWindow, XdcrError> {
        let id = &self.setup.replication;
        tokio::time::sleep_until(from.into()).await;
        let first = source.xdcr_snapshot(id).await?;
        let read_at = Instant::now();
        tokio::time::sleep_until(until.into()).await;
        let last = source.xdcr_snapshot(id).await?;
        let mut w = last.since(&first, read_at.elapsed().as_secs_f64())?;
        let ended = Instant::now();
        drain(source, id).await?;
        w.drain_s = ended.elapsed().as_secs_f64();
        Ok(w)
    }

    /// Deletes the replication and the reference, and stops the target cluster.
    pub async fn stop(self) -> Result<(), XdcrError> {
        let id = &self.setup.replication;
        self.source
            .call(
                "deleting the replication",
                Method::DELETE,
                &format!("/controller/cancelXDCR/{id}"),
                Body::None,
            )
            .await?;
        self.source
            .call(
                "deleting the remote cluster reference",
                Method::DELETE,
                &format!("/pools/default/remoteClusters/{REMOTE_NAME}"),
                Body::None,
            )
            .await?;
        Ok(self.cluster.stop().await?)
    }
}

/// Waits until every source node reports replication `id` with no change left; returns the
/// figures then.
async fn drain(source: &SluiceTarget, id: &str) -> Result<XdcrSnapshot, XdcrError> {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        let s = source.xdcr_snapshot(id).await?;
        if s.nodes_reporting == source.node_count() && s.changes_left == 0 {
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(XdcrError::NotDrained {
                changes_left: s.changes_left,
                waited: DRAIN_TIMEOUT,
                reporting: s.nodes_reporting,
                nodes: source.node_count(),
            });
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer, V2Serializer};

    fn node(id: &str, written: u64, left: u64, lags_us: &[u64]) -> Vec<(String, String)> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        for v in lags_us {
            h.record(*v).unwrap();
        }
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&h, &mut bytes).unwrap();
        let p = format!("replication:{id}:");
        vec![
            (format!("{p}docs_written"), written.to_string()),
            (format!("{p}data_replicated"), (written * 1000).to_string()),
            (format!("{p}changes_left"), left.to_string()),
            (format!("{p}docs_failed_cr_target"), "0".into()),
            (format!("{p}latency_p50_us"), "7".into()),
            (
                format!("{p}latency_hist"),
                base64::engine::general_purpose::STANDARD.encode(bytes),
            ),
            ("replication:other/x/y:docs_written".into(), "999".into()),
        ]
    }

    #[test]
    fn a_window_is_the_later_reading_less_the_earlier_over_the_nodes() {
        let id = "u/a/b";
        let mut before = XdcrSnapshot::default();
        before
            .add_node(&node(id, 100, 5, &[50_000; 100]), id)
            .unwrap();
        before.add_node(&node(id, 0, 0, &[]), id).unwrap();
        assert_eq!(before.nodes_reporting, 2);
        let mut after = XdcrSnapshot::default();
        after
            .add_node(
                &node(id, 1_100, 3, &[[50_000; 100], [1_000; 100]].concat()),
                id,
            )
            .unwrap();
        after
            .add_node(&node(id, 1_000, 4, &[2_000; 1000]), id)
            .unwrap();
        let w = after.since(&before, 2.0).unwrap();
        // The earlier 100 slow documents are left out: only 1,100 at 1–2 ms remain.
        assert_eq!(w.docs, 2_000);
        assert_eq!(w.docs_per_s, 1_000.0);
        assert_eq!(w.mb_per_s, 1.0);
        assert!((1_990.0..=2_010.0).contains(&w.lag_p50_us), "{w:?}");
        assert!((1_990.0..=2_010.0).contains(&w.lag_p99_us), "{w:?}");
        assert_eq!(w.changes_left_end, 7);
    }

    #[test]
    fn a_node_without_the_replication_does_not_report_it() {
        let mut s = XdcrSnapshot::default();
        s.add_node(&node("other", 5, 0, &[]), "u/a/b").unwrap();
        assert_eq!((s.nodes_reporting, s.docs_written), (0, 0));
        assert!(s.since(&XdcrSnapshot::default(), 0.0).is_err());
        let w = s.since(&XdcrSnapshot::default(), 1.0).unwrap();
        assert_eq!((w.docs, w.lag_p99_us), (0, 0.0));
    }

    #[test]
    fn a_histogram_that_does_not_decode_is_an_error() {
        let mut s = XdcrSnapshot::default();
        let bad = vec![("replication:i:latency_hist".to_string(), "!!".to_string())];
        assert!(s.add_node(&bad, "i").is_err());
        let bad = vec![("replication:i:docs_written".to_string(), "x".to_string())];
        assert!(s.add_node(&bad, "i").is_err());
    }
}
