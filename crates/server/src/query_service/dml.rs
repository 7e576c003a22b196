//! INSERT, UPSERT, UPDATE and DELETE, applied through the KV path like any client's
//! writes (so they reach the replicas, the disk and the indexes by DCP).
//!
//! - INSERT and UPSERT evaluate each `(key, value)` pair and add (fails on an existing
//!   key: Couchbase's 12009 "Duplicate Key") or set the document. Every pair is tried; the
//!   first failure is reported.
//! - UPDATE and DELETE find their documents as a SELECT would (USE KEYS, an index, or the
//!   primary index, with the request's consistency), apply the WHERE to each fetched
//!   document, and write it back (or delete it) with the CAS it was read with: a document
//!   changed in between is reported, not overwritten. A document is changed at most once
//!   per statement, even if its new version is met again later in the scan.
//! - RETURNING projects the written documents (the deleted ones for DELETE).
//! - At most [`DML_DOCS_MAX`] documents per statement; beyond that, LIMIT splits the work.

use std::collections::HashSet;
use std::sync::Arc;

use sluice_client::{ClusterClient, StoreOptions};
use sluice_cluster::rbac::Privilege;
use sluice_query::ast::{
    Delete, Expr, FromTerm, Ident, Insert, InsertVerb, KeyspaceRef, Projection, ResultTerm, Select,
    Update,
};
use sluice_query::{evaluate, evaluate_row, plan_access, DocMeta, Limits, Pipeline, Row, Value};
use sluice_types::{Cas, CollectionId};
use tokio::time::Instant;

use super::error::ServiceError;
use super::json_path::{path_of, set, unset};
use super::keyspace::{resolve, Keyspace, Target};
use super::select::Outcome;
use super::{Authenticated, QueryService};
use crate::bucket_handle::BucketHandle;
use sluice_query::request::QueryRequest;

/// Most documents one statement writes.
pub const DML_DOCS_MAX: usize = 100_000;

/// The flags a JSON document carries (the SDKs' common flags for JSON), so an SDK reading
/// what a statement wrote decodes it as JSON.
const JSON_FLAGS: u32 = 0x0200_0000;

/// What UPDATE or DELETE does to each matching document.
enum Change<'a> {
    Update(&'a Update),
    Delete,
}

impl QueryService {
    /// The keyspace a DML statement writes, checked: the caller may write it (and read
    /// it, for UPDATE and DELETE), and it exists; with its bucket and collection id.
    fn dml_target(
        &self,
        who: &Authenticated,
        ks: &KeyspaceRef,
        req: &QueryRequest,
        read_too: bool,
    ) -> Result<(Keyspace, Arc<BucketHandle>, CollectionId), ServiceError> {
        let ks = match resolve(ks, req.query_context.as_deref())? {
            Target::Keyspace(ks) => ks,
            Target::SystemIndexes | Target::SystemPrepareds => {
                return Err(ServiceError::NotSupported(
                    "system keyspaces cannot be written".into(),
                ))
            }
        };
        let bucket = &ks.bucket;
        Self::check(who, Privilege::Write(bucket), bucket, "DML", "query_update")?;
        if read_too {
            Self::check(who, Privilege::Read(bucket), bucket, "DML", "query_select")?;
        }
        let (handle, cid) = self.collection(&ks)?;
        Ok((ks, handle, cid))
    }

    pub(super) async fn insert(
        &self,
        who: &Authenticated,
        ins: &Insert,
        req: &QueryRequest,
    ) -> Result<Outcome, ServiceError> {
        let (_, bucket, cid) = self.dml_target(who, &ins.keyspace, req, false)?;
        let client = self.client(&bucket.name).await?.in_collection(cid);
        let mut written = Vec::new();
        let mut first_error = None;
        for kv in &ins.values {
            let key = match evaluate(&kv.key, &req.params)? {
                Value::Json(serde_json::Value::String(k)) => k,
                other => {
                    first_error.get_or_insert(ServiceError::Dml {
                        key: format!("{other:?}"),
                        why: "a document key must be a string".into(),
                    });
                    continue;
                }
            };
            let Some(value) = evaluate(&kv.value, &req.params)?.into_json() else {
                first_error.get_or_insert(ServiceError::Dml {
                    key,
                    why: "the value is MISSING".into(),
                });
                continue;
            };
            let bytes = serde_json::to_vec(&value).map_err(|e| ServiceError::Dml {
                key: key.clone(),
                why: e.to_string(),
            })?;
            let opts = StoreOptions {
                flags: JSON_FLAGS,
                ..StoreOptions::default()
            };
            let done = match ins.verb {
                InsertVerb::Insert => client.add(key.as_bytes(), &bytes, opts).await,
                InsertVerb::Upsert => client.set(key.as_bytes(), &bytes, opts).await,
            };
            match done {
                Ok(m) => written.push(row(key, value, m.cas)),
                Err(e) if e.status() == Some(sluice_proto::Status::KeyEexists) => {
                    first_error.get_or_insert(ServiceError::Dml {
                        why: format!("Duplicate Key: {key}"),
                        key,
                    });
                }
                Err(e) => {
                    first_error.get_or_insert(ServiceError::Dml {
                        key,
                        why: e.to_string(),
                    });
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let alias = ins
            .alias
            .clone()
            .unwrap_or_else(|| ins.keyspace.default_alias().clone());
        returning(&ins.returning, &ins.keyspace, alias, &written, req)
    }

    pub(super) async fn update(
        &self,
        who: &Authenticated,
        u: &Update,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<Outcome, ServiceError> {
        let select = finder(&u.keyspace, &u.alias, &u.use_keys, &u.filter);
        self.change_each(
            who,
            &select,
            &u.limit,
            Change::Update(u),
            &u.returning,
            req,
            deadline,
        )
        .await
    }

    pub(super) async fn delete(
        &self,
        who: &Authenticated,
        d: &Delete,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<Outcome, ServiceError> {
        let select = finder(&d.keyspace, &d.alias, &d.use_keys, &d.filter);
        self.change_each(
            who,
            &select,
            &d.limit,
            Change::Delete,
            &d.returning,
            req,
            deadline,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn change_each(
        &self,
        who: &Authenticated,
        select: &Select,
        limit: &Option<Expr>,
        change: Change<'_>,
        returning_terms: &Option<Projection>,
        req: &QueryRequest,
        deadline: Instant,
    ) -> Result<Outcome, ServiceError> {
        let from = select.from.as_ref().expect("a finder has a FROM");
        let (ks, bucket, cid) = self.dml_target(who, &from.keyspace, req, true)?;
        let alias = from.alias().clone();
        let limit = match limit {
            Some(e) => match evaluate(e, &req.params)?
                .as_number()
                .and_then(|n| n.as_whole())
            {
                Some(n) if n >= 0 => Some(n as usize),
                _ => {
                    return Err(ServiceError::Query(sluice_query::QueryError::Evaluation {
                        message: "LIMIT must be a non-negative integer".into(),
                    }))
                }
            },
            None => None,
        };
        let catalog = self.indexes(&ks, cid);
        let access = plan_access(select, &catalog.infos, &req.params)?;
        // A write needs each document whole (and its CAS): never covered.
        let mut rows = self
            .rows((bucket, cid), access, None, &catalog, req, deadline)
            .await?;
        let client = rows.client().clone();
        let mut done: HashSet<String> = HashSet::new();
        let mut written = Vec::new();
        'pages: loop {
            let wanted = limit.map(|l| l.saturating_sub(done.len()) as u64);
            let Some(page) = rows.next_page(wanted).await? else {
                break;
            };
            for r in page {
                if limit.is_some_and(|l| done.len() >= l) {
                    break 'pages;
                }
                if done.contains(&r.key) {
                    continue;
                }
                let matches = match &select.filter {
                    Some(f) => evaluate_row(f, &alias, &r, &req.params)?.truthy(),
                    None => true,
                };
                if !matches {
                    continue;
                }
                if done.len() >= DML_DOCS_MAX {
                    return Err(ServiceError::NotSupported(format!(
                        "one statement writes at most {DML_DOCS_MAX} documents: add a LIMIT"
                    )));
                }
                done.insert(r.key.clone());
                if let Some(w) = apply(&client, &change, &alias, r, req).await? {
                    written.push(w);
                }
            }
        }
        let mutations = done.len() as u64;
        let mut outcome = returning(returning_terms, &from.keyspace, alias, &written, req)?;
        outcome.mutations = mutations;
        Ok(outcome)
    }
}

/// Writes one matching document back (or deletes it); the row as written, for RETURNING,
/// or `None` if the document was gone by then.
async fn apply(
    client: &ClusterClient,
    change: &Change<'_>,
    alias: &Ident,
    r: Row,
    req: &QueryRequest,
) -> Result<Option<Row>, ServiceError> {
    let cas = Cas(r.meta.cas);
    let dml_error = |key: &str, e: sluice_client::ClusterError| ServiceError::Dml {
        key: key.to_string(),
        why: if e.status() == Some(sluice_proto::Status::KeyEexists) {
            "the document changed while the statement ran (CAS mismatch)".into()
        } else {
            e.to_string()
        },
    };
    match change {
        Change::Delete => match client.delete(r.key.as_bytes(), cas).await {
            Ok(_) => Ok(Some(r)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(dml_error(&r.key, e)),
        },
        Change::Update(u) => {
            let mut doc = r.doc.clone();
            for term in &u.set {
                let value = evaluate_row(&term.value, alias, &r, &req.params)?;
                set(&mut doc, &path_of(&term.path, alias, &req.params)?, value);
            }
            for path in &u.unset {
                unset(&mut doc, &path_of(path, alias, &req.params)?);
            }
            let bytes = serde_json::to_vec(&doc).map_err(|e| ServiceError::Dml {
                key: r.key.clone(),
                why: e.to_string(),
            })?;
            let opts = StoreOptions {
                flags: r.meta.flags,
                cas,
                ..StoreOptions::default()
            };
            match client.set(r.key.as_bytes(), &bytes, opts).await {
                Ok(m) => Ok(Some(row(r.key, doc, m.cas))),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(dml_error(&r.key, e)),
            }
        }
    }
}

/// The SELECT that finds an UPDATE's or DELETE's documents.
fn finder(
    keyspace: &KeyspaceRef,
    alias: &Option<Ident>,
    use_keys: &Option<Expr>,
    filter: &Option<Expr>,
) -> Select {
    Select {
        distinct: false,
        projection: Projection::Terms(vec![ResultTerm::Star]),
        from: Some(FromTerm {
            keyspace: keyspace.clone(),
            alias: alias.clone(),
            use_keys: use_keys.clone(),
        }),
        filter: filter.clone(),
        group_by: Vec::new(),
        having: None,
        order_by: Vec::new(),
        limit: None,
        offset: None,
    }
}

fn row(key: String, doc: serde_json::Value, cas: Cas) -> Row {
    Row {
        key,
        meta: DocMeta {
            cas: cas.0,
            expiration: 0,
            flags: JSON_FLAGS,
            is_json: true,
        },
        doc,
    }
}

/// RETURNING's projection of `rows` (no results without RETURNING).
fn returning(
    terms: &Option<Projection>,
    keyspace: &KeyspaceRef,
    alias: Ident,
    rows: &[Row],
    req: &QueryRequest,
) -> Result<Outcome, ServiceError> {
    let mut outcome = Outcome {
        results: Vec::new(),
        mutations: rows.len() as u64,
    };
    let Some(projection) = terms else {
        return Ok(outcome);
    };
    let select = Select {
        projection: projection.clone(),
        ..finder(keyspace, &Some(alias), &None, &None)
    };
    let mut pipeline = Pipeline::new(&select, &req.params, Limits::default())?;
    for r in rows {
        pipeline.push(r, &mut outcome.results)?;
    }
    pipeline.finish(&mut outcome.results)?;
    Ok(outcome)
}
