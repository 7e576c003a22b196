//! Prepared statements: which statement a request runs (its own, or one prepared before,
//! named by the request's `prepared` or by `EXECUTE`), and what `PREPARE` answers.
//!
//! `PREPARE` keeps the parsed statement in this node's cache (`sluice_query::prepared`)
//! and answers one row describing it; with `auto_execute` (what the SDKs send for
//! `adhoc = false`, once the cluster map lists `enhancedPreparedStatements`) it runs the
//! statement too and names it in the response's `prepared` field, which the SDK then sends
//! instead of the text. Each node keeps its own statements: a name another node prepared is
//! error 4040 here, on which the SDKs prepare again (Couchbase shares prepared statements
//! among its query nodes). The statement's privileges are checked each time it runs.
//! `system:prepareds` lists this node's statements with their use counts (reading it needs
//! the cluster-read privilege, as the texts may hold constants).

use std::sync::Arc;

use base64::Engine as _;

use serde_json::{json, Value as J};
use sluice_query::ast::{Execute, Expr, Prepare, Statement};
use sluice_query::prepared::Prepared;
use sluice_query::request::QueryRequest;
use sluice_query::{evaluate, Params, QueryError, Value};

use super::error::ServiceError;
use super::sink::Sink;
use super::{Authenticated, QueryService};

/// What a request runs, once its PREPARE or EXECUTE is resolved.
pub(super) enum Resolved {
    /// A statement to run as it is.
    Run,
    /// A prepared statement to run, with parameters of its own if EXECUTE ... USING gave
    /// some.
    Prepared {
        prepared: Arc<Prepared>,
        params: Option<Params>,
    },
    /// A PREPARE without `auto_execute`: its row is the whole answer.
    Answered(J),
}

impl QueryService {
    /// The prepared statement the request names in `prepared` (the request has no
    /// statement text).
    pub(super) fn named(&self, req: &QueryRequest) -> Result<Arc<Prepared>, ServiceError> {
        let name = req.prepared.as_deref().unwrap_or_default();
        let qc = req.query_context.as_deref().unwrap_or_default();
        let prepared = self.prepared.lock().get(name, qc)?;
        prepared.used();
        Ok(prepared)
    }

    /// Resolves a PREPARE or an EXECUTE; any other statement runs as it is.
    pub(super) fn resolve(
        &self,
        who: &Authenticated,
        stmt: &Statement,
        req: &QueryRequest,
        sink: &mut Sink,
    ) -> Result<Resolved, ServiceError> {
        let qc = req.query_context.as_deref().unwrap_or_default();
        match stmt {
            Statement::Prepare(p) => {
                let prepared = self.prepared.lock().prepare(p, qc)?;
                if req.auto_execute {
                    prepared.used();
                    sink.set_prepared(&prepared.name);
                    return Ok(Resolved::Prepared {
                        prepared,
                        params: None,
                    });
                }
                Ok(Resolved::Answered(
                    self.prepare_row(who, p, &prepared, req)?,
                ))
            }
            Statement::Execute(Execute { name, using }) => {
                let prepared = self.prepared.lock().get(name, qc)?;
                prepared.used();
                let params = using
                    .as_ref()
                    .map(|u| using_params(u, &req.params))
                    .transpose()?;
                Ok(Resolved::Prepared { prepared, params })
            }
            _ => Ok(Resolved::Run),
        }
    }

    /// The rows of `system:prepareds`: this node's prepared statements.
    pub(super) fn prepared_rows(&self) -> Vec<sluice_query::Row> {
        let node = format!(
            "{}:{}",
            self.node.config.advertise_host,
            self.node.admin_port()
        );
        let entries = self.prepared.lock().entries();
        entries
            .iter()
            .map(|p| {
                let doc = json!({
                    "name": p.name,
                    "statement": p.text,
                    "queryContext": p.query_context,
                    "uses": p.uses(),
                    "node": node,
                });
                sluice_query::Row::new(format!("[{node}]{}", p.name), doc)
            })
            .collect()
    }

    /// The row `PREPARE` answers: the statement's name and text, and for a SELECT the
    /// plan it would run now.
    fn prepare_row(
        &self,
        who: &Authenticated,
        p: &Prepare,
        prepared: &Prepared,
        req: &QueryRequest,
    ) -> Result<J, ServiceError> {
        let mut row = json!({
            "name": prepared.name,
            "text": Statement::Prepare(p.clone()).to_string(),
            "statement": prepared.text,
            "namespace": "default",
            "queryContext": prepared.query_context,
            "signature": {"*": "*"},
            // What SDKs without enhanced prepared statements send back beside the name;
            // the service goes by the name alone, as Couchbase's has since 6.5.
            "encoded_plan": base64::engine::general_purpose::STANDARD.encode(&prepared.text),
        });
        // The plan it would run now, when it can be planned without its parameters (a
        // span built from a parameter cannot): it is planned again at every run anyway.
        if let Statement::Select(s) = &prepared.statement {
            let explained = self.explain(who, s, req).map(|o| o.results);
            let plan = explained.ok().and_then(|r| r.into_iter().next());
            if let Some(plan) = plan.and_then(|e| e.get("plan").cloned()) {
                row["operator"] = plan;
            }
        }
        Ok(row)
    }
}

/// `EXECUTE … USING`: an array binds positional parameters, an object named ones (`$x`
/// or `x`); it must be constant.
fn using_params(using: &Expr, outer: &Params) -> Result<Params, ServiceError> {
    let bad = |what: &str| {
        ServiceError::Query(QueryError::InvalidValue {
            clause: "USING",
            value: what.to_owned(),
        })
    };
    match evaluate(using, outer)? {
        Value::Json(J::Array(values)) => Ok(Params::new().with_positional(values)),
        Value::Json(J::Object(fields)) => Ok(fields
            .into_iter()
            .fold(Params::new(), |p, (k, v)| p.with_named(&k, v))),
        Value::Json(other) => Err(bad(&other.to_string())),
        Value::Missing => Err(bad("MISSING")),
    }
}
