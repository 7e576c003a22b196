//! PostgreSQL as a `bench query` system: table `docs(id text primary key, doc jsonb)`, the
//! same documents loaded with COPY, B-tree expression indexes on `doc->>'email'` and
//! `(doc->>'k')::bigint` (built after the load, as a bulk load is done), then ANALYZE.
//! Query clients are one connection each with their statements prepared; the writer's
//! connections pipeline each batch of UPDATEs.

use bytes::Bytes;
use futures_util::SinkExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::harness::pg_peer::{PgError, PgServer};
use crate::scenarios::query::closed_loop::{Query, QueryClient, RANGE_ROWS};
use crate::scenarios::query::docs::{DocSet, Revision};
use crate::scenarios::query::writer::BatchWriter;

/// COPY streams at once (the load is CPU-bound in the server: one per core of the box).
const COPY_STREAMS: u64 = 2;
/// Bytes of COPY text sent per message.
const COPY_CHUNK: usize = 1 << 20;

pub const POINT: &str = "SELECT id, doc FROM docs WHERE doc->>'email' = $1";
pub const RANGE: &str = "SELECT id, (doc->>'k')::bigint AS k FROM docs \
                         WHERE (doc->>'k')::bigint >= $1 ORDER BY (doc->>'k')::bigint LIMIT 100";
pub const BOUNDED: &str = "SELECT id, (doc->>'k')::bigint AS k FROM docs \
                           WHERE (doc->>'k')::bigint BETWEEN $1 AND $2 \
                           ORDER BY (doc->>'k')::bigint LIMIT 100";
const UPDATE: &str = "UPDATE docs SET doc = $2::text::jsonb WHERE id = $1";
pub const INDEXES: [(&str, &str); 2] = [
    (
        "ix_email",
        "CREATE INDEX ix_email ON docs ((doc->>'email'))",
    ),
    ("ix_k", "CREATE INDEX ix_k ON docs (((doc->>'k')::bigint))"),
];

/// Why PostgreSQL could not be loaded, indexed, asked or vacuumed.
#[derive(Debug, thiserror::Error)]
pub enum PgSystemError {
    /// Connecting to the server.
    #[error(transparent)]
    Server(#[from] PgError),
    #[error("creating the table")]
    CreateTable(#[source] tokio_postgres::Error),
    #[error("a COPY stream panicked")]
    CopyTask(#[source] tokio::task::JoinError),
    #[error("starting COPY")]
    StartCopy(#[source] tokio_postgres::Error),
    #[error("sending COPY data")]
    SendCopy(#[source] tokio_postgres::Error),
    #[error("ending COPY")]
    EndCopy(#[source] tokio_postgres::Error),
    #[error("setting maintenance_work_mem")]
    WorkMem(#[source] tokio_postgres::Error),
    #[error("creating {name}")]
    CreateIndex {
        name: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("VACUUM ANALYZE docs")]
    Analyze(#[source] tokio_postgres::Error),
    /// `what`: the point query, the range query, the bounded range query or the update.
    #[error("preparing the {what}")]
    Prepare {
        what: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("VACUUM")]
    Vacuum(#[source] tokio_postgres::Error),
}

/// What setting PostgreSQL up took.
#[derive(Debug, Clone, Default)]
pub struct PgSetup {
    pub load: Duration,
    pub indexes: Vec<(String, Duration)>,
    pub analyze: Duration,
}

/// Creates the table, loads `set` with COPY, builds the indexes and analyzes.
pub async fn load(
    pg: &PgServer,
    set: &DocSet,
    done: &Arc<AtomicU64>,
) -> Result<PgSetup, PgSystemError> {
    let admin = pg.connect().await?;
    admin
        .batch_execute("CREATE TABLE docs (id text PRIMARY KEY, doc jsonb NOT NULL)")
        .await
        .map_err(PgSystemError::CreateTable)?;
    let start = Instant::now();
    let mut copies = JoinSet::new();
    for stream in 0..COPY_STREAMS {
        let client = pg.connect().await?;
        let (set, done) = (*set, done.clone());
        copies.spawn(async move { copy(&client, &set, stream, &done).await });
    }
    while let Some(joined) = copies.join_next().await {
        joined.map_err(PgSystemError::CopyTask)??;
    }
    let mut setup = PgSetup {
        load: start.elapsed(),
        ..PgSetup::default()
    };
    // Index builds sort in memory up to this; PostgreSQL's default (64 MB) spills 1M keys.
    admin
        .batch_execute("SET maintenance_work_mem = '512MB'")
        .await
        .map_err(PgSystemError::WorkMem)?;
    for (name, ddl) in INDEXES {
        let start = Instant::now();
        admin
            .batch_execute(ddl)
            .await
            .map_err(|source| PgSystemError::CreateIndex { name, source })?;
        setup.indexes.push((name.to_string(), start.elapsed()));
    }
    let start = Instant::now();
    admin
        .batch_execute("VACUUM ANALYZE docs")
        .await
        .map_err(PgSystemError::Analyze)?;
    setup.analyze = start.elapsed();
    Ok(setup)
}

/// One COPY stream: documents `stream, stream + COPY_STREAMS, …`.
async fn copy(
    client: &Client,
    set: &DocSet,
    stream: u64,
    done: &AtomicU64,
) -> Result<(), PgSystemError> {
    let sink = client
        .copy_in::<_, Bytes>("COPY docs (id, doc) FROM STDIN")
        .await
        .map_err(PgSystemError::StartCopy)?;
    let mut sink = Box::pin(sink);
    let mut buf = String::with_capacity(COPY_CHUNK + 2048);
    let mut rows = 0u64;
    for i in (stream..set.len()).step_by(COPY_STREAMS as usize) {
        copy_row(&mut buf, &set.key(i), &set.doc(i, Revision(0)));
        rows += 1;
        if buf.len() >= COPY_CHUNK {
            sink.send(Bytes::from(std::mem::take(&mut buf)))
                .await
                .map_err(PgSystemError::SendCopy)?;
            done.fetch_add(rows, Ordering::Relaxed);
            rows = 0;
        }
    }
    if !buf.is_empty() {
        sink.send(Bytes::from(buf))
            .await
            .map_err(PgSystemError::SendCopy)?;
    }
    sink.as_mut()
        .finish()
        .await
        .map_err(PgSystemError::EndCopy)?;
    done.fetch_add(rows, Ordering::Relaxed);
    Ok(())
}

/// Appends one row of COPY's text format: tab-separated, backslash escapes.
pub fn copy_row(buf: &mut String, id: &str, doc: &str) {
    copy_escape(buf, id);
    buf.push('\t');
    copy_escape(buf, doc);
    buf.push('\n');
}

fn copy_escape(buf: &mut String, field: &str) {
    for c in field.chars() {
        match c {
            '\\' => buf.push_str("\\\\"),
            '\t' => buf.push_str("\\t"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            c => buf.push(c),
        }
    }
}

/// `n` query clients.
pub async fn clients(pg: &PgServer, n: u32) -> Result<Vec<PgQuery>, PgSystemError> {
    let mut out = Vec::new();
    for _ in 0..n {
        let client = pg.connect().await?;
        let point = prepare(&client, POINT, "point query").await?;
        let range = prepare(&client, RANGE, "range query").await?;
        let bounded = prepare(&client, BOUNDED, "bounded range query").await?;
        out.push(PgQuery {
            client,
            point,
            range,
            bounded,
        });
    }
    Ok(out)
}

/// Prepares `statement`; `what` names it in the error.
async fn prepare(
    client: &Client,
    statement: &str,
    what: &'static str,
) -> Result<Statement, PgSystemError> {
    client
        .prepare(statement)
        .await
        .map_err(|source| PgSystemError::Prepare { what, source })
}

pub struct PgQuery {
    client: Client,
    point: Statement,
    range: Statement,
    bounded: Statement,
}

impl QueryClient for PgQuery {
    type Error = tokio_postgres::Error;

    async fn run(&mut self, q: &Query) -> Result<usize, tokio_postgres::Error> {
        let rows = match q {
            Query::Point { email } => self.client.query(&self.point, &[email]).await,
            Query::Range { lo } => self.client.query(&self.range, &[lo]).await,
            Query::Bounded { lo } => {
                let hi = lo + RANGE_ROWS as i64 - 1;
                self.client.query(&self.bounded, &[lo, &hi]).await
            }
        };
        rows.map(|r| r.len())
    }
}

/// `n` writer connections.
pub async fn writers(pg: &PgServer, n: u32) -> Result<Vec<PgWriter>, PgSystemError> {
    let mut out = Vec::new();
    for _ in 0..n {
        let client = pg.connect().await?;
        let update = prepare(&client, UPDATE, "update").await?;
        out.push(PgWriter { client, update });
    }
    Ok(out)
}

pub struct PgWriter {
    client: Client,
    update: Statement,
}

/// A writer's batch that PostgreSQL did not apply as asked.
#[derive(Debug, thiserror::Error)]
pub enum PgWriteError {
    #[error("UPDATE of {id}")]
    Update {
        id: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("UPDATE of {id} changed {rows} rows")]
    Changed { id: String, rows: u64 },
}

impl BatchWriter for PgWriter {
    type Error = PgWriteError;

    async fn write(&mut self, batch: Vec<(String, String)>) -> Result<(), PgWriteError> {
        // Issued together, the UPDATEs are pipelined on the one connection (each its own
        // transaction, as each Sluice set is its own write).
        let params: Vec<[&(dyn ToSql + Sync); 2]> = batch
            .iter()
            .map(|(id, doc)| [id as &(dyn ToSql + Sync), doc as &(dyn ToSql + Sync)])
            .collect();
        let updates = params.iter().map(|p| self.client.execute(&self.update, p));
        for (updated, (id, _)) in futures_util::future::join_all(updates)
            .await
            .into_iter()
            .zip(&batch)
        {
            match updated {
                Ok(1) => {}
                Ok(rows) => {
                    return Err(PgWriteError::Changed {
                        id: id.clone(),
                        rows,
                    })
                }
                Err(source) => {
                    return Err(PgWriteError::Update {
                        id: id.clone(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

/// VACUUM after a write phase, so that dead tuples and a later autovacuum do not land in
/// the next phase of either system.
pub async fn vacuum(pg: &PgServer) -> Result<(), PgSystemError> {
    pg.connect()
        .await?
        .batch_execute("VACUUM docs")
        .await
        .map_err(PgSystemError::Vacuum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_rows_escape_what_copy_reads_specially() {
        let mut buf = String::new();
        copy_row(&mut buf, "u1", "a\tb\\c\nd\re");
        assert_eq!(buf, "u1\ta\\tb\\\\c\\nd\\re\n");
        let mut plain = String::new();
        copy_row(&mut plain, "u2", "{\"email\":\"a@b\"}");
        assert_eq!(plain, "u2\t{\"email\":\"a@b\"}\n");
    }
}
