//! Sluice as a `bench query` system: its own single-node `sluice server` (a couchbase
//! bucket), loaded over KV, indexed through the query service; query clients over HTTP, and
//! KV connections for the writers and the freshness prober.

use serde_json::json;
use sluice_client::Client;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::error::BenchError;
use crate::load::connect::connect_all;
use crate::scenarios::kv::args::BucketTypeArg;
use crate::scenarios::kv::targets::{start_sluice, ServerSpec, Target};
use crate::scenarios::query::args::QueryArgs;
use crate::scenarios::query::closed_loop::{Query, QueryClient, QUERY_TIMEOUT, RANGE_ROWS};
use crate::scenarios::query::docs::{DocSet, Revision};
use crate::scenarios::query::kv_sets::set_all;
use crate::scenarios::query::n1ql::{N1qlConn, N1qlError};
use crate::scenarios::query::writer::BatchWriter;

/// Connections of the load.
const LOAD_CONNECTIONS: u32 = 8;
/// `CREATE INDEX` answers once the index is online; a large build may take a while.
const DDL_TIMEOUT: Duration = Duration::from_secs(600);

pub const POINT: &str = "SELECT META().id, d.* FROM default d WHERE email = $e";
pub const RANGE: &str = "SELECT META().id, d.k FROM default d WHERE k >= $lo ORDER BY k LIMIT 100";
/// [`RANGE`] with the page's upper end in the predicate too.
pub const BOUNDED: &str =
    "SELECT META().id, d.k FROM default d WHERE k BETWEEN $lo AND $hi ORDER BY k LIMIT 100";
/// The prober's lookup: only whether the document is visible.
pub const PROBE: &str = "SELECT META().id FROM default d WHERE email = $e";
/// The query service's own deadline for the clients' queries (below [`QUERY_TIMEOUT`]).
const SERVER_TIMEOUT: &str = "25s";
pub const INDEXES: [(&str, &str); 2] = [("ix_email", "email"), ("ix_k", "k")];

/// Why the Sluice system did not start, load, index, connect or stop.
#[derive(Debug, thiserror::Error)]
pub enum SluiceSystemError {
    #[error("starting sluice server")]
    Start(#[source] BenchError),
    #[error("the started server has an admin port")]
    NoAdmin,
    /// Connecting or setting over KV, or stopping the server.
    #[error(transparent)]
    Kv(#[from] BenchError),
    /// Connecting to the query service, or asking it.
    #[error(transparent)]
    N1ql(#[from] N1qlError),
    #[error("a load connection panicked")]
    LoadTask(#[source] tokio::task::JoinError),
    #[error("CREATE INDEX {name}")]
    CreateIndex {
        name: &'static str,
        #[source]
        source: N1qlError,
    },
    /// `rows` is what `system:indexes` said of it last.
    #[error("index {name} not online after {waited:?}: {rows:?}")]
    NotOnline {
        name: String,
        waited: Duration,
        rows: Vec<serde_json::Value>,
    },
    #[error("a prober connection")]
    NoProber,
}

pub struct SluiceSide {
    target: Target,
    pub admin: SocketAddr,
    username: String,
    password: String,
}

impl SluiceSide {
    pub async fn start(args: &QueryArgs) -> Result<SluiceSide, SluiceSystemError> {
        let target = start_sluice(&ServerSpec {
            bucket: args.login.bucket.clone(),
            bucket_type: BucketTypeArg::Couchbase,
            memory_quota_mb: args.memory_quota_mb,
            index_memory_quota_mb: Some(args.index_memory_quota_mb),
            vbuckets: args.vbuckets,
            username: args.login.username.clone(),
            password: args.login.password.clone(),
            tls: false,
        })
        .await
        .map_err(SluiceSystemError::Start)?;
        let admin = target.admin.ok_or(SluiceSystemError::NoAdmin)?;
        Ok(SluiceSide {
            target,
            admin,
            username: args.login.username.clone(),
            password: args.login.password.clone(),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.target.pid()
    }

    pub async fn kv(&self, n: u32) -> Result<Vec<Client>, SluiceSystemError> {
        Ok(connect_all(self.target.addr, &self.target.options, n).await?)
    }

    pub async fn n1ql(&self, timeout: Duration) -> Result<N1qlConn, SluiceSystemError> {
        Ok(N1qlConn::connect(self.admin, &self.username, &self.password, timeout).await?)
    }

    /// Sets every base document over [`LOAD_CONNECTIONS`] pipelined connections.
    pub async fn load(
        &self,
        set: &DocSet,
        done: &std::sync::Arc<AtomicU64>,
    ) -> Result<(), SluiceSystemError> {
        let conns = self.kv(LOAD_CONNECTIONS).await?;
        let n = u64::from(LOAD_CONNECTIONS);
        let mut tasks = JoinSet::new();
        for (c, mut client) in (0u64..).zip(conns) {
            let (set, done) = (*set, done.clone());
            tasks.spawn(async move {
                let items = (c..set.len())
                    .step_by(n as usize)
                    .map(move |i| (set.key(i), set.doc(i, Revision(0))));
                set_all(&mut client, items, &done).await
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(SluiceSystemError::LoadTask)??;
        }
        Ok(())
    }

    /// `CREATE INDEX` each of [`INDEXES`], waiting until it is online; returns how long each
    /// took.
    pub async fn create_indexes(&self) -> Result<Vec<(String, Duration)>, SluiceSystemError> {
        let mut conn = self.n1ql(DDL_TIMEOUT + Duration::from_secs(10)).await?;
        let mut took = Vec::new();
        for (name, field) in INDEXES {
            let start = Instant::now();
            conn.count(&json!({
                "statement": format!("CREATE INDEX {name} ON default({field})"),
                "timeout": format!("{}s", DDL_TIMEOUT.as_secs()),
            }))
            .await
            .map_err(|source| SluiceSystemError::CreateIndex { name, source })?;
            self.wait_online(&mut conn, name).await?;
            took.push((name.to_string(), start.elapsed()));
        }
        Ok(took)
    }

    async fn wait_online(&self, conn: &mut N1qlConn, name: &str) -> Result<(), SluiceSystemError> {
        let deadline = Instant::now() + DDL_TIMEOUT;
        loop {
            let rows = conn
                .rows(&json!({
                    "statement": "SELECT state FROM system:indexes WHERE name = $n",
                    "$n": name,
                }))
                .await?;
            if rows.iter().any(|r| r["state"] == "online") {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SluiceSystemError::NotOnline {
                    name: name.to_string(),
                    waited: DDL_TIMEOUT,
                    rows,
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `n` query clients, each its own kept-alive connection; request_plus if `consistent`;
    /// statements prepared unless `adhoc`.
    pub async fn clients(
        &self,
        n: u32,
        consistent: bool,
        adhoc: bool,
    ) -> Result<Vec<SluiceQuery>, SluiceSystemError> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(SluiceQuery {
                conn: self.n1ql(QUERY_TIMEOUT).await?,
                consistent,
                adhoc,
                names: HashMap::new(),
            });
        }
        Ok(out)
    }

    /// Stops the server; its log is copied to `save_log`.
    pub async fn stop(self, save_log: &Path) -> Result<(), SluiceSystemError> {
        Ok(self.target.stop_saving_log(Some(save_log)).await?)
    }
}

/// A query client, sending statements as an SDK does with `adhoc = false` (PostgreSQL's
/// clients prepare theirs too): the first run of a statement is `PREPARE` with
/// `auto_execute`, the next ones name it (`prepared`). With `adhoc`, the text every time.
pub struct SluiceQuery {
    conn: N1qlConn,
    consistent: bool,
    adhoc: bool,
    /// Statement text → the name the service prepared it under.
    names: HashMap<&'static str, String>,
}

/// A query request's body, written as JSON without building a map first (the bench's
/// client shares the cores with the server it measures).
#[derive(serde::Serialize)]
struct Request<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    statement: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prepared: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    auto_execute: Option<bool>,
    #[serde(rename = "$e", skip_serializing_if = "Option::is_none")]
    e: Option<&'a str>,
    #[serde(rename = "$lo", skip_serializing_if = "Option::is_none")]
    lo: Option<i64>,
    #[serde(rename = "$hi", skip_serializing_if = "Option::is_none")]
    hi: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scan_consistency: Option<&'static str>,
    timeout: &'static str,
}

impl QueryClient for SluiceQuery {
    type Error = N1qlError;

    async fn run(&mut self, q: &Query) -> Result<usize, N1qlError> {
        let mut body = Request {
            statement: None,
            prepared: None,
            auto_execute: None,
            e: None,
            lo: None,
            hi: None,
            scan_consistency: self.consistent.then_some("request_plus"),
            // The server gives up a little before the client does, so a slow query ends
            // there too and its client's loop goes on (with an error) rather than ending.
            timeout: SERVER_TIMEOUT,
        };
        let statement = match q {
            Query::Point { email } => {
                body.e = Some(email);
                POINT
            }
            Query::Range { lo } => {
                body.lo = Some(*lo);
                RANGE
            }
            Query::Bounded { lo } => {
                body.lo = Some(*lo);
                body.hi = Some(lo + RANGE_ROWS as i64 - 1);
                BOUNDED
            }
        };
        let prepare;
        match (self.adhoc, self.names.get(statement)) {
            (true, _) => body.statement = Some(statement),
            (false, Some(name)) => body.prepared = Some(name),
            (false, None) => {
                prepare = format!("PREPARE {statement}");
                body.statement = Some(&prepare);
                body.auto_execute = Some(true);
            }
        }
        match self.conn.count_prepared(&body).await {
            Ok((n, prepared)) => {
                if let Some(name) = prepared {
                    self.names.insert(statement, name);
                }
                Ok(n)
            }
            Err(e) => {
                // Prepared again on the next run (a 4040: the name is unknown there).
                self.names.remove(statement);
                Err(e)
            }
        }
    }
}

/// A background writer's KV connection.
pub struct KvWriter(pub Client);

impl BatchWriter for KvWriter {
    type Error = BenchError;

    async fn write(&mut self, batch: Vec<(String, String)>) -> Result<(), BenchError> {
        let done = AtomicU64::new(0);
        set_all(&mut self.0, batch.into_iter(), &done)
            .await
            .map(|_| ())
    }
}
