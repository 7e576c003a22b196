//! Prepared statements (Couchbase's `PREPARE` / `EXECUTE` and the request's `prepared`): a
//! statement parsed once and kept under a name, then run by that name with new parameters.
//! Pure: the query service holds one [`PreparedCache`] per node and passes the clock in.
//!
//! - **What is kept** is the parsed statement, and for a SELECT what of its plan does not
//!   depend on the parameters: its clauses compiled for the pipeline ([`Compiled`]), and
//!   which indexes it may use and how each covers it ([`AccessPlanner`]). The planner is
//!   kept with a stamp of the indexes it was made over ([`PlanStamp`], the caller's), and
//!   made again when they change, so a prepared statement never runs a plan that an index
//!   drop or build has made stale (Couchbase re-prepares in that case). The access path
//!   itself (which index, which spans) is chosen at every run, with that run's parameters.
//! - **Names.** `PREPARE name AS …` names it. An anonymous one is named after its query
//!   context and its text as rendered (whitespace and case normalized): a UUID-shaped
//!   digest, so the same statement prepared again, by any client, reuses one entry.
//! - **Scope.** Entries are kept per query context, as in Couchbase: running a prepared
//!   statement needs the context it was prepared under.
//! - **A name holds one statement.** Preparing another under a taken name is error 4060
//!   (`FORCE` does not change that, as in Couchbase); the same statement again refreshes it.
//! - **Bounded**: at most [`ENTRIES_MAX`] entries and [`TEXT_BYTES_MAX`] bytes of statement
//!   text; the least recently used goes first. An evicted or unknown name is error 4040, on
//!   which the SDKs prepare again.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use sha2::{Digest, Sha256};

use crate::ast::{Prepare, Select, Statement};
use crate::error::Result;
use crate::pipeline::Compiled;
use crate::planner::{AccessPlanner, IndexInfo};

/// Prepared statements kept at most (Couchbase's default `prepared-limit`).
pub const ENTRIES_MAX: usize = 16_384;
/// Bytes of statement text kept at most (each entry also holds its parsed tree, about as
/// large): a bound in bytes whatever the statements' sizes.
pub const TEXT_BYTES_MAX: usize = 64 << 20;

/// One prepared statement.
#[derive(Debug)]
pub struct Prepared {
    pub name: String,
    pub query_context: String,
    /// The statement as rendered (what the anonymous name is derived from).
    pub text: String,
    pub statement: Statement,
    /// Runs so far (see [`Prepared::used`]).
    uses: AtomicU64,
    /// The SELECT's clauses compiled for the pipeline, once a run has compiled them.
    compiled: OnceLock<Compiled>,
    /// The SELECT's access planner as last made, and over which indexes.
    access: Mutex<Option<(PlanStamp, Arc<AccessPlanner>)>>,
}

/// Which indexes an [`AccessPlanner`] was made over, as the caller tells them apart (a
/// version of its catalog): a planner is reused only under the same stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanStamp(pub [u64; 3]);

impl Prepared {
    /// `select` (this prepared statement's) compiled for the pipeline: compiled by the
    /// first run and kept. A statement that does not compile fails every run, as it did.
    pub fn compiled(&self, select: &Select) -> Result<Compiled> {
        if let Some(c) = self.compiled.get() {
            return Ok(c.clone());
        }
        let c = Compiled::new(select)?;
        // Two first runs may both compile: either result is the same.
        Ok(self.compiled.get_or_init(|| c).clone())
    }

    /// The access planner of `select` (this prepared statement's) over the indexes
    /// `stamp` names: the one kept if it was made under `stamp`, else made now over
    /// `indexes` and kept.
    pub fn access_planner(
        &self,
        select: &Select,
        stamp: PlanStamp,
        indexes: impl FnOnce() -> Arc<[IndexInfo]>,
    ) -> Arc<AccessPlanner> {
        // A panic elsewhere while holding this leaves at worst an older planner, which
        // the stamp check still guards.
        let mut kept = self.access.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((s, planner)) = kept.as_ref() {
            if *s == stamp {
                return planner.clone();
            }
        }
        let planner = Arc::new(AccessPlanner::new(select, indexes()));
        *kept = Some((stamp, planner.clone()));
        planner
    }

    /// Counts one run of the statement.
    pub fn used(&self) {
        self.uses.fetch_add(1, Ordering::Relaxed);
    }

    pub fn uses(&self) -> u64 {
        self.uses.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreparedError {
    #[error("No such prepared statement: {name}, context: {}", context_shown(.context))]
    NoSuchName { name: String, context: String },
    #[error("Unable to add name: duplicate name: {0}")]
    DuplicateName(String),
}

impl PreparedError {
    /// Couchbase's codes: 4040 (`plan.build_prepared.no_such_name`), 4060
    /// (`E_PREPARED_NAME`).
    pub fn code(&self) -> u32 {
        match self {
            PreparedError::NoSuchName { .. } => 4040,
            PreparedError::DuplicateName(_) => 4060,
        }
    }
}

fn context_shown(context: &str) -> &str {
    if context.is_empty() {
        "unset"
    } else {
        context
    }
}

struct Entry {
    prepared: Arc<Prepared>,
    /// When it was last used (the cache's own counter), its key in `by_use`.
    used: u64,
}

/// The prepared statements of one node, keyed by (query context, name).
pub struct PreparedCache {
    max_entries: usize,
    max_text_bytes: usize,
    /// Query context → name → entry: a run looks its statement up by the request's two
    /// strings, with no key built for it.
    entries: HashMap<String, HashMap<String, Entry>>,
    /// Least recently used first (each statement knows its own context and name).
    by_use: BTreeMap<u64, Arc<Prepared>>,
    text_bytes: usize,
    clock: u64,
}

impl Default for PreparedCache {
    /// A cache bounded by [`ENTRIES_MAX`] and [`TEXT_BYTES_MAX`].
    fn default() -> PreparedCache {
        PreparedCache::with_bounds(ENTRIES_MAX, TEXT_BYTES_MAX)
    }
}

impl PreparedCache {
    /// A cache bounded by [`ENTRIES_MAX`] and [`TEXT_BYTES_MAX`].
    pub fn new() -> PreparedCache {
        PreparedCache::default()
    }

    pub fn with_bounds(max_entries: usize, max_text_bytes: usize) -> PreparedCache {
        assert!(max_entries > 0, "a cache that keeps nothing");
        PreparedCache {
            max_entries,
            max_text_bytes,
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            text_bytes: 0,
            clock: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.by_use.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_use.is_empty()
    }

    /// Keeps `p`'s statement under its name (or the one derived from it) in
    /// `query_context`, and returns the entry.
    pub fn prepare(
        &mut self,
        p: &Prepare,
        query_context: &str,
    ) -> Result<Arc<Prepared>, PreparedError> {
        let text = p.statement.to_string();
        let name = match &p.name {
            Some(n) => n.clone(),
            None => anonymous_name(query_context, &text),
        };
        if let Some(existing) = self.entry(query_context, &name) {
            if existing.prepared.text != text {
                return Err(PreparedError::DuplicateName(name));
            }
            // The same statement: it is refreshed (FORCE or not), keeping its name.
            self.remove(query_context, &name);
        }
        let prepared = Arc::new(Prepared {
            name,
            query_context: query_context.to_owned(),
            text,
            statement: (*p.statement).clone(),
            uses: AtomicU64::new(0),
            compiled: OnceLock::new(),
            access: Mutex::new(None),
        });
        self.insert(prepared.clone());
        Ok(prepared)
    }

    /// Every statement kept, least recently used first (`system:prepareds`).
    pub fn entries(&self) -> Vec<Arc<Prepared>> {
        self.by_use.values().cloned().collect()
    }

    /// The statement prepared as `name` in `query_context`.
    pub fn get(&mut self, name: &str, query_context: &str) -> Result<Arc<Prepared>, PreparedError> {
        self.clock += 1;
        let now = self.clock;
        let Some(entry) = self
            .entries
            .get_mut(query_context)
            .and_then(|names| names.get_mut(name))
        else {
            return Err(PreparedError::NoSuchName {
                name: name.to_owned(),
                context: query_context.to_owned(),
            });
        };
        self.by_use.remove(&entry.used);
        entry.used = now;
        self.by_use.insert(now, entry.prepared.clone());
        Ok(entry.prepared.clone())
    }

    fn entry(&self, query_context: &str, name: &str) -> Option<&Entry> {
        self.entries.get(query_context)?.get(name)
    }

    fn insert(&mut self, prepared: Arc<Prepared>) {
        self.clock += 1;
        self.text_bytes += prepared.text.len();
        self.by_use.insert(self.clock, prepared.clone());
        let names = self
            .entries
            .entry(prepared.query_context.clone())
            .or_default();
        names.insert(
            prepared.name.clone(),
            Entry {
                prepared,
                used: self.clock,
            },
        );
        // The newest entry stays even if it alone is over the byte bound.
        while self.len() > self.max_entries
            || (self.text_bytes > self.max_text_bytes && self.len() > 1)
        {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.remove(&oldest.query_context, &oldest.name);
        }
        debug_assert_eq!(
            self.entries.values().map(HashMap::len).sum::<usize>(),
            self.by_use.len()
        );
    }

    fn remove(&mut self, query_context: &str, name: &str) {
        let Some(names) = self.entries.get_mut(query_context) else {
            return;
        };
        if let Some(e) = names.remove(name) {
            self.by_use.remove(&e.used);
            self.text_bytes -= e.prepared.text.len();
        }
        // No empty context is kept: the map stays as small as what it holds.
        if names.is_empty() {
            self.entries.remove(query_context);
        }
    }
}

/// The name of an anonymous prepared statement: a digest of its query context and text,
/// shaped as a UUID (the form Couchbase's generated names have).
pub fn anonymous_name(query_context: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(query_context.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    uuid_text(&b)
}

/// 16 bytes in the UUID's text form (`8-4-4-4-12` lower-case hex digits).
pub fn uuid_text(b: &[u8; 16]) -> String {
    let hex = sluice_types::hex::encode(b);
    let mut out = String::with_capacity(36);
    for (i, group) in [0..8, 8..12, 12..16, 16..20, 20..32]
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            out.push('-');
        }
        out.push_str(&hex[group]);
    }
    out
}

#[cfg(test)]
mod tests;
