//! What the caller supplies: statement parameters and the rows of a keyspace.

use std::collections::BTreeMap;

use crate::ast::Param;
use crate::error::{QueryError, Result};
use crate::value::Value;

/// Statement parameters: `$1`/`?` from `positional` (1-based), `$name` from `named`
/// (keys without the `$`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    pub positional: Vec<serde_json::Value>,
    pub named: BTreeMap<String, serde_json::Value>,
}

impl Params {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_positional(mut self, values: impl IntoIterator<Item = serde_json::Value>) -> Self {
        self.positional.extend(values);
        self
    }

    /// Adds a named parameter; a leading `$` or `@` (as the REST API spells them) is dropped.
    pub fn with_named(mut self, name: &str, value: serde_json::Value) -> Self {
        let name = name.strip_prefix(['$', '@']).unwrap_or(name);
        self.named.insert(name.to_owned(), value);
        self
    }

    /// The bound value; an unbound parameter is an error, as in Couchbase.
    pub fn get(&self, p: &Param) -> Result<Value> {
        let found = match p {
            Param::Positional(n) => (*n as usize)
                .checked_sub(1)
                .and_then(|i| self.positional.get(i)),
            Param::Named(name) => self.named.get(name),
        };
        match (found, p) {
            (Some(v), _) => Ok(Value::Json(v.clone())),
            (None, Param::Positional(n)) => {
                Err(QueryError::UnboundPositionalParameter { position: *n })
            }
            (None, Param::Named(name)) => {
                Err(QueryError::UnboundNamedParameter { name: name.clone() })
            }
        }
    }
}

/// A document's metadata, as `META()` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DocMeta {
    pub cas: u64,
    /// Expiry as a Unix time in seconds; 0 for none.
    pub expiration: u32,
    pub flags: u32,
    /// Whether the body is JSON (`"type": "json"`) or not (`"base64"`).
    pub is_json: bool,
}

/// One document of the keyspace a statement reads, as the caller hands it over.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub key: String,
    pub meta: DocMeta,
    pub doc: serde_json::Value,
}

impl Row {
    pub fn new(key: impl Into<String>, doc: serde_json::Value) -> Self {
        Row {
            key: key.into(),
            meta: DocMeta {
                is_json: true,
                ..DocMeta::default()
            },
            doc,
        }
    }

    /// One field of `META()`, as `meta_json()[name]` would give it without building the
    /// whole object (`META().id` is in most projections, once per row).
    pub fn meta_field(&self, name: &str) -> Value {
        let j = match name {
            "cas" => self.meta.cas.into(),
            "expiration" => self.meta.expiration.into(),
            "flags" => self.meta.flags.into(),
            "id" => self.key.as_str().into(),
            "type" => self.meta_type().into(),
            _ => return Value::Missing,
        };
        Value::Json(j)
    }

    fn meta_type(&self) -> &'static str {
        if self.meta.is_json {
            "json"
        } else {
            "base64"
        }
    }

    /// `META()` of this row: `{"cas", "expiration", "flags", "id", "type"}`.
    pub fn meta_json(&self) -> serde_json::Value {
        let fields = ["cas", "expiration", "flags", "id", "type"]
            .into_iter()
            .filter_map(|name| Some((name.to_owned(), self.meta_field(name).into_json()?)));
        serde_json::Value::Object(fields.collect())
    }
}
