//! A views column's real indexes (the seeds' views, as GSI): before the column's ladder the
//! bench defines N indexes through the query service of one node (`CREATE INDEX bench_ix_i
//! ON default(fi) WITH {"num_replica": nodes - 1}`, answered once the index is online: built
//! over the prefilled documents), a copy on every node as the seeds' views were (Couchbase
//! 3's views are each node's own), each copy fed by DCP streams of every vbucket from every
//! node. While the ladder runs a light
//! query loop sends one point query at a time against them (`SELECT META().id FROM default
//! WHERE fi = $v`, not_bounded, the indexes in turn), and each step reads the indexes'
//! `items_remaining` (STAT `index` over KV). After the column the indexes are dropped.

use serde::Serialize;
use serde_json::json;
use sluice_client::{Client, ClientError, ConnectOptions};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use crate::load::latency::Latency;
use crate::scenarios::query::n1ql::{N1qlConn, N1qlError};
use crate::scenarios::replication::values::FIELD_VALUES;

/// Why a views column's indexes could not be defined, read or dropped.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("connecting to the query service at {admin}")]
    ConnectQuery {
        admin: SocketAddr,
        #[source]
        source: N1qlError,
    },
    /// A `CREATE INDEX` or `DROP INDEX`, given in full.
    #[error("{statement}")]
    Statement {
        statement: String,
        #[source]
        source: N1qlError,
    },
    #[error("connecting to {kv} for STAT index")]
    ConnectStat {
        kv: SocketAddr,
        #[source]
        source: ClientError,
    },
    /// STAT `index` on the index node.
    #[error(transparent)]
    Stat(#[from] ClientError),
    #[error("STAT index has no numeric {key}")]
    NoStat { key: String },
}

/// `CREATE INDEX` answers once the index is online: its build over every document may take
/// minutes on a busy box. The request's own `timeout` says so to the service.
const DDL_TIMEOUT: Duration = Duration::from_secs(300);
/// One query of the loop; past it the query counts as an error (and the connection is made
/// again).
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Index `i`'s name; it indexes field `fi`.
pub fn index_name(i: usize) -> String {
    format!("bench_ix_{i}")
}

/// The `CREATE INDEX` statement of index `i`, with `replicas` copies besides the first.
pub fn create_statement(i: usize, replicas: usize) -> String {
    let with = match replicas {
        0 => String::new(),
        n => format!(" WITH {{\"num_replica\": {n}}}"),
    };
    format!("CREATE INDEX {} ON default(f{i}){with}", index_name(i))
}

/// The `DROP INDEX` statement of index `i`.
pub fn drop_statement(i: usize) -> String {
    format!("DROP INDEX {} ON default", index_name(i))
}

/// The query loop's `q`-th request: a point query on index `q mod n`'s field, for a value
/// drawn from `draw`.
pub fn point_query(q: u64, n: usize, draw: u64) -> serde_json::Value {
    let field = (q % n.max(1) as u64) as usize;
    json!({
        "statement": format!("SELECT META().id FROM default WHERE f{field} = $v"),
        "$v": draw % FIELD_VALUES,
        "scan_consistency": "not_bounded",
    })
}

/// Where the indexes live: a node's query service (admin port) and its KV port (STAT).
#[derive(Debug, Clone)]
pub struct IndexNode {
    pub admin: SocketAddr,
    pub kv: SocketAddr,
    pub login: ConnectOptions,
    pub username: String,
    pub password: String,
    /// Copies of each index besides the first: the cluster's nodes but one.
    pub replicas: usize,
}

/// What a views column's indexes and its query loop did over the column's ladder.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IndexActivity {
    pub indexes: u8,
    /// The query service's admin address.
    pub node: String,
    /// How long each `CREATE INDEX` took to answer (the index online), in seconds.
    pub build_s: Vec<f64>,
    /// Entries of each index once built (STAT `index:<name>:items`, approximate).
    pub entries_built: Vec<u64>,
    /// Entries of each index at the column's end.
    pub entries_end: Vec<u64>,
    pub queries: u64,
    /// Rows the queries returned.
    pub rows: u64,
    pub query_p50_us: f64,
    pub query_p99_us: f64,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// How often a step reads the indexes' items remaining.
pub const BACKLOG_EVERY: Duration = Duration::from_millis(500);

/// The indexes' items remaining (summed over the column's indexes) over a step's measured
/// part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct IndexBacklog {
    pub readings: u64,
    pub avg: f64,
    pub max: u64,
    /// The last reading, at the step's end.
    pub end: u64,
}

impl IndexBacklog {
    pub fn of(seen: &[u64]) -> IndexBacklog {
        IndexBacklog {
            readings: seen.len() as u64,
            avg: seen.iter().sum::<u64>() as f64 / seen.len().max(1) as f64,
            max: seen.iter().copied().max().unwrap_or(0),
            end: seen.last().copied().unwrap_or(0),
        }
    }
}

/// A views column's indexes, defined and online.
pub struct Indexes {
    node: IndexNode,
    n: usize,
    /// One KV connection to the index node for STAT `index`.
    stats: Client,
    pub activity: IndexActivity,
}

impl Indexes {
    /// Defines `n` indexes on `node`, one after the other, each answered once online.
    /// Leftovers of the same names (an aborted run against `--connect`) are dropped first.
    pub async fn create(node: IndexNode, n: u8) -> Result<Indexes, IndexError> {
        let mut conn = N1qlConn::connect(
            node.admin,
            &node.username,
            &node.password,
            DDL_TIMEOUT + Duration::from_secs(10),
        )
        .await
        .map_err(|source| IndexError::ConnectQuery {
            admin: node.admin,
            source,
        })?;
        let n = usize::from(n);
        for i in 0..n {
            // Index not found (12004) is the usual answer.
            let _ = conn.count(&json!({ "statement": drop_statement(i) })).await;
        }
        let mut activity = IndexActivity {
            indexes: n as u8,
            node: node.admin.to_string(),
            ..IndexActivity::default()
        };
        for i in 0..n {
            let start = Instant::now();
            conn.count(&json!({
                "statement": create_statement(i, node.replicas),
                "timeout": format!("{}s", DDL_TIMEOUT.as_secs()),
            }))
            .await
            .map_err(|source| IndexError::Statement {
                statement: create_statement(i, node.replicas),
                source,
            })?;
            let took = start.elapsed();
            eprintln!(
                "  {} online after {:.1} s",
                index_name(i),
                took.as_secs_f64()
            );
            activity.build_s.push(took.as_secs_f64());
        }
        let stats = Client::connect(node.kv, node.login.clone())
            .await
            .map_err(|source| IndexError::ConnectStat {
                kv: node.kv,
                source,
            })?;
        let mut out = Indexes {
            node,
            n,
            stats,
            activity,
        };
        out.activity.entries_built = out.entries().await?;
        Ok(out)
    }

    fn names(&self) -> Vec<String> {
        (0..self.n).map(index_name).collect()
    }

    async fn stat(&mut self, suffix: &str) -> Result<Vec<u64>, IndexError> {
        let all = self.stats.stats("index").await?;
        self.names()
            .iter()
            .map(|name| {
                let key = format!("index:{name}:{suffix}");
                all.iter()
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, v)| v.parse().ok())
                    .ok_or(IndexError::NoStat { key })
            })
            .collect()
    }

    /// Each index's entries (approximate).
    pub async fn entries(&mut self) -> Result<Vec<u64>, IndexError> {
        self.stat("items").await
    }

    /// The seqnos the indexes have yet to apply, summed over the indexes.
    pub async fn items_remaining(&mut self) -> Result<u64, IndexError> {
        Ok(self.stat("items_remaining").await?.into_iter().sum())
    }

    /// Reads the indexes' items remaining every [`BACKLOG_EVERY`] from `from` to `until` (a
    /// step's measured part).
    pub async fn backlog(
        &mut self,
        from: Instant,
        until: Instant,
    ) -> Result<IndexBacklog, IndexError> {
        tokio::time::sleep_until(from.into()).await;
        let mut seen = Vec::new();
        let mut tick = tokio::time::interval(BACKLOG_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if Instant::now() >= until {
                break;
            }
            seen.push(self.items_remaining().await?);
        }
        Ok(IndexBacklog::of(&seen))
    }

    /// Starts the query loop: one point query every `every`, until [`QueryLoop::stop`].
    pub fn query_loop(&self, every: Duration) -> QueryLoop {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(queries(self.node.clone(), self.n, every, stopped));
        QueryLoop { stop, task }
    }

    /// Reads the final entries, drops every index, and gives what the column's indexes did
    /// (`queries`: the loop's counts, merged in).
    pub async fn finish(mut self, queries: QueryCount) -> Result<IndexActivity, IndexError> {
        self.activity.entries_end = self.entries().await?;
        let mut conn = N1qlConn::connect(
            self.node.admin,
            &self.node.username,
            &self.node.password,
            DDL_TIMEOUT,
        )
        .await
        .map_err(|source| IndexError::ConnectQuery {
            admin: self.node.admin,
            source,
        })?;
        for i in 0..self.n {
            conn.count(&json!({ "statement": drop_statement(i) }))
                .await
                .map_err(|source| IndexError::Statement {
                    statement: drop_statement(i),
                    source,
                })?;
        }
        let a = &mut self.activity;
        a.queries = queries.queries;
        a.rows = queries.rows;
        a.query_p50_us = queries.latency.quantile_us(0.50);
        a.query_p99_us = queries.latency.quantile_us(0.99);
        a.errors += queries.errors;
        if a.first_error.is_none() {
            a.first_error = queries.first_error;
        }
        Ok(self.activity)
    }
}

/// The query loop's counts.
pub struct QueryCount {
    pub queries: u64,
    pub rows: u64,
    pub latency: Latency,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// The running query loop.
pub struct QueryLoop {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<QueryCount>,
}

impl QueryLoop {
    pub async fn stop(self) -> QueryCount {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_else(|e| QueryCount {
            queries: 0,
            rows: 0,
            latency: Latency::new(),
            errors: 1,
            first_error: Some(format!("the query loop failed: {e}")),
        })
    }
}

async fn queries(
    node: IndexNode,
    n: usize,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> QueryCount {
    let mut count = QueryCount {
        queries: 0,
        rows: 0,
        latency: Latency::new(),
        errors: 0,
        first_error: None,
    };
    fn fail(count: &mut QueryCount, e: String) {
        count.errors += 1;
        if count.first_error.is_none() {
            count.first_error = Some(e);
        }
    }
    let mut conn: Option<N1qlConn> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut draw = 0x5eed_u64;
    let mut q = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return count,
        }
        if conn.is_none() {
            match N1qlConn::connect(node.admin, &node.username, &node.password, QUERY_TIMEOUT).await
            {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    fail(&mut count, e.to_string());
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        // xorshift64: the value looked up.
        draw ^= draw << 13;
        draw ^= draw >> 7;
        draw ^= draw << 17;
        let request = point_query(q, n, draw);
        let sent = Instant::now();
        let answer = tokio::select! {
            a = c.count(&request) => a,
            _ = stop.changed() => return count,
        };
        count.queries += 1;
        q += 1;
        match answer {
            Ok(rows) => {
                count.latency.record(sent.elapsed());
                count.rows += rows as u64;
            }
            Err(e) => {
                // A statement the service refused leaves the connection usable; anything
                // else (timeout, HTTP) gets a new one.
                if !matches!(e, N1qlError::Failed { .. }) {
                    conn = None;
                }
                fail(&mut count, e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_summarizes_a_steps_readings() {
        let b = IndexBacklog::of(&[10, 0, 50, 20]);
        assert_eq!((b.readings, b.avg, b.max, b.end), (4, 20.0, 50, 20));
        assert_eq!(IndexBacklog::of(&[]), IndexBacklog::default());
    }

    #[test]
    fn statements_name_one_index_per_field() {
        assert_eq!(
            create_statement(0, 0),
            "CREATE INDEX bench_ix_0 ON default(f0)"
        );
        assert_eq!(
            create_statement(15, 1),
            "CREATE INDEX bench_ix_15 ON default(f15) WITH {\"num_replica\": 1}"
        );
        assert_eq!(drop_statement(3), "DROP INDEX bench_ix_3 ON default");
    }

    #[test]
    fn the_point_queries_take_the_indexes_in_turn() {
        let q = point_query(7, 5, 123_456_789);
        assert_eq!(
            q["statement"],
            "SELECT META().id FROM default WHERE f2 = $v"
        );
        assert_eq!(q["$v"], 123_456_789 % FIELD_VALUES);
        assert_eq!(q["scan_consistency"], "not_bounded");
        assert_eq!(
            point_query(4, 1, 1)["statement"],
            "SELECT META().id FROM default WHERE f0 = $v"
        );
    }
}
