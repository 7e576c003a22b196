//! Running a statement: SELECT (and EXPLAIN of one) through the planner, the index, KV and
//! the row pipeline; the index DDL is in `ddl`.
//!
//! A SELECT on a bucket:
//! 1. the planner picks USE KEYS, a secondary index's spans, or the primary index (else
//!    error 4000), among the bucket's online indexes;
//! 2. with `request_plus` the scan first waits until the index has applied every active
//!    vbucket up to its current high visible seqno (`at_plus`: up to the tokens' seqnos);
//! 3. the index is scanned a page at a time, and each page's documents are fetched through
//!    KV (a document deleted since its entry was read is skipped), unless the index covers
//!    the statement (`sluice_query::covering`): then the rows are built from the entries;
//! 4. every document goes through the pipeline, which applies the whole WHERE again (the
//!    spans may hold more than the matches), then grouping, projection, ORDER BY, LIMIT.
//!    Without grouping, and without ORDER BY or with the index giving its order
//!    (`access_is_ordered`), the scan stops as soon as OFFSET + LIMIT rows are out.

use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::rbac::Privilege;
use sluice_index::{IndexDef, IndexId, IndexState};
use sluice_query::ast::Select;
use sluice_query::prepared::{PlanStamp, Prepared};
use sluice_query::{
    access_is_ordered, covering, plan_access, Access, AccessPlanner, Compiled, Flow, IndexInfo,
    Limits, Pipeline, Statement,
};
use sluice_types::CollectionId;
use tokio::time::Instant;

use super::copies::HolderStates;
use super::error::ServiceError;
use super::keyspace::{resolve, Keyspace, Target};
use super::prepare::Resolved;
use super::sink::Sink;
use super::{system_indexes, Authenticated, QueryService};
use crate::bucket_handle::BucketHandle;
use crate::index_service::listing::Holder;
use sluice_query::request::QueryRequest;

/// A keyspace's indexes as the cluster's catalog lists them, with this node's copies and
/// the other holders, and as the planner takes them.
pub(super) struct Catalog {
    /// The index store's generation and the catalog listing's, when read.
    generation: (u64, u64),
    /// The collection the indexes were read for (see [`QueryService::indexes`]).
    cid: CollectionId,
    /// Each index; its id and state are this node's copy's, if it holds one.
    pub defs: Vec<IndexDef>,
    /// Each index's holders other than this node (in the order of `defs`).
    pub copies: Vec<Vec<Holder>>,
    pub infos: Arc<[IndexInfo]>,
}

impl Catalog {
    /// Which indexes these are, for a prepared statement's kept planner: the same stamp is
    /// the same indexes, with the same states.
    fn stamp(&self) -> PlanStamp {
        PlanStamp([self.generation.0, self.generation.1, u64::from(self.cid.0)])
    }
}

/// What a SELECT reads, found and checked.
enum Source {
    SystemIndexes,
    SystemPrepareds,
    /// A collection that exists: its bucket and id.
    Collection(Keyspace, Arc<BucketHandle>, CollectionId),
}

/// What a statement gives back.
#[derive(Debug, Default)]
pub struct Outcome {
    pub results: Vec<serde_json::Value>,
    pub mutations: u64,
}

impl Outcome {
    /// Results of a statement that changed nothing.
    fn read(results: Vec<serde_json::Value>) -> Outcome {
        Outcome {
            results,
            mutations: 0,
        }
    }
}

/// A request without `timeout` gets this long (what the SDKs send by default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(75);
/// The longest `timeout` a request gets, whatever it asks.
pub const TIMEOUT_MAX: Duration = Duration::from_secs(600);

impl QueryService {
    /// Parses and runs `req`'s statement as `who`, within its timeout.
    /// Results go to `sink` (a SELECT's as its pages are read); the mutation count is
    /// returned.
    pub async fn execute(
        &self,
        who: &Authenticated,
        req: &QueryRequest,
        sink: &mut Sink,
    ) -> Result<u64, ServiceError> {
        // The statement: the request's text, or one prepared before that it names.
        let (parsed, named);
        let (stmt, mut origin): (&Statement, Option<&Prepared>) = if req.statement.trim().is_empty()
        {
            named = self.named(req)?;
            (&named.statement, Some(&named))
        } else {
            parsed = sluice_query::parse(&req.statement)?;
            (&parsed, None)
        };
        // A PREPARE or an EXECUTE stands for the statement it prepares or names.
        let (prepared, with_params);
        let (stmt, req) = match self.resolve(who, stmt, req, sink)? {
            Resolved::Run => (stmt, req),
            Resolved::Answered(row) => {
                sink.push(&row);
                return Ok(0);
            }
            Resolved::Prepared {
                prepared: p,
                params,
            } => {
                prepared = p;
                origin = Some(&prepared);
                let req = match params {
                    Some(params) => {
                        with_params = QueryRequest {
                            params,
                            ..req.clone()
                        };
                        &with_params
                    }
                    None => req,
                };
                (&prepared.statement, req)
            }
        };
        let timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT).min(TIMEOUT_MAX);
        let deadline = Instant::now() + timeout;
        let run = async {
            let _servicer = self
                .servicers
                .acquire()
                .await
                .map_err(|_| ServiceError::Cancelled)?;
            let mut outcome = self.run(who, stmt, origin, req, deadline, sink).await?;
            sink.extend(&mut outcome.results).await?;
            Ok(outcome.mutations)
        };
        match tokio::time::timeout_at(deadline, run).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ServiceError::Timeout(format!("{timeout:?}"))),
        }
    }

    /// Runs `stmt`, which is `prepared`'s statement if it was prepared.
    async fn run(
        &self,
        who: &Authenticated,
        stmt: &Statement,
        prepared: Option<&Prepared>,
        req: &QueryRequest,
        deadline: Instant,
        sink: &mut Sink,
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
            Statement::Select(s) => self.select(who, s, prepared, req, deadline, sink).await,
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
            Statement::Insert(i) => self.insert(who, i, req).await,
            Statement::Update(u) => self.update(who, u, req, deadline).await,
            Statement::Delete(d) => self.delete(who, d, req, deadline).await,
            // The parser nests neither in a prepared statement; `execute` resolved the
            // request's own.
            Statement::Prepare(_) | Statement::Execute(_) => Err(ServiceError::NotSupported(
                "a prepared statement cannot prepare or execute another".into(),
            )),
        }
    }

    /// What a SELECT reads (checked: it exists and the caller may read it), or `None`
    /// without FROM.
    fn read_target(
        &self,
        who: &Authenticated,
        s: &Select,
        req: &QueryRequest,
    ) -> Result<Option<Source>, ServiceError> {
        let Some(from) = &s.from else {
            return Ok(None);
        };
        let source = match resolve(&from.keyspace, req.query_context.as_deref())? {
            Target::SystemIndexes => Source::SystemIndexes,
            Target::SystemPrepareds => {
                if !who.allows(Privilege::ClusterRead) {
                    return Err(ServiceError::NotAllowed {
                        what: "SELECT",
                        keyspace: "system:prepareds".into(),
                        role: "query_system_catalog",
                    });
                }
                Source::SystemPrepareds
            }
            Target::Keyspace(ks) => {
                let b = &ks.bucket;
                Self::check(who, Privilege::Read(b), b, "SELECT", "query_select")?;
                let (bucket, cid) = self.collection(&ks)?;
                Source::Collection(ks, bucket, cid)
            }
        };
        Ok(Some(source))
    }

    /// The indexes of `ks` (collection `cid`) as the cluster's catalog lists them, each with
    /// this node's copy (its id and state) if it holds one, and the other holders: the
    /// catalog kept from an earlier statement while neither the catalog nor the index
    /// store's definitions have moved since (reading and cloning every definition for each
    /// statement was 1% of a point lookup's time), else read afresh. An index defined on an
    /// earlier collection of the same name (dropped since) is not one of them.
    pub(super) fn indexes(&self, ks: &Keyspace, cid: CollectionId) -> Arc<Catalog> {
        let store = &self.node.index.store;
        let generation = store.generation();
        let listing = self.node.index.listing();
        if let Some(c) = self.catalogs.lock().get(ks) {
            if c.generation == (generation, listing.generation) && c.cid == cid {
                return c.clone();
            }
        }
        let held: Vec<IndexDef> = self
            .node
            .index
            .definitions_of(&ks.bucket)
            .into_iter()
            .filter(|d| ks.holds(d) && d.collection_id == cid)
            .collect();
        let mut defs = Vec::new();
        let mut copies = Vec::new();
        if listing.generation == 0 {
            // The catalog has not reached this node yet (it is starting): its own copies.
            for d in &held {
                defs.push(d.clone());
                copies.push(Vec::new());
            }
        }
        for listed in listing
            .buckets
            .get(&ks.bucket)
            .into_iter()
            .flat_map(|b| b.values())
        {
            let Ok(mut def) = IndexDef::from_json(listed.definition.as_bytes()) else {
                continue;
            };
            if !(ks.holds(&def) && def.collection_id == cid) {
                continue;
            }
            let own = listed.own_copy(listing.this, &held, &def);
            // Without a copy here the state is the catalog's: deferred, or built as far as
            // this node knows (DDL returned once every copy was online).
            (def.id, def.state) = match own {
                Some(h) => (h.id, h.state),
                None if listed.deferred => (IndexId(0), IndexState::Deferred),
                None => (IndexId(0), IndexState::Building),
            };
            copies.push(listed.others(listing.this));
            defs.push(def);
        }
        let infos: Arc<[IndexInfo]> = defs
            .iter()
            .zip(&copies)
            .map(|(d, others)| IndexInfo {
                name: d.name.clone(),
                keys: d.keys.clone(),
                condition: d.condition.clone(),
                primary: d.primary,
                online: d.state == IndexState::Online
                    || (d.state != IndexState::Deferred && !others.is_empty()),
            })
            .collect();
        let catalog = Arc::new(Catalog {
            generation: (generation, listing.generation),
            cid,
            defs,
            copies,
            infos,
        });
        let mut catalogs = self.catalogs.lock();
        // Entries of keyspaces that exist (the callers checked this one): deleted buckets'
        // and collections' entries go whenever one is added, so the map stays as small as
        // the cluster's list of collections.
        catalogs.retain(|k, _| self.collection(k).is_ok());
        catalogs.insert(ks.clone(), catalog.clone());
        catalog
    }

    /// Every index of the buckets `who` has a role on, as the catalog lists them, with a
    /// state: this node's copy's if it holds one, else the most advanced of its holders'
    /// (each holder asked once; `offline` if none answers).
    async fn catalog_states(&self, who: &Authenticated) -> Vec<(IndexDef, &'static str)> {
        let listing = self.node.index.listing();
        let mut asked = HolderStates::default();
        let mut out = Vec::new();
        for (bucket, indexes) in &listing.buckets {
            if !who.allows(Privilege::AnyOfBucket(bucket)) {
                continue;
            }
            let held = self.node.index.definitions_of(bucket);
            for (key, listed) in indexes {
                let Ok(def) = IndexDef::from_json(listed.definition.as_bytes()) else {
                    continue;
                };
                if let Some(h) = listed.own_copy(listing.this, &held, &def) {
                    out.push((def, h.state.as_str()));
                    continue;
                }
                // 0: no holder answered; then deferred, building, online.
                let mut best = 0;
                for holder in listed.others(listing.this) {
                    let state = asked.state(self, &holder.admin, bucket, key).await;
                    let rank = match state.flatten() {
                        Some("online") => 3,
                        Some("building") => 2,
                        Some(_) => 1,
                        None => 0,
                    };
                    best = best.max(rank);
                }
                let state = match best {
                    3 => "online",
                    2 => "building",
                    1 => "deferred",
                    _ if listed.deferred => "deferred",
                    _ => "offline",
                };
                out.push((def, state));
            }
        }
        out
    }

    pub(super) fn explain(
        &self,
        who: &Authenticated,
        s: &Select,
        req: &QueryRequest,
    ) -> Result<Outcome, ServiceError> {
        let (access, ordered, cover) = match self.read_target(who, s, req)? {
            Some(Source::Collection(ks, _, cid)) => {
                let infos = &self.indexes(&ks, cid).infos;
                let access = plan_access(s, infos, &req.params)?;
                let ordered = access_is_ordered(s, &access, infos);
                let cover = covering(s, &access, infos);
                (access, ordered, cover)
            }
            _ => (Access::None, false, None),
        };
        Ok(Outcome::read(vec![sluice_query::explain(
            s,
            &access,
            ordered,
            cover.as_ref(),
        )]))
    }

    /// Runs SELECT `s`. A prepared one (`prepared`) compiles once and keeps its access
    /// planner while its keyspace's indexes stay the same: a run only evaluates its
    /// parameters.
    async fn select(
        &self,
        who: &Authenticated,
        s: &Select,
        prepared: Option<&Prepared>,
        req: &QueryRequest,
        deadline: Instant,
        sink: &mut Sink,
    ) -> Result<Outcome, ServiceError> {
        let limits = Limits::default();
        let compiled = match prepared {
            Some(p) => p.compiled(s)?,
            None => Compiled::new(s)?,
        };
        let mut pipeline = Pipeline::compiled(&compiled, &req.params, limits)?;
        let mut results = Vec::new();
        let (ks, bucket, cid) = match self.read_target(who, s, req)? {
            Some(Source::Collection(ks, bucket, cid)) => (ks, bucket, cid),
            Some(Source::SystemPrepareds) => {
                for row in self.prepared_rows() {
                    if pipeline.push(&row, &mut results)? == Flow::Done {
                        break;
                    }
                }
                pipeline.finish(&mut results)?;
                return Ok(Outcome::read(results));
            }
            Some(Source::SystemIndexes) => {
                // system:indexes: the indexes of the buckets the caller has a role on.
                let datastore = format!(
                    "http://{}:{}",
                    self.node.config.advertise_host,
                    self.node.admin_port()
                );
                for (def, state) in self.catalog_states(who).await {
                    let row = system_indexes::row(&def, state, &datastore);
                    if pipeline.push(&row, &mut results)? == Flow::Done {
                        break;
                    }
                }
                pipeline.finish(&mut results)?;
                return Ok(Outcome::read(results));
            }
            None => {
                pipeline.finish(&mut results)?;
                return Ok(Outcome::read(results));
            }
        };
        let catalog = self.indexes(&ks, cid);
        let planner = match prepared {
            Some(p) => p.access_planner(s, catalog.stamp(), || catalog.infos.clone()),
            None => Arc::new(AccessPlanner::new(s, catalog.infos.clone())),
        };
        let access = planner.choose(s, &req.params)?;
        if access_is_ordered(s, &access, &catalog.infos) {
            pipeline.rows_in_order();
        }
        let cover = planner.cover(s, &access);
        let mut rows = self
            .rows((bucket, cid), access, cover, &catalog, req, deadline)
            .await?;
        'pages: while let Some(page) = rows.next_page(pipeline.wanted()).await? {
            for row in &page {
                if pipeline.push(row, &mut results)? == Flow::Done {
                    break 'pages;
                }
            }
            // What the pipeline let out (no ORDER BY or grouping) streams now.
            sink.extend(&mut results).await?;
        }
        pipeline.finish(&mut results)?;
        Ok(Outcome::read(results))
    }
}
