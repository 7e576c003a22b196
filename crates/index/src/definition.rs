//! An index as `CREATE [PRIMARY] INDEX` defines it, and the JSON form the store keeps.
//!
//! Keys and the condition are kept as SQL++ text (the query crate renders text that parses
//! back to the same tree), so the stored form is readable and does not depend on the
//! layout of the AST types.

use serde::{Deserialize, Serialize};
use sluice_query::ast::{Expr, Ident, IndexKey};
use sluice_types::CollectionId;

use crate::error::{IndexError, Result};

/// A node-local number for an index, naming its keyspaces in the store. Never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct IndexId(pub u32);

/// Where an index is in its life, as `system:indexes` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexState {
    /// Created `WITH {"defer_build": true}`: defined, not fed until `BUILD INDEX`.
    Deferred,
    /// Being fed from the beginning of every vbucket; not yet used by queries.
    Building,
    /// Caught up once: queries may use it.
    Online,
}

impl IndexState {
    /// The word Couchbase's `system:indexes` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Deferred => "deferred",
            IndexState::Building => "building",
            IndexState::Online => "online",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct IndexDef {
    pub id: IndexId,
    pub name: String,
    pub bucket: String,
    pub scope: String,
    pub collection: String,
    /// The collection's id when the index was defined: a collection dropped and created
    /// again under the same name is another collection, which this index never fed on.
    pub collection_id: CollectionId,
    /// Empty for a primary index.
    pub keys: Vec<IndexKey>,
    /// A partial index's `WHERE`: only documents it holds true for are indexed.
    pub condition: Option<Expr>,
    pub primary: bool,
    pub state: IndexState,
}

impl IndexDef {
    /// The name a document is bound to when keys are evaluated: what a query's FROM would
    /// bind it to by default (`default` for the bucket `default`, `airline` for
    /// `travel.inventory.airline`). Bare names in keys read document fields either way.
    pub fn alias(&self) -> Ident {
        if self.scope == "_default" && self.collection == "_default" {
            Ident::new(self.bucket.clone())
        } else {
            Ident::new(self.collection.clone())
        }
    }

    /// `bucket` or `bucket.scope.collection`, as error messages name a keyspace.
    pub fn keyspace(&self) -> String {
        if self.scope == "_default" && self.collection == "_default" {
            self.bucket.clone()
        } else {
            format!("{}.{}.{}", self.bucket, self.scope, self.collection)
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        let stored = Stored {
            id: self.id,
            name: self.name.clone(),
            bucket: self.bucket.clone(),
            scope: self.scope.clone(),
            collection: self.collection.clone(),
            collection_id: self.collection_id.0,
            primary: self.primary,
            keys: self
                .keys
                .iter()
                .map(|k| StoredKey {
                    expr: k.expr.to_string(),
                    descending: k.descending,
                    include_missing: k.include_missing,
                })
                .collect(),
            condition: self.condition.as_ref().map(|c| c.to_string()),
            state: self.state,
        };
        serde_json::to_vec(&stored).expect("a definition is plain JSON")
    }

    pub fn from_json(bytes: &[u8]) -> Result<IndexDef> {
        let s: Stored = serde_json::from_slice(bytes)
            .map_err(|e| IndexError::Corrupt(format!("index definition: {e}")))?;
        let parse = |text: &str| {
            sluice_query::parse_expression(text).map_err(|source| IndexError::Definition {
                name: s.name.clone(),
                source,
            })
        };
        let keys = s
            .keys
            .iter()
            .map(|k| {
                Ok(IndexKey {
                    expr: parse(&k.expr)?,
                    descending: k.descending,
                    include_missing: k.include_missing,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let condition = s.condition.as_deref().map(parse).transpose()?;
        Ok(IndexDef {
            id: s.id,
            name: s.name,
            bucket: s.bucket,
            scope: s.scope,
            collection: s.collection,
            collection_id: CollectionId(s.collection_id),
            keys,
            condition,
            primary: s.primary,
            state: s.state,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    id: IndexId,
    name: String,
    bucket: String,
    scope: String,
    collection: String,
    /// Absent (0, the default collection's) in definitions stored before collections
    /// were indexed.
    #[serde(default)]
    collection_id: u32,
    primary: bool,
    keys: Vec<StoredKey>,
    condition: Option<String>,
    state: IndexState,
}

#[derive(Serialize, Deserialize)]
struct StoredKey {
    expr: String,
    descending: bool,
    include_missing: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_survives_its_json_form() {
        let def = IndexDef {
            id: IndexId(7),
            name: "by_city".into(),
            bucket: "travel".into(),
            scope: "inventory".into(),
            collection: "hotel".into(),
            collection_id: CollectionId(9),
            keys: vec![
                IndexKey {
                    expr: sluice_query::parse_expression("address.city").expect("parses"),
                    descending: false,
                    include_missing: true,
                },
                IndexKey {
                    expr: sluice_query::parse_expression("LOWER(`name`)").expect("parses"),
                    descending: true,
                    include_missing: false,
                },
            ],
            condition: Some(sluice_query::parse_expression("type = \"hotel\"").expect("parses")),
            primary: false,
            state: IndexState::Building,
        };
        let back = IndexDef::from_json(&def.to_json()).expect("reads back");
        assert_eq!(back, def);
        assert_eq!(back.alias().as_str(), "hotel");
        assert_eq!(back.keyspace(), "travel.inventory.hotel");
    }

    #[test]
    fn bad_stored_bytes_are_corrupt_not_a_panic() {
        assert!(matches!(
            IndexDef::from_json(b"{\"id\": 1"),
            Err(IndexError::Corrupt(_))
        ));
    }
}
