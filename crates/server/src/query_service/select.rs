//! Running a statement: SELECT (and EXPLAIN of one) through the planner, the index, KV and
//! the row pipeline; the index DDL is in `ddl`.
//!
//! A SELECT on a bucket:
//! 1. the planner picks USE KEYS, a secondary index's spans, or the primary index (else
//!    error 4000), among the bucket's online indexes;
//! 2. with `request_plus` the scan first waits until the index has applied every active
//!    vbucket up to its current high visible seqno (`at_plus`: up to the tokens' seqnos);
//! 3. the index is scanned a page at a time, and each page's documents are fetched through
//!    KV (a document deleted since its entry was read is skipped);
//! 4. every document goes through the pipeline, which applies the whole WHERE again (the
//!    spans may hold more than the matches), then grouping, projection, ORDER BY, LIMIT.
//!    Without ORDER BY or grouping, the scan stops as soon as LIMIT is met.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use sluice_cluster::rbac::Privilege;
use sluice_index::{IndexDef, IndexState};
use sluice_query::ast::Select;
use sluice_query::{
    plan_access, Access, DocMeta, Flow, IndexInfo, Limits, Pipeline, Row, Statement,
};
use sluice_types::{Seqno, VbId, VbState};
use tokio::time::Instant;

use super::error::ServiceError;
use super::keyspace::{resolve, Target};
use super::request::{Consistency, QueryRequest};
use super::{system_indexes, Authenticated, QueryService};

/// What a statement gives back.
#[derive(Debug, Default)]
pub struct Outcome {
    pub results: Vec<serde_json::Value>,
    pub mutations: u64,
}

/// A request without `timeout` gets this long (what the SDKs send by default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(75);
/// The longest `timeout` a request gets, whatever it asks.
pub const TIMEOUT_MAX: Duration = Duration::from_secs(600);
/// Entries read from the index per page; their documents are fetched as one batch.
const PAGE_ENTRIES: usize = 256;

impl QueryService {
    /// Parses and runs `req`'s statement as `who`, within its timeout.
    pub async fn execute(
        &self,
        who: &Authenticated,
        req: &QueryRequest,
    ) -> Result<Outcome, ServiceError> {
        let stmt = sluice_query::parse(&req.statement)?;
        let timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT).min(TIMEOUT_MAX);
        let deadline = Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.run(who, &stmt, req, deadline)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ServiceError::Timeout(format!("{timeout:?}"))),
        }
    }

    async fn run(
        &self,
        who: &Authenticated,
        stmt: &Statement,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<Outcome, ServiceError> {
        let qc = req.query_context.as_deref();
        let readonly = matches!(stmt, Statement::Select(_) | Statement::Explain(_));
        if req.readonly && !readonly {
            return Err(ServiceError::NotReadonly(
                "only SELECT and EXPLAIN run readonly",
            ));
        }
        let none = Ok(Outcome::default());
        match stmt {
            Statement::Select(s) => self.select(who, s, req, deadline).await,
            Statement::Explain(inner) => match inner.as_ref() {
                Statement::Select(s) => self.explain(who, s, req),
                _ => Err(ServiceError::NotSupported(
                    "EXPLAIN is built for SELECT statements only".into(),
                )),
            },
            Statement::CreateIndex(c) => self.create_index(who, c, qc, deadline).await.and(none),
            Statement::CreatePrimaryIndex(c) => self
                .create_primary_index(who, c, qc, deadline)
                .await
                .and(none),
            Statement::DropIndex(d) => self.drop_index(who, d, qc).await.and(none),
            Statement::DropPrimaryIndex(d) => self.drop_primary_index(who, d, qc).await.and(none),
            Statement::BuildIndex(b) => self.build_indexes(who, b, qc).await.and(none),
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                Err(ServiceError::NotSupported(
                    "INSERT, UPSERT, UPDATE and DELETE are not built in Sluice's query service \
                     yet: write through the KV API"
                        .into(),
                ))
            }
        }
    }

    /// The bucket a SELECT reads (checked: it exists and the caller may read it), or
    /// `None` for `system:indexes`.
    fn read_target(
        &self,
        who: &Authenticated,
        s: &Select,
        req: &QueryRequest,
    ) -> Result<Option<String>, ServiceError> {
        let Some(from) = &s.from else {
            return Ok(None);
        };
        match resolve(&from.keyspace, req.query_context.as_deref())? {
            Target::SystemIndexes => Ok(None),
            Target::Bucket(b) => {
                Self::check(who, Privilege::Read(&b), &b, "SELECT", "query_select")?;
                self.bucket_exists(&b)?;
                Ok(Some(b))
            }
        }
    }

    fn indexes(&self, bucket: &str) -> (Vec<IndexDef>, Vec<IndexInfo>) {
        let defs = self.node.index.definitions_of(bucket);
        let infos = defs
            .iter()
            .filter(|d| d.scope == "_default" && d.collection == "_default")
            .map(|d| IndexInfo {
                name: d.name.clone(),
                keys: d.keys.clone(),
                condition: d.condition.clone(),
                primary: d.primary,
                online: d.state == IndexState::Online,
            })
            .collect();
        (defs, infos)
    }

    fn explain(
        &self,
        who: &Authenticated,
        s: &Select,
        req: &QueryRequest,
    ) -> Result<Outcome, ServiceError> {
        let access = match self.read_target(who, s, req)? {
            Some(bucket) => plan_access(s, &self.indexes(&bucket).1, &req.params)?,
            None => Access::None,
        };
        Ok(Outcome {
            results: vec![sluice_query::explain(s, &access)],
            mutations: 0,
        })
    }

    async fn select(
        &self,
        who: &Authenticated,
        s: &Select,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<Outcome, ServiceError> {
        let limits = Limits::default();
        let mut pipeline = Pipeline::new(s, &req.params, limits)?;
        let mut results = Vec::new();
        let bucket = match (self.read_target(who, s, req)?, &s.from) {
            (Some(b), _) => b,
            (None, Some(_)) => {
                // system:indexes: the indexes of the buckets the caller has a role on.
                let datastore = format!(
                    "http://{}:{}",
                    self.node.config.advertise_host,
                    self.node.admin_port()
                );
                for def in self.node.index.store.definitions() {
                    if !who.allows(Privilege::AnyOfBucket(&def.bucket)) {
                        continue;
                    }
                    let row = system_indexes::row(&def, &datastore);
                    if pipeline.push(&row, &mut results)? == Flow::Done {
                        break;
                    }
                }
                pipeline.finish(&mut results)?;
                return Ok(Outcome {
                    results,
                    mutations: 0,
                });
            }
            (None, None) => {
                pipeline.finish(&mut results)?;
                return Ok(Outcome {
                    results,
                    mutations: 0,
                });
            }
        };
        let (defs, infos) = self.indexes(&bucket);
        let access = plan_access(s, &infos, &req.params)?;
        let client = self.client(&bucket).await?;
        match access {
            Access::None => {}
            Access::KeyLookup { keys } => {
                for chunk in keys.chunks(PAGE_ENTRIES) {
                    let keys: Vec<Vec<u8>> = chunk.iter().map(|k| k.as_bytes().to_vec()).collect();
                    if self
                        .feed(&client, &keys, &mut pipeline, &mut results)
                        .await?
                        == Flow::Done
                    {
                        break;
                    }
                }
            }
            Access::IndexScan { index, spans, .. } | Access::PrimaryScan { index, spans, .. } => {
                let def = defs
                    .iter()
                    .find(|d| d.name == index)
                    .ok_or_else(|| ServiceError::IndexNotFound(index.clone()))?;
                self.wait_consistent(def, &bucket, req, deadline).await?;
                'spans: for span in spans {
                    let mut start = span.start;
                    loop {
                        let store = self.node.index.store.clone();
                        let (id, end) = (def.id, span.end.clone());
                        let page = tokio::task::spawn_blocking(move || {
                            store.scan(id, &start, &end, PAGE_ENTRIES)
                        })
                        .await
                        .map_err(|e| ServiceError::Fetch(e.to_string()))??;
                        let keys: Vec<Vec<u8>> =
                            page.entries.into_iter().map(|e| e.doc_key).collect();
                        if self
                            .feed(&client, &keys, &mut pipeline, &mut results)
                            .await?
                            == Flow::Done
                        {
                            break 'spans;
                        }
                        match page.resume {
                            Some(next) => start = next,
                            None => break,
                        }
                    }
                }
            }
        }
        pipeline.finish(&mut results)?;
        Ok(Outcome {
            results,
            mutations: 0,
        })
    }

    /// Fetches `keys` through KV and pushes the documents that exist into the pipeline.
    async fn feed(
        &self,
        client: &sluice_client::ClusterClient,
        keys: &[Vec<u8>],
        pipeline: &mut Pipeline<'_>,
        results: &mut Vec<serde_json::Value>,
    ) -> Result<Flow, ServiceError> {
        if keys.is_empty() {
            return Ok(Flow::More);
        }
        let docs = client.get_many(keys).await;
        for (key, doc) in keys.iter().zip(docs) {
            let doc = match doc {
                Ok(d) => d,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(ServiceError::Fetch(e.to_string())),
            };
            let is_json = doc.datatype & sluice_types::Datatype::JSON != 0;
            let body = if is_json {
                serde_json::from_slice(&doc.value).ok()
            } else {
                None
            };
            let is_json = body.is_some();
            let body = body.unwrap_or_else(|| {
                serde_json::Value::String(
                    base64::engine::general_purpose::STANDARD.encode(&doc.value),
                )
            });
            let row = Row {
                key: String::from_utf8_lossy(key).into_owned(),
                meta: DocMeta {
                    cas: doc.cas.0,
                    expiration: 0,
                    flags: doc.flags,
                    is_json,
                },
                doc: body,
            };
            if pipeline.push(&row, results)? == Flow::Done {
                return Ok(Flow::Done);
            }
        }
        Ok(Flow::More)
    }

    /// Waits until `def` holds what the request's consistency asks for.
    async fn wait_consistent(
        &self,
        def: &IndexDef,
        bucket: &str,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        let targets: BTreeMap<VbId, Seqno> = match &req.consistency {
            Consistency::NotBounded => return Ok(()),
            Consistency::RequestPlus => {
                let b =
                    self.node.buckets.get(bucket).ok_or_else(|| {
                        ServiceError::KeyspaceNotFound(format!("default:{bucket}"))
                    })?;
                b.engine
                    .vb_visible_seqnos(Some(VbState::Active))
                    .into_iter()
                    .collect()
            }
            Consistency::AtPlus(vectors) => vectors
                .get(bucket)
                .or_else(|| vectors.get(""))
                .map(|v| v.iter().map(|(vb, t)| (*vb, t.seqno)).collect())
                .unwrap_or_default(),
        };
        let mut wait = deadline.saturating_duration_since(Instant::now());
        if let Some(scan_wait) = req.scan_wait {
            wait = wait.min(scan_wait);
        }
        match self.node.index.wait_for(def.id, &targets, wait).await {
            Ok(()) => Ok(()),
            Err(super::super::index_service::WaitError::Timeout) => {
                Err(ServiceError::ScanWait(def.name.clone()))
            }
            Err(super::super::index_service::WaitError::Index(e)) => Err(e.into()),
        }
    }
}
