//! One replication's pipeline on this node, for the vbuckets active here: a DCP stream of
//! this node's own producer (long-lived, flow-controlled, committed changes only, with
//! xattrs), a filter, and batches of SET_WITH_META / DEL_WITH_META to the target bucket's
//! active copies, routed by the target cluster's map (the smart client follows it through
//! rebalances, failovers and NOT_MY_VBUCKET).
//!
//! - **Batches.** While one batch is being written the stream is read on and the next
//!   forms; it goes as soon as the one before is answered. A batch holds at most
//!   [`HELD_CHANGES_MAX`] changes and [`HELD_BYTES_MAX`] bytes; past that the stream waits
//!   (and with it the producer, through flow control). Two changes of one key in a batch
//!   are one: only the newer is sent.
//! - **Checkpoints.** When a batch is answered, each vbucket's checkpoint moves to where
//!   the stream was when the batch was cut: every change before it was written, or lost
//!   its conflict at the target, or was filtered; with it go the target's answers (the
//!   history and seqno each target vbucket stored the newest write at). Each vbucket keeps
//!   a few, a second apart (`checkpoint`), and a start resumes it from the newest one the
//!   target still honours (checked against the target's failover logs): a target that
//!   lost acknowledged writes (an unclean restart, a failover to a lagging replica) gets
//!   them again, and only the vbuckets that sent them go back. They are saved under the
//!   data directory at most once a second and when the pipeline stops (`shared`), and
//!   reported to the replicated metadata every [`REPORT_EVERY`] and at stop; a restart or
//!   a pause resumes from them, and a vbucket the map moves to another node (rebalance,
//!   failover) resumes there from the last report (whichever of the two is further
//!   along). A batch that fails (the target unreachable past the client's retries)
//!   restarts the pipeline from the checkpoints: changes after them are sent again, which
//!   the target's conflict resolution makes harmless (an equal version loses). A filter
//!   changed with a re-stream voids the checkpoints (`ReplicationDef::restreams`).
//! - **Conflicts.** Each version keeps its CAS, revision, flags, expiry and datatype (xattrs
//!   first in the value). The target keeps whichever version wins its conflict resolution;
//!   a loser answers KEY_EEXISTS (`docs_failed_cr_target`). So a document replicated back to
//!   where it came from (replications both ways) loses to itself and stops there.
//! - **Collections.** A change goes to the target's collection of the same scope and
//!   collection names (Couchbase's implicit mapping, `collections`), whatever its id there.
//!   A change of a collection the target lacks is not sent (`docs_filtered`, and the error
//!   names the collection). Before such a change is dropped, the target's collections are
//!   read again if the last read is a second old, so a collection created there later
//!   receives the changes that follow, not the ones skipped.

use bytes::Bytes;
use sluice_client::dcp::StreamPositions;
use sluice_client::dcp::{DcpEvent, DcpItem, DcpOptions, DcpPosition, DcpStream, StartFrom};
use sluice_client::net::host_of;
use sluice_client::{
    ClientError, ClusterClient, ClusterError, ClusterOptions, ConnectOptions, Feature, Op, Status,
};
use sluice_cluster::metadata::{
    ConflictMode, MetaCommand, RemoteCluster, ReplicationDef, XdcrCheckpoint, XdcrTargetAck,
};
use sluice_cluster::NodeInfo;
use sluice_meta::MetaNode;
use sluice_proto::request::{WithMeta, WithMetaOp, WithMetaOptions};
use sluice_query::xdcr_filter::{Filter, FilterError};
use sluice_server::Node;
use sluice_types::{CollectionId, VbId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

use super::checkpoint::{Histories, Record, Resume, Ring};
use super::collections::{Route, Routes};
use super::precheck::precheck;
use super::remote::{self, RemoteAccess, RemoteError};
use super::select::{self, Change};
use super::shared::{fnv1a, Shared};
use super::stats::bump;
use sluice_cluster::collections::Manifest;

/// Most changes one batch holds.
pub const HELD_CHANGES_MAX: usize = 4096;
/// Most key and value bytes one batch holds.
pub const HELD_BYTES_MAX: usize = 8 << 20;
/// The least time between two saves of the checkpoints.
const SAVE_EVERY: Duration = Duration::from_secs(1);
/// The least time between two reports of the checkpoints to the replicated metadata: what
/// a vbucket's next owner may have to send again after a failover.
pub const REPORT_EVERY: Duration = Duration::from_secs(5);
/// How long the last report, as a pipeline stops, may take.
const LAST_REPORT_WAIT: Duration = Duration::from_secs(2);
/// The pause before a failed pipeline starts again, doubled per failure up to the max.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(5);
/// A target write's time limit, retries included.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one run of the pipeline needs; a change of any of it restarts the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub def: ReplicationDef,
    pub remote: RemoteCluster,
    /// The source bucket's conflict resolution: the target's must be the same.
    pub conflict: ConflictMode,
    /// This node, as the source bucket's map lists it.
    pub me: NodeInfo,
    /// The vbuckets active here.
    pub vbuckets: Vec<VbId>,
}

/// Why one run ended.
#[derive(Debug, thiserror::Error)]
enum PipelineError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("the target bucket resolves conflicts by {target}, the source bucket by {ours}")]
    ConflictMismatch {
        ours: &'static str,
        target: &'static str,
    },
    #[error("the filter does not compile: {0}")]
    Filter(#[from] FilterError),
    #[error("target cluster: {0}")]
    Target(#[from] ClusterError),
    #[error("source stream: {0}")]
    Dcp(#[from] sluice_client::dcp::DcpError),
    #[error("a batch's task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(
        "target vbucket {vb} took another history (it restarted uncleanly or failed over): \
         writes it acknowledged may be lost; the checkpoints are checked against its \
         failover log before the replication goes on"
    )]
    TargetHistory { vb: u16 },
    #[error("reading the target's failover logs: {0}")]
    FailoverLogs(ClusterError),
}

/// Runs the pipeline until `stop` is notified, starting again after each failure.
pub async fn run(
    node: Arc<Node>,
    meta: MetaNode,
    shared: Arc<Shared>,
    spec: Spec,
    stop: Arc<Notify>,
) {
    let mut pause = RETRY_PAUSE;
    loop {
        let run = Run {
            node: node.clone(),
            meta: meta.clone(),
            shared: shared.clone(),
            spec: &spec,
            stop: &stop,
        };
        match run.once().await {
            Ok(()) => {
                shared.save();
                let last = report(&meta, &shared, &spec);
                if tokio::time::timeout(LAST_REPORT_WAIT, last).await.is_err() {
                    tracing::debug!(replication = %spec.def.id, "last checkpoint report timed out");
                }
                return;
            }
            Err(e) => {
                tracing::warn!(replication = %spec.def.id, error = %e, ?pause,
                    "XDCR pipeline failed; it starts again from its checkpoints");
                shared.stats.set_error(Some(e.to_string()));
            }
        }
        tokio::select! {
            _ = stop.notified() => {
                shared.save();
                return;
            }
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(RETRY_PAUSE_MAX);
    }
}

/// Reports `spec`'s vbuckets' checkpoints to the replicated metadata.
async fn report(meta: &MetaNode, shared: &Shared, spec: &Spec) {
    let (restreams, checkpoints): (u64, Vec<XdcrCheckpoint>) = {
        let saved = shared.checkpoints.lock();
        let rings = spec.vbuckets.iter().filter_map(|vb| saved.rings.get(vb));
        (saved.restreams, rings.map(Ring::to_replicated).collect())
    };
    if checkpoints.is_empty() {
        return;
    }
    let cmd = MetaCommand::SaveXdcrCheckpoints {
        id: spec.def.id.clone(),
        restreams,
        checkpoints,
    };
    match meta.propose(cmd).await {
        Ok(Ok(_)) => {}
        Ok(Err(why)) => tracing::debug!(replication = %spec.def.id, %why, "checkpoints not kept"),
        Err(e) => {
            tracing::debug!(replication = %spec.def.id, error = %e, "checkpoints not reported")
        }
    }
}

struct Run<'a> {
    node: Arc<Node>,
    meta: MetaNode,
    shared: Arc<Shared>,
    spec: &'a Spec,
    stop: &'a Notify,
}

/// A batch on its way: the answers and what was sent, in the same order, and the large
/// sets the pre-check kept back (they would have lost at the target).
struct Written {
    answers: Vec<Result<sluice_client::OpResult, ClusterError>>,
    sent: Vec<Sent>,
    failed_cr_source: u64,
}

/// Writes a batch, each target collection's share side by side, each share's large sets
/// checked against the target first ([`precheck`]).
async fn write(
    client: ClusterClient,
    mode: sluice_engine::ConflictResolution,
    threshold: u32,
    groups: Vec<(u32, Vec<Op>, Vec<Sent>)>,
) -> Written {
    let mut running = Vec::with_capacity(groups.len());
    for (cid, ops, sent) in groups {
        let client = client.in_collection(CollectionId(cid));
        running.push(tokio::spawn(async move {
            let (ops, sent, dropped) = precheck(&client, mode, threshold, ops, sent).await;
            (client.execute_many(ops).await, sent, dropped)
        }));
    }
    let mut out = Written {
        answers: Vec::new(),
        sent: Vec::new(),
        failed_cr_source: 0,
    };
    for task in running {
        match task.await {
            Ok((answers, sent, dropped)) => {
                out.answers.extend(answers);
                out.sent.extend(sent);
                out.failed_cr_source += dropped;
            }
            Err(e) => {
                // The share's changes are lost with the task: the run fails on this
                // answer and restarts from the checkpoints, which did not move past them.
                tracing::warn!(error = %e, "an XDCR batch's task failed");
                out.answers
                    .push(Err(ClusterError::Client(ClientError::Unexpected(
                        "an XDCR batch's task failed",
                    ))));
                out.sent.push(Sent {
                    bytes: 0,
                    cas: 0,
                    source_vb: VbId(0),
                });
            }
        }
    }
    out
}

/// What the stats and the checkpoints need of one sent change.
struct Sent {
    bytes: usize,
    cas: u64,
    /// The vbucket it was streamed from.
    source_vb: VbId,
}

impl Run<'_> {
    async fn once(&self) -> Result<(), PipelineError> {
        let (spec, stats) = (self.spec, &self.shared.stats);
        let def = &spec.def;
        let filter = def
            .filter_expression
            .as_deref()
            .filter(|f| !f.is_empty())
            .map(Filter::compile)
            .transpose()?;
        let access = RemoteAccess::of(&spec.remote)?;
        let target = tokio::select! {
            _ = self.stop.notified() => return Ok(()),
            t = remote::target_bucket(&access, &def.to_bucket) => t?,
        };
        if target.conflict != spec.conflict {
            return Err(PipelineError::ConflictMismatch {
                ours: spec.conflict.as_str(),
                target: target.conflict.as_str(),
            });
        }
        let collections = tokio::select! {
            _ = self.stop.notified() => return Ok(()),
            c = remote::target_collections(&access, &def.to_bucket) => c?,
        };
        let mut routes = Routes::new(&self.source_manifest(), collections);
        let mut connect =
            ConnectOptions::sluice(&spec.remote.username, &spec.remote.password, &def.to_bucket);
        connect
            .features
            .extend([Feature::Xattr, Feature::Collections]);
        // Over TLS when the reference has a CA: the seeds are the target's kvSSL ports, and
        // the client dials every node of the target's map at its own.
        let first = target.kv_seeds.first().map_or("", |s| host_of(s));
        connect.tls = access.kv_tls(first)?;
        let mut options = ClusterOptions::new(connect);
        options.operation_timeout = WRITE_TIMEOUT;
        let client = tokio::select! {
            _ = self.stop.notified() => return Ok(()),
            c = ClusterClient::connect(&target.kv_seeds, options) => c?,
        };
        // The pre-check resolves as the target does.
        let mode = crate::buckets::resolution_of(target.conflict);
        // Last-write-wins targets take versions only from senders that say they know it.
        let base_options = match target.conflict {
            ConflictMode::Lww => WithMetaOptions::FORCE_ACCEPT_WITH_META_OPS,
            ConflictMode::Seqno => 0,
        };

        let (positions, mut histories) = tokio::select! {
            _ = self.stop.notified() => return Ok(()),
            r = self.resume_points(&client) => r?,
        };
        bump(&stats.starts, 1);
        let creds = self.node.peer_credentials();
        let addr = self.node.peer_kv_addr(&spec.me);
        let connect = self.node.member_connect_options(
            &addr,
            &def.from_bucket,
            (&creds.username, &creds.password),
            self.node.config.cluster_encryption.data(),
        );
        let mut opts = DcpOptions::new(connect);
        opts.name = format!("sluice-xdcr:{:016x}@{}", fnv1a(def.id.as_bytes()), addr);
        opts.xattrs = true;
        let mut stream = tokio::select! {
            _ = self.stop.notified() => return Ok(()),
            s = DcpStream::connect(&addr, opts, StartFrom::Positions(positions)) => s?,
        };
        stats.set_error(None);
        tracing::info!(replication = %def.id, vbuckets = spec.vbuckets.len(),
            "XDCR pipeline streaming");

        let mut held = Held::default();
        let mut in_flight: Option<tokio::task::JoinHandle<Written>> = None;
        // Where the batch in flight moves the checkpoints.
        let mut cut: Vec<DcpPosition> = Vec::new();
        let mut last_save = Instant::now();
        let mut last_report = Instant::now();
        let mut reporting: Option<tokio::task::JoinHandle<()>> = None;
        // The vbuckets whose streams moved since their checkpoints last did (filtered
        // changes too): only their positions are copied at a cut.
        let mut touched: std::collections::BTreeSet<VbId> = std::collections::BTreeSet::new();
        let mut target_read = Instant::now();
        loop {
            if in_flight.is_none() {
                let positions = stream.positions();
                let moved_to = |touched: &mut std::collections::BTreeSet<VbId>| {
                    let vbs = std::mem::take(touched);
                    vbs.into_iter()
                        .filter_map(|vb| positions.get(vb).copied())
                        .collect::<Vec<_>>()
                };
                if !held.ops.is_empty() {
                    cut = moved_to(&mut touched);
                    let batch = held.take(base_options);
                    let threshold = def.settings.optimistic_threshold;
                    in_flight = Some(tokio::spawn(write(client.clone(), mode, threshold, batch)));
                } else if !touched.is_empty() && last_save.elapsed() >= SAVE_EVERY {
                    // Only filtered changes since: the checkpoints move past them.
                    self.advance(moved_to(&mut touched).into_iter(), &HashMap::new());
                }
                if last_save.elapsed() >= SAVE_EVERY {
                    self.save_soon();
                    last_save = Instant::now();
                }
                let idle = reporting.as_ref().is_none_or(|r| r.is_finished());
                if idle && last_report.elapsed() >= REPORT_EVERY {
                    let (meta, shared, spec) =
                        (self.meta.clone(), self.shared.clone(), spec.clone());
                    reporting = Some(tokio::spawn(
                        async move { report(&meta, &shared, &spec).await },
                    ));
                    last_report = Instant::now();
                }
            }
            let reading = held.ops.len() < HELD_CHANGES_MAX && held.bytes < HELD_BYTES_MAX;
            let event = tokio::select! {
                _ = self.stop.notified() => {
                    if let Some(batch) = in_flight.take() {
                        self.finish(batch.await?, &cut, &mut histories)?;
                    }
                    return Ok(());
                }
                batch = async { in_flight.as_mut().expect("guarded").await }, if in_flight.is_some() => {
                    in_flight = None;
                    self.finish(batch?, &cut, &mut histories)?;
                    continue;
                }
                // Idle: the checkpoints still move past filtered changes within a second.
                _ = tokio::time::sleep(SAVE_EVERY), if !touched.is_empty() && held.ops.is_empty() => continue,
                e = stream.next(), if reading => e?,
            };
            let change = match &event {
                DcpEvent::Mutation(item) => Some((item, Change::Set)),
                DcpEvent::Deletion(item) => Some((item, Change::Delete)),
                DcpEvent::Expiration(item) => Some((item, Change::Expire)),
                _ => None,
            };
            if let Some((item, change)) = change {
                // A collection the target lacked (as last read): perhaps it has it by now.
                // Read again before deciding, at most once a second.
                let missing = sluice_types::collection::split_key(&item.key)
                    .is_ok_and(|(cid, _)| matches!(routes.route(cid.0), Route::MissingAtTarget(_)));
                if missing && target_read.elapsed() >= SAVE_EVERY {
                    target_read = Instant::now();
                    match remote::target_collections(&access, &def.to_bucket).await {
                        Ok(c) => routes.set_target(c),
                        Err(e) => tracing::debug!(replication = %def.id, error = %e,
                            "reading the target's collections"),
                    }
                }
                self.hold(&mut held, &mut routes, filter.as_ref(), item, change);
            }
            touched.insert(event.vb());
        }
    }

    /// The source bucket's collections as this node's metadata has them.
    fn source_manifest(&self) -> Manifest {
        let state = self.meta.state().borrow().clone();
        state
            .buckets()
            .get(&self.spec.def.from_bucket)
            .map(|b| b.manifest.clone())
            .unwrap_or_default()
    }

    fn hold(
        &self,
        held: &mut Held,
        routes: &mut Routes,
        filter: Option<&Filter>,
        item: &DcpItem,
        change: Change,
    ) {
        let stats = &self.shared.stats;
        let Ok((cid, key)) = sluice_types::collection::split_key(&item.key) else {
            bump(&stats.docs_received, 1);
            bump(&stats.docs_filtered, 1);
            return;
        };
        if cid == CollectionId::SYSTEM {
            // The source's collection records: each cluster has its own.
            return;
        }
        bump(&stats.docs_received, 1);
        let mut route = routes.route(cid.0);
        if matches!(route, Route::UnknownAtSource(_)) {
            // A collection newer than the manifest this pipeline read.
            routes.set_source(&self.source_manifest());
            route = routes.route(cid.0);
        }
        let target = match route {
            Route::To(target) => target,
            Route::UnknownAtSource(_) => {
                bump(&stats.docs_filtered, 1);
                return;
            }
            Route::MissingAtTarget((scope, collection)) => {
                stats.set_error(Some(format!(
                    "the target bucket has no collection {scope}.{collection}: its changes are not replicated"
                )));
                bump(&stats.docs_filtered, 1);
                return;
            }
        };
        let settings = &self.spec.def.settings;
        if !select::sends(filter, settings, key, item, change) {
            bump(&stats.docs_filtered, 1);
            return;
        }
        let expiry = if settings.bypass_expiry {
            0
        } else {
            item.expiry
        };
        held.hold(target, Bytes::copy_from_slice(key), item, change, expiry);
    }

    /// A batch answered: counts it and moves the checkpoints to `cut`, with the target's
    /// answers. A write that failed otherwise than by losing its conflict fails the run;
    /// so does an answer naming another history than the target vbucket's before
    /// ([`Histories`]): the next start checks the checkpoints against it.
    fn finish(
        &self,
        written: Written,
        cut: &[DcpPosition],
        histories: &mut Histories,
    ) -> Result<(), PipelineError> {
        let stats = &self.shared.stats;
        bump(&stats.docs_failed_cr_source, written.failed_cr_source);
        let Written { answers, sent, .. } = written;
        let now = sluice_server::now_unix_ns();
        let mut changed = None;
        let mut acks: HashMap<VbId, Vec<XdcrTargetAck>> = HashMap::new();
        for (answer, s) in answers.into_iter().zip(sent) {
            match answer {
                Ok(written) => {
                    stats.written(s.bytes, s.cas, now);
                    let token = match written {
                        sluice_client::OpResult::Mutation(m) => m.token,
                        _ => None,
                    };
                    if let Some(t) = token {
                        let ack = XdcrTargetAck {
                            vb: t.vb.0,
                            uuid: t.vb_uuid.0,
                            seqno: t.seqno.0,
                        };
                        if !histories.note(&ack) {
                            changed = changed.or(Some(ack.vb));
                        }
                        acks.entry(s.source_vb).or_default().push(ack);
                    }
                }
                Err(ClusterError::Client(ClientError::Status(Status::KeyEexists))) => {
                    bump(&stats.docs_failed_cr_target, 1)
                }
                Err(e) => return Err(e.into()),
            }
        }
        bump(&stats.batches, 1);
        if let Some(vb) = changed {
            return Err(PipelineError::TargetHistory { vb });
        }
        debug_assert!(
            acks.keys().all(|vb| cut.iter().any(|p| p.vb == *vb)),
            "every sent change's vbucket moved since the last cut"
        );
        self.advance(cut.iter().copied(), &acks);
        Ok(())
    }

    /// Where each vbucket of the run resumes, and the target histories its checkpoints were
    /// checked against: this node's checkpoints, or the replicated one where it is further
    /// along (the vbucket streamed from another node since), each taken back to its newest
    /// record the target still honours (`checkpoint`).
    async fn resume_points(
        &self,
        client: &ClusterClient,
    ) -> Result<(StreamPositions, Histories), PipelineError> {
        let spec = self.spec;
        let restreams = spec.def.restreams;
        let replicated = {
            let watch = self.meta.state();
            let state = watch.borrow();
            // Reports of another re-stream than this run's are not this run's to resume from.
            let same = state
                .replications()
                .get(&spec.def.id)
                .is_some_and(|d| d.restreams == restreams);
            let reported = state.xdcr_checkpoints(&spec.def.id).filter(|_| same);
            reported.cloned().unwrap_or_default()
        };
        let target_vbs: std::collections::BTreeSet<u16> = {
            let mut saved = self.shared.checkpoints.lock();
            if saved.restreams != restreams {
                // The filter changed with a re-stream: every vbucket starts from zero.
                tracing::info!(replication = %spec.def.id, restreams,
                    "the replication re-streams: its checkpoints are void");
                saved.rings.clear();
                saved.restreams = restreams;
            }
            for vb in &spec.vbuckets {
                let ring = saved.rings.entry(*vb).or_insert_with(|| Ring::zero(*vb));
                if let Some(theirs) = replicated.get(&vb.0) {
                    if ring.newest().source.seqno.0 < theirs.seqno {
                        ring.adopt(Record::from_replicated(theirs));
                    }
                }
            }
            spec.vbuckets
                .iter()
                .filter_map(|vb| saved.rings.get(vb))
                .flat_map(Ring::target_vbuckets)
                .collect()
        };
        // A vbucket the target no longer has (its bucket was made again with fewer) gets no
        // log: the records naming it are not honoured.
        let target_count = client.map().num_vbuckets();
        let target_vbs: Vec<u16> = target_vbs
            .into_iter()
            .filter(|&vb| vb < target_count)
            .collect();
        let ops = target_vbs
            .iter()
            .map(|&vb| Op::FailoverLog { vb: VbId(vb) })
            .collect();
        let mut logs: HashMap<u16, Vec<sluice_types::FailoverEntry>> = HashMap::new();
        for (vb, answer) in target_vbs.iter().zip(client.execute_many(ops).await) {
            match answer.map_err(PipelineError::FailoverLogs)? {
                sluice_client::OpResult::FailoverLog(log) => {
                    logs.insert(*vb, log);
                }
                _ => unreachable!("GET_FAILOVER_LOG answers with a failover log"),
            }
        }
        let stats = &self.shared.stats;
        let mut saved = self.shared.checkpoints.lock();
        let (mut rewound, mut to_zero) = (0u64, 0u64);
        let mut positions = Vec::with_capacity(spec.vbuckets.len());
        for vb in &spec.vbuckets {
            let ring = saved
                .rings
                .get_mut(vb)
                .expect("every vbucket has a ring by now");
            let resume = ring.resume(|t| logs.get(&t).map(Vec::as_slice));
            if resume.rewound() {
                rewound += 1;
                to_zero += u64::from(matches!(resume, Resume::Zero { .. }));
                tracing::warn!(replication = %spec.def.id, vb = vb.0, ?resume,
                    "the target lost writes this vbucket's checkpoint counted on: it resumes \
                     from an older one");
            }
            positions.push(ring.newest().source);
        }
        drop(saved);
        let resumed: Vec<&DcpPosition> = positions.iter().filter(|p| p.seqno.0 > 0).collect();
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        stats.resumed_vbuckets.store(resumed.len() as u64, relaxed);
        stats
            .resumed_seqnos
            .store(resumed.iter().map(|p| p.seqno.0).sum(), relaxed);
        bump(&stats.rewinds, rewound);
        bump(&stats.rewinds_to_zero, to_zero);
        if rewound > 0 {
            // The rewound checkpoints, before a report or another node reads them.
            self.shared.save();
        }
        let histories = Histories::from_logs(logs.iter().map(|(vb, l)| (*vb, l.as_slice())));
        Ok((StreamPositions::from_positions(positions), histories))
    }

    /// Moves the checkpoints of the vbuckets in `to`, with the target's answers to their
    /// changes since.
    fn advance(
        &self,
        to: impl Iterator<Item = DcpPosition>,
        acks: &HashMap<VbId, Vec<XdcrTargetAck>>,
    ) {
        let ms = sluice_server::now_unix_ns() / 1_000_000;
        {
            let mut saved = self.shared.checkpoints.lock();
            if saved.restreams != self.spec.def.restreams {
                return; // voided by a newer run's re-stream
            }
            for p in to {
                let ring = saved.rings.entry(p.vb).or_insert_with(|| Ring::zero(p.vb));
                ring.advance(p, acks.get(&p.vb).map_or(&[], Vec::as_slice), ms);
            }
        }
        self.shared
            .stats
            .checkpoint_unix_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Saves the checkpoints on the blocking pool (a file write), not waiting for it.
    fn save_soon(&self) {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.save());
    }
}

/// The batch being formed: one change per key of each target collection (the newest), and
/// their bytes.
#[derive(Default)]
struct Held {
    ops: HashMap<(u32, Bytes), (Op, Sent)>,
    bytes: usize,
}

impl Held {
    /// Holds `item`'s change of `key`, sent with `expiry` (the item's, or 0 when the
    /// replication bypasses expiries).
    fn hold(&mut self, cid: u32, key: Bytes, item: &DcpItem, change: Change, expiry: u32) {
        let (op, value) = match change {
            Change::Set => (WithMetaOp::Set, item.value.clone()),
            Change::Delete | Change::Expire => (WithMetaOp::Delete, Bytes::new()),
        };
        let options = match change {
            Change::Expire => WithMetaOptions::IS_EXPIRATION,
            _ => 0,
        };
        let bytes = key.len() + value.len();
        let meta = WithMeta {
            flags: item.flags,
            expiry,
            rev_seqno: item.rev_seqno,
            cas: item.cas.0,
            options: WithMetaOptions(options),
        };
        let datatype = match change {
            Change::Set => item.datatype.0,
            _ => 0,
        };
        let sent = Sent {
            bytes,
            cas: item.cas.0,
            source_vb: item.vb,
        };
        let op = Op::WithMeta {
            op,
            key: key.clone(),
            value,
            meta,
            datatype,
        };
        if let Some((_, old)) = self.ops.insert((cid, key), (op, sent)) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
    }

    /// The batch's operations by target collection (each with `base` options added),
    /// emptying it.
    fn take(&mut self, base: u32) -> Vec<(u32, Vec<Op>, Vec<Sent>)> {
        self.bytes = 0;
        let mut groups: BTreeMap<u32, (Vec<Op>, Vec<Sent>)> = BTreeMap::new();
        for ((cid, _), (mut op, sent)) in self.ops.drain() {
            if let Op::WithMeta { meta, .. } = &mut op {
                meta.options.0 |= base;
            }
            let group = groups.entry(cid).or_default();
            group.0.push(op);
            group.1.push(sent);
        }
        groups
            .into_iter()
            .map(|(cid, (ops, sent))| (cid, ops, sent))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::{Cas, Datatype, Seqno};

    fn item(key: &str, value: &str, cas: u64, rev: u64) -> DcpItem {
        DcpItem {
            vb: VbId(3),
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: Bytes::copy_from_slice(value.as_bytes()),
            cas: Cas(cas),
            seqno: Seqno(rev),
            rev_seqno: rev,
            flags: 7,
            expiry: 1_900_000_000,
            datatype: Datatype(1),
            delete_time: None,
        }
    }

    #[test]
    fn a_batch_keeps_the_newest_change_of_each_key_and_counts_its_bytes() {
        let mut held = Held::default();
        held.hold(
            0,
            Bytes::from_static(b"a"),
            &item("a", "one", 10, 1),
            Change::Set,
            1_900_000_000,
        );
        held.hold(
            8,
            Bytes::from_static(b"b"),
            &item("b", "xx", 11, 1),
            Change::Set,
            1_900_000_000,
        );
        held.hold(
            0,
            Bytes::from_static(b"a"),
            &item("a", "three", 12, 2),
            Change::Set,
            1_900_000_000,
        );
        assert_eq!((held.ops.len(), held.bytes), (2, 1 + 5 + 1 + 2));
        held.hold(
            8,
            Bytes::from_static(b"b"),
            &item("b", "", 13, 2),
            Change::Expire,
            1_900_000_000,
        );
        assert_eq!(held.bytes, 1 + 5 + 1);
        // The same key in another collection is another document.
        held.hold(
            8,
            Bytes::from_static(b"a"),
            &item("a", "z", 14, 1),
            Change::Set,
            0,
        );
        assert_eq!((held.ops.len(), held.bytes), (3, 1 + 5 + 1 + 1 + 1));
        let groups = held.take(WithMetaOptions::FORCE_ACCEPT_WITH_META_OPS);
        assert_eq!((held.ops.len(), held.bytes), (0, 0));
        let shape: Vec<(u32, usize, usize)> = groups
            .iter()
            .map(|(c, o, s)| (*c, o.len(), s.len()))
            .collect();
        assert_eq!(shape, [(0, 1, 1), (8, 2, 2)]);
        let ops = groups
            .into_iter()
            .flat_map(|(cid, ops, _)| ops.into_iter().map(move |op| (cid, op)));
        for (cid, op) in ops {
            let Op::WithMeta {
                op,
                key,
                value,
                meta,
                datatype,
            } = op
            else {
                panic!("a batch holds *_WITH_META only");
            };
            assert!(meta
                .options
                .has(WithMetaOptions::FORCE_ACCEPT_WITH_META_OPS));
            match (cid, &key[..]) {
                // Held with its expiry bypassed.
                (8, b"a") => assert_eq!((&value[..], meta.cas, meta.expiry), (&b"z"[..], 14, 0)),
                (0, b"a") => {
                    assert_eq!(
                        (op, &value[..], meta.cas, meta.rev_seqno),
                        (WithMetaOp::Set, &b"three"[..], 12, 2)
                    );
                    assert_eq!((meta.flags, meta.expiry, datatype), (7, 1_900_000_000, 1));
                }
                (8, b"b") => {
                    assert_eq!(
                        (op, value.len(), meta.cas, datatype),
                        (WithMetaOp::Delete, 0, 13, 0)
                    );
                    assert!(meta.options.has(WithMetaOptions::IS_EXPIRATION));
                }
                other => panic!("unexpected key {other:?}"),
            }
        }
    }

    #[test]
    fn checkpoint_files_are_named_by_a_stable_hash() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a(b"u/a/b"), fnv1a(b"u/a/c"));
    }
}
