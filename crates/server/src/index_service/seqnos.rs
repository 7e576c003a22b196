//! The high seqno of every active vbucket of a bucket, across the cluster: what a
//! `request_plus` query and an index build wait for. This node's own vbuckets are read
//! from its engine; every other member's with GET_ALL_VB_SEQNOS (active only), over one
//! kept connection per member and bucket, as the cluster identity.
//!
//! A vbucket the map places on a member that does not report it active (a takeover in
//! flight, a member that just restarted) has no seqno to wait for yet: the read fails and
//! the caller tries again, rather than waiting for a seqno read from an old copy.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use sluice_client::{Client, ClientError};
use sluice_types::{Seqno, VbId, VbState};

use super::coalesce::Coalescer;
use super::sources::{sources, Source};
use crate::bucket_handle::BucketHandle;
use crate::cluster_map::MapView;
use crate::node::Node;

/// How long one member may take to connect and answer.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum SeqnoError {
    #[error("reading the seqnos of {addr}: {error}")]
    Member { addr: String, error: ClientError },
    #[error("{addr} did not answer its seqnos within {READ_TIMEOUT:?}")]
    Timeout { addr: String },
    #[error("vbucket {vb} is not active where the cluster map places it yet")]
    NotActive { vb: u16 },
    /// A read's failure, as every caller that shared the read gets it.
    #[error(transparent)]
    Shared(Arc<SeqnoError>),
}

/// The kept connections, by (bucket, member address). Each is used by one read at a time;
/// a connection that failed is dropped and made again by the next read.
#[derive(Default)]
pub struct SeqnoReader {
    conns: parking_lot::Mutex<HashMap<(String, String), Slot>>,
    /// What the last read of each bucket found (the stats' "items remaining" of vbuckets
    /// active elsewhere; each feeder reads at least every [`REFRESH`]).
    last: parking_lot::Mutex<HashMap<String, Arc<BTreeMap<VbId, Seqno>>>>,
    /// Each bucket's sources, with the map they were worked out from: a map changes rarely,
    /// and working them out walks every vbucket, on every `request_plus` query otherwise.
    /// The map is kept, so the pointer compared cannot be another map's.
    sources: parking_lot::Mutex<HashMap<String, SourcesOfMap>>,
    /// Each bucket's reads, shared by the callers waiting for one (see `coalesce`), with
    /// the uuid of the bucket they read: a bucket made again under its name starts afresh.
    reads: parking_lot::Mutex<HashMap<String, ReadsOfBucket>>,
}

/// A read's outcome, as every caller sharing it gets it.
type SharedRead = Result<Arc<BTreeMap<VbId, Seqno>>, Arc<SeqnoError>>;

/// A bucket's uuid, and its shared reads.
type ReadsOfBucket = (String, Arc<Coalescer<SharedRead>>);

/// A bucket's sources, by node.
type Sources = BTreeMap<sluice_cluster::NodeId, Source>;

/// A map, and its sources.
type SourcesOfMap = (Arc<MapView>, Arc<Sources>);

/// How often a feeder refreshes what [`SeqnoReader::last`] knows.
pub const REFRESH: Duration = Duration::from_secs(1);

/// One member's kept connection (none until the first read, or after one failed).
type Slot = Arc<tokio::sync::Mutex<Option<Client>>>;

impl SeqnoReader {
    /// Every vbucket the map of `bucket` places somewhere, with its active copy's visible
    /// seqno (what a stream without prepares reaches), read after this call began: callers
    /// waiting at once share one read.
    pub async fn active_seqnos(
        &self,
        node: &Node,
        bucket: &BucketHandle,
    ) -> Result<Arc<BTreeMap<VbId, Seqno>>, SeqnoError> {
        let reads = {
            let mut all = self.reads.lock();
            let entry = all
                .entry(bucket.name.clone())
                .or_insert_with(|| (bucket.uuid.clone(), Arc::default()));
            if entry.0 != bucket.uuid {
                *entry = (bucket.uuid.clone(), Arc::default());
            }
            entry.1.clone()
        };
        reads
            .get(|| async { self.read_all(node, bucket).await.map_err(Arc::new) })
            .await
            .map_err(SeqnoError::Shared)
    }

    /// [`SeqnoReader::active_seqnos`], read now by this caller alone.
    async fn read_all(
        &self,
        node: &Node,
        bucket: &BucketHandle,
    ) -> Result<Arc<BTreeMap<VbId, Seqno>>, SeqnoError> {
        let view = bucket.cluster_map();
        let sources = self.sources_of(&bucket.name, &view);
        let reads = sources
            .values()
            .map(|source| self.read(node, bucket, source, view.this));
        let mut all = Vec::new();
        for part in futures_util::future::join_all(reads).await {
            all.extend(part?);
        }
        // Built once from sorted pairs, and shared with `last`, not copied: a request_plus
        // query reads this once per query.
        all.sort_unstable_by_key(|(vb, _)| *vb);
        let out = Arc::new(BTreeMap::from_iter(all));
        self.last.lock().insert(bucket.name.clone(), out.clone());
        Ok(out)
    }

    /// The sources of `view`, worked out once per map.
    fn sources_of(&self, bucket: &str, view: &Arc<MapView>) -> Arc<Sources> {
        let mut known = self.sources.lock();
        if let Some((seen, sources)) = known.get(bucket) {
            if Arc::ptr_eq(seen, view) {
                return sources.clone();
            }
        }
        let fresh = Arc::new(sources(&view.map));
        known.insert(bucket.to_string(), (view.clone(), fresh.clone()));
        fresh
    }

    /// What the last successful read of `bucket` found (empty before the first).
    pub fn last(&self, bucket: &str) -> Arc<BTreeMap<VbId, Seqno>> {
        self.last.lock().get(bucket).cloned().unwrap_or_default()
    }

    async fn read(
        &self,
        node: &Node,
        bucket: &BucketHandle,
        source: &Source,
        this: sluice_cluster::NodeId,
    ) -> Result<Vec<(VbId, Seqno)>, SeqnoError> {
        // What the member reports, by vbucket number.
        let reported: Vec<(VbId, Seqno)> = if source.node.id == this {
            bucket.engine.vb_visible_seqnos(Some(VbState::Active))
        } else {
            let addr = node.peer_kv_addr(&source.node);
            match tokio::time::timeout(READ_TIMEOUT, self.remote(node, &bucket.name, &addr)).await {
                Ok(r) => r?,
                Err(_) => {
                    self.forget(&bucket.name, &addr);
                    return Err(SeqnoError::Timeout { addr });
                }
            }
        };
        let mut by_vb: Vec<Option<Seqno>> = Vec::new();
        for (vb, seqno) in reported {
            let i = usize::from(vb.0);
            if by_vb.len() <= i {
                by_vb.resize(i + 1, None);
            }
            by_vb[i] = Some(seqno);
        }
        source
            .vbuckets
            .iter()
            .map(|vb| {
                by_vb
                    .get(usize::from(vb.0))
                    .copied()
                    .flatten()
                    .map(|s| (*vb, s))
                    .ok_or(SeqnoError::NotActive { vb: vb.0 })
            })
            .collect()
    }

    async fn remote(
        &self,
        node: &Node,
        bucket: &str,
        addr: &str,
    ) -> Result<Vec<(VbId, Seqno)>, SeqnoError> {
        let slot = self
            .conns
            .lock()
            .entry((bucket.to_string(), addr.to_string()))
            .or_default()
            .clone();
        let mut conn = slot.lock().await;
        let failed = |error| SeqnoError::Member {
            addr: addr.to_string(),
            error,
        };
        if conn.is_none() {
            let creds = node.peer_credentials();
            let opts = node.member_connect_options(
                addr,
                bucket,
                (&creds.username, &creds.password),
                node.config.cluster_encryption.data(),
            );
            *conn = Some(Client::connect(addr, opts).await.map_err(failed)?);
        }
        let client = conn.as_mut().expect("connected above");
        match client.get_vb_seqnos_in(VbState::Active).await {
            Ok(s) => Ok(s),
            Err(e) => {
                *conn = None;
                Err(failed(e))
            }
        }
    }

    fn forget(&self, bucket: &str, addr: &str) {
        self.conns
            .lock()
            .remove(&(bucket.to_string(), addr.to_string()));
    }
}
