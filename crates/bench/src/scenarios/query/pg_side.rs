//! PostgreSQL as a `bench query` system: table `docs(id text primary key, doc jsonb)`, the
//! same documents loaded with COPY, B-tree expression indexes on `doc->>'email'` and
//! `(doc->>'k')::bigint` (built after the load, as a bulk load is done), then ANALYZE.
//! Query clients are one connection each with their statements prepared; the writer's
//! connections pipeline each batch of UPDATEs.

use anyhow::Context;
use bytes::Bytes;
use futures_util::SinkExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::harness::pg_peer::PgServer;
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

/// What setting PostgreSQL up took.
#[derive(Debug, Clone, Default)]
pub struct PgSetup {
    pub load: Duration,
    pub indexes: Vec<(String, Duration)>,
    pub analyze: Duration,
}

/// Creates the table, loads `set` with COPY, builds the indexes and analyzes.
pub async fn load(pg: &PgServer, set: &DocSet, done: &Arc<AtomicU64>) -> anyhow::Result<PgSetup> {
    let admin = pg.connect().await?;
    admin
        .batch_execute("CREATE TABLE docs (id text PRIMARY KEY, doc jsonb NOT NULL)")
        .await
        .context("creating the table")?;
    let start = Instant::now();
    let mut copies = JoinSet::new();
    for stream in 0..COPY_STREAMS {
        let client = pg.connect().await?;
        let (set, done) = (*set, done.clone());
        copies.spawn(async move { copy(&client, &set, stream, &done).await });
    }
    while let Some(joined) = copies.join_next().await {
        joined.context("a COPY stream panicked")??;
    }
    let mut setup = PgSetup {
        load: start.elapsed(),
        ..PgSetup::default()
    };
    // Index builds sort in memory up to this; PostgreSQL's default (64 MB) spills 1M keys.
    admin
        .batch_execute("SET maintenance_work_mem = '512MB'")
        .await?;
    for (name, ddl) in INDEXES {
        let start = Instant::now();
        admin
            .batch_execute(ddl)
            .await
            .with_context(|| format!("creating {name}"))?;
        setup.indexes.push((name.to_string(), start.elapsed()));
    }
    let start = Instant::now();
    admin.batch_execute("VACUUM ANALYZE docs").await?;
    setup.analyze = start.elapsed();
    Ok(setup)
}

/// One COPY stream: documents `stream, stream + COPY_STREAMS, …`.
async fn copy(client: &Client, set: &DocSet, stream: u64, done: &AtomicU64) -> anyhow::Result<()> {
    let sink = client
        .copy_in::<_, Bytes>("COPY docs (id, doc) FROM STDIN")
        .await
        .context("starting COPY")?;
    let mut sink = Box::pin(sink);
    let mut buf = String::with_capacity(COPY_CHUNK + 2048);
    let mut rows = 0u64;
    for i in (stream..set.len()).step_by(COPY_STREAMS as usize) {
        copy_row(&mut buf, &set.key(i), &set.doc(i, Revision(0)));
        rows += 1;
        if buf.len() >= COPY_CHUNK {
            sink.send(Bytes::from(std::mem::take(&mut buf))).await?;
            done.fetch_add(rows, Ordering::Relaxed);
            rows = 0;
        }
    }
    if !buf.is_empty() {
        sink.send(Bytes::from(buf)).await?;
    }
    sink.as_mut().finish().await.context("ending COPY")?;
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
pub async fn clients(pg: &PgServer, n: u32) -> anyhow::Result<Vec<PgQuery>> {
    let mut out = Vec::new();
    for _ in 0..n {
        let client = pg.connect().await?;
        let point = client
            .prepare(POINT)
            .await
            .context("preparing the point query")?;
        let range = client
            .prepare(RANGE)
            .await
            .context("preparing the range query")?;
        let bounded = client
            .prepare(BOUNDED)
            .await
            .context("preparing the bounded range query")?;
        out.push(PgQuery {
            client,
            point,
            range,
            bounded,
        });
    }
    Ok(out)
}

pub struct PgQuery {
    client: Client,
    point: Statement,
    range: Statement,
    bounded: Statement,
}

impl QueryClient for PgQuery {
    async fn run(&mut self, q: &Query) -> Result<usize, String> {
        let rows = match q {
            Query::Point { email } => self.client.query(&self.point, &[email]).await,
            Query::Range { lo } => self.client.query(&self.range, &[lo]).await,
            Query::Bounded { lo } => {
                let hi = lo + RANGE_ROWS as i64 - 1;
                self.client.query(&self.bounded, &[lo, &hi]).await
            }
        };
        rows.map(|r| r.len()).map_err(|e| e.to_string())
    }
}

/// `n` writer connections.
pub async fn writers(pg: &PgServer, n: u32) -> anyhow::Result<Vec<PgWriter>> {
    let mut out = Vec::new();
    for _ in 0..n {
        let client = pg.connect().await?;
        let update = client
            .prepare(UPDATE)
            .await
            .context("preparing the update")?;
        out.push(PgWriter { client, update });
    }
    Ok(out)
}

pub struct PgWriter {
    client: Client,
    update: Statement,
}

impl BatchWriter for PgWriter {
    async fn write(&mut self, batch: Vec<(String, String)>) -> Result<(), String> {
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
                Ok(n) => return Err(format!("UPDATE of {id} changed {n} rows")),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }
}

/// VACUUM after a write phase, so that dead tuples and a later autovacuum do not land in
/// the next phase of either system.
pub async fn vacuum(pg: &PgServer) -> anyhow::Result<()> {
    pg.connect()
        .await?
        .batch_execute("VACUUM docs")
        .await
        .context("VACUUM")
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
