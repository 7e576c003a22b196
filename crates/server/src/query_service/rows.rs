//! Where a statement's documents come from: the planner's access path, read a page at a
//! time. A page is the documents of up to [`PAGE_ENTRIES`] index entries (or USE KEYS
//! keys): those whose vbucket is active here read from the engine in place
//! (`local_read`), the others fetched through KV in one batch; a document deleted since its
//! entry was read is skipped. When the index covers the statement (`sluice_query::Cover`)
//! the rows are built from the entries themselves and nothing is fetched.

use std::collections::{BTreeMap, VecDeque};

use base64::Engine as _;
use sluice_client::ClusterClient;
use sluice_index::{IndexDef, IndexId, IndexState, ScanPage};
use sluice_query::{Access, Cover, DocMeta, Row, Span};
use sluice_types::{CollectionId, Seqno, VbId};
use std::sync::Arc;
use tokio::time::Instant;

use super::error::ServiceError;
use super::local_read::{self, LocalRead};
use super::select::Catalog;
use super::QueryService;
use crate::bucket_handle::BucketHandle;
use crate::index_service::listing::Holder;
use crate::index_service::WaitError;
use sluice_client::GetResult;
use sluice_query::request::{Consistency, QueryRequest};

/// The pause before reading the cluster's seqnos again.
const SEQNO_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// Entries read from the index per page.
pub const PAGE_ENTRIES: usize = 256;

/// Pages this small are read from the index inline: from the block cache that takes a few
/// microseconds, less than handing the read to the blocking pool and back.
const INLINE_SCAN_ENTRIES: usize = 32;

/// A scan's first page is always read inline, at most this many entries (a page of
/// `LIMIT 100` fits). Most statements end there (an equality on an indexed field reads one
/// entry, whatever the page's size), and the hand-off to the blocking pool and back (two
/// thread wake-ups) cost a point lookup a third of its time. A scan that fills it goes on
/// with full pages on the blocking pool.
const FIRST_PAGE_ENTRIES: usize = 128;

pub(super) struct RowSource<'a> {
    service: &'a QueryService,
    bucket: std::sync::Arc<BucketHandle>,
    /// The collection the documents are in.
    cid: CollectionId,
    client: ClusterClient,
    from: From,
    /// The index covers the statement: rows come from its entries.
    cover: Option<std::sync::Arc<Cover>>,
    /// Index entries read so far (the first page is read inline).
    scanned: bool,
}

enum From {
    Keys(VecDeque<String>),
    /// This node's copy of the index, caught up as the request asked.
    Scan {
        id: IndexId,
        spans: VecDeque<Span>,
    },
    /// A copy on another node (this node holds none, or its copy is still building): each
    /// page asked of one of `holders`, which waits for `consistency` first.
    Remote {
        def: Box<IndexDef>,
        holders: Vec<Holder>,
        spans: VecDeque<Span>,
        consistency: Option<Arc<BTreeMap<VbId, Seqno>>>,
        /// When the request's consistency wait must be over.
        wait_until: Instant,
    },
}

impl QueryService {
    /// The rows `access` reads from `bucket`, after waiting for the consistency `req` asks;
    /// with `cover`, built from the index entries (only a SELECT's scan is ever covered).
    pub(super) async fn rows(
        &self,
        (bucket, cid): (std::sync::Arc<BucketHandle>, CollectionId),
        access: Access,
        cover: Option<std::sync::Arc<Cover>>,
        catalog: &Catalog,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<RowSource<'_>, ServiceError> {
        let from = match access {
            Access::None => From::Keys(VecDeque::new()),
            Access::KeyLookup { keys } => From::Keys(keys.into()),
            Access::IndexScan { index, spans, .. } | Access::PrimaryScan { index, spans, .. } => {
                let i = catalog
                    .defs
                    .iter()
                    .position(|d| d.name == index)
                    .ok_or_else(|| ServiceError::IndexNotFound(index.clone()))?;
                let def = &catalog.defs[i];
                let (targets, wait_until) = self.consistency(&bucket, req, deadline).await?;
                if def.state == IndexState::Online {
                    if let Some(targets) = &targets {
                        self.wait_caught_up(def, targets, wait_until).await?;
                    }
                    From::Scan {
                        id: def.id,
                        spans: spans.into(),
                    }
                } else {
                    From::Remote {
                        def: Box::new(def.clone()),
                        holders: catalog.copies[i].clone(),
                        spans: spans.into(),
                        consistency: targets,
                        wait_until,
                    }
                }
            }
        };
        let client = self.client(&bucket.name).await?.in_collection(cid);
        Ok(RowSource {
            service: self,
            bucket,
            cid,
            client,
            from,
            cover,
            scanned: false,
        })
    }

    /// The seqnos the request's consistency asks an index to have applied (`None`: not
    /// bounded), and until when a scan may wait for them.
    async fn consistency(
        &self,
        bucket: &BucketHandle,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<(Option<Arc<BTreeMap<VbId, Seqno>>>, Instant), ServiceError> {
        let targets = match &req.consistency {
            Consistency::NotBounded => None,
            Consistency::RequestPlus => Some(self.cluster_seqnos(bucket, deadline).await?),
            Consistency::AtPlus(vectors) => Some(Arc::new(
                vectors
                    .get(bucket.name.as_str())
                    .or_else(|| vectors.get(""))
                    .map(|v| v.iter().map(|(vb, t)| (*vb, t.seqno)).collect())
                    .unwrap_or_default(),
            )),
        };
        let wait_until = match req.scan_wait {
            Some(scan_wait) => deadline.min(Instant::now() + scan_wait),
            None => deadline,
        };
        Ok((targets, wait_until))
    }

    /// Waits until this node's copy of `def` applied `targets`, until `wait_until`.
    async fn wait_caught_up(
        &self,
        def: &IndexDef,
        targets: &BTreeMap<VbId, Seqno>,
        wait_until: Instant,
    ) -> Result<(), ServiceError> {
        let wait = wait_until.saturating_duration_since(Instant::now());
        match self.node.index.wait_for(def.id, targets, wait).await {
            Ok(()) => Ok(()),
            Err(WaitError::Timeout) => Err(ServiceError::ScanWait(def.name.clone())),
            Err(WaitError::Index(e)) => Err(e.into()),
        }
    }
}

impl QueryService {
    /// Every active vbucket's seqno across the cluster, read again (briefly paused) while a
    /// member cannot say (a takeover in flight), until `deadline`.
    async fn cluster_seqnos(
        &self,
        bucket: &BucketHandle,
        deadline: Instant,
    ) -> Result<std::sync::Arc<BTreeMap<VbId, Seqno>>, ServiceError> {
        loop {
            match self
                .node
                .index
                .seqnos
                .active_seqnos(&self.node, bucket)
                .await
            {
                Ok(seqnos) => return Ok(seqnos),
                Err(e) if Instant::now() + SEQNO_RETRY < deadline => {
                    tracing::debug!(error = %e, "request_plus: seqnos not read yet");
                    tokio::time::sleep(SEQNO_RETRY).await;
                }
                Err(e) => return Err(ServiceError::Seqnos(e)),
            }
        }
    }
}

impl RowSource<'_> {
    /// The next page of documents (possibly empty), or `None` once everything was read;
    /// at most `wanted` entries or keys when the statement needs no more (at least one).
    pub async fn next_page(
        &mut self,
        wanted: Option<u64>,
    ) -> Result<Option<Vec<Row>>, ServiceError> {
        let page = wanted.map_or(PAGE_ENTRIES, |w| {
            usize::try_from(w)
                .unwrap_or(usize::MAX)
                .clamp(1, PAGE_ENTRIES)
        });
        let keys: Vec<Vec<u8>> = match &mut self.from {
            From::Keys(keys) => {
                if keys.is_empty() {
                    return Ok(None);
                }
                let n = keys.len().min(page);
                keys.drain(..n).map(String::into_bytes).collect()
            }
            From::Scan { id, spans } => {
                let Some(span) = spans.pop_front() else {
                    return Ok(None);
                };
                let store = self.service.node.index.store.clone();
                let (id, s) = (*id, span.clone());
                let first = !std::mem::replace(&mut self.scanned, true);
                let page = if first {
                    store.scan(id, &s.start, &s.end, page.min(FIRST_PAGE_ENTRIES))?
                } else if page <= INLINE_SCAN_ENTRIES {
                    store.scan(id, &s.start, &s.end, page)?
                } else {
                    tokio::task::spawn_blocking(move || store.scan(id, &s.start, &s.end, page))
                        .await
                        .map_err(|e| ServiceError::Fetch(e.to_string()))??
                };
                if let Some(next) = page.resume.clone() {
                    spans.push_front(Span {
                        start: next,
                        end: span.end,
                    });
                }
                return self.page_rows(page).await.map(Some);
            }
            From::Remote {
                def,
                holders,
                spans,
                consistency,
                wait_until,
            } => {
                let Some(span) = spans.pop_front() else {
                    return Ok(None);
                };
                let wait = wait_until.saturating_duration_since(Instant::now());
                let consistency = consistency.as_deref().map(|t| (t, wait));
                let page = self
                    .service
                    .scan_remote(holders, def, (&span.start, &span.end), page, consistency)
                    .await?;
                if let Some(next) = page.resume.clone() {
                    spans.push_front(Span {
                        start: next,
                        end: span.end,
                    });
                }
                return self.page_rows(page).await.map(Some);
            }
        };
        self.fetch(&keys).await.map(Some)
    }

    /// The rows of a page of index entries: built from the entries when the index covers
    /// the statement, else the documents they name.
    async fn page_rows(&self, page: ScanPage) -> Result<Vec<Row>, ServiceError> {
        if let Some(cover) = &self.cover {
            // A document that expired is gone to a fetch even before the expiry pager
            // deletes it; its entry keeps the expiry so it is gone here too.
            let now = crate::exec::unix_now_s();
            let rows = page
                .entries
                .into_iter()
                .filter(|e| !sluice_types::Expiry(e.expiry).is_expired(now))
                .map(|e| cover.row(e.values, &e.doc_key));
            return Ok(rows.collect());
        }
        let keys: Vec<Vec<u8>> = page.entries.into_iter().map(|e| e.doc_key).collect();
        self.fetch(&keys).await
    }

    async fn fetch(&self, keys: &[Vec<u8>]) -> Result<Vec<Row>, ServiceError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // Read here what this node's engine can answer; the rest through KV, in one batch.
        let mut docs: Vec<Option<GetResult>> = Vec::with_capacity(keys.len());
        let mut remote: Vec<usize> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            docs.push(
                match local_read::read(&self.service.node, &self.bucket, self.cid, key) {
                    LocalRead::Found(doc) => Some(doc),
                    LocalRead::NotFound => None,
                    LocalRead::Elsewhere => {
                        remote.push(i);
                        None
                    }
                },
            );
        }
        if !remote.is_empty() {
            let asked: Vec<&[u8]> = remote.iter().map(|&i| keys[i].as_slice()).collect();
            for (i, doc) in remote.iter().zip(self.client.get_many(&asked).await) {
                docs[*i] = match doc {
                    Ok(d) => Some(d),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => return Err(ServiceError::Fetch(e.to_string())),
                };
            }
        }
        let mut rows = Vec::with_capacity(keys.len());
        for (key, doc) in keys.iter().zip(docs) {
            let Some(doc) = doc else {
                continue;
            };
            let parsed = (doc.datatype & sluice_types::Datatype::JSON != 0)
                .then(|| serde_json::from_slice(&doc.value).ok())
                .flatten();
            let is_json = parsed.is_some();
            // Couchbase shows a binary document as its bytes in base64.
            let body = parsed.unwrap_or_else(|| {
                serde_json::Value::String(
                    base64::engine::general_purpose::STANDARD.encode(&doc.value),
                )
            });
            rows.push(Row {
                key: String::from_utf8_lossy(key).into_owned(),
                meta: DocMeta {
                    cas: doc.cas.0,
                    expiration: 0,
                    flags: doc.flags,
                    is_json,
                },
                doc: body,
            });
        }
        Ok(rows)
    }

    /// The KV client the rows came through (DML writes with it).
    pub fn client(&self) -> &ClusterClient {
        &self.client
    }
}
