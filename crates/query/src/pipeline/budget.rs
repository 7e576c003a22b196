//! The memory bound on what the pipeline buffers (sorted rows, groups, DISTINCT sets,
//! ARRAY_AGG values), counted with a cheap estimate of each value's heap size.

use crate::error::{QueryError, Result};
use crate::value::Value;

pub(crate) struct Budget {
    used: usize,
    limit: usize,
}

impl Budget {
    pub(crate) fn new(limit: usize) -> Self {
        Budget { used: 0, limit }
    }

    pub(crate) fn charge(&mut self, bytes: usize) -> Result<()> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limit {
            return Err(QueryError::MemoryQuotaExceeded {
                in_use: self.used,
                limit: self.limit,
            });
        }
        Ok(())
    }

    pub(crate) fn charge_value(&mut self, v: &Value) -> Result<()> {
        self.charge(value_size(v))
    }

    pub(crate) fn charge_json(&mut self, v: &serde_json::Value) -> Result<()> {
        self.charge(json_size(v))
    }
}

pub(crate) fn value_size(v: &Value) -> usize {
    v.as_json().map_or(8, json_size)
}

/// Roughly what the value occupies: a fixed cost per node plus string bytes.
pub(crate) fn json_size(v: &serde_json::Value) -> usize {
    const NODE: usize = 32;
    match v {
        serde_json::Value::String(s) => NODE + s.len(),
        serde_json::Value::Array(items) => NODE + items.iter().map(json_size).sum::<usize>(),
        serde_json::Value::Object(map) => {
            NODE + map
                .iter()
                .map(|(k, v)| NODE + k.len() + json_size(v))
                .sum::<usize>()
        }
        _ => NODE,
    }
}
