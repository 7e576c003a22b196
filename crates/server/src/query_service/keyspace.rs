//! Which data a statement's keyspace names.

use sluice_index::IndexDef;
use sluice_query::ast::{KeyspaceRef, Namespace};

use super::error::ServiceError;

/// A keyspace this service reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `system:indexes`: the index definitions.
    SystemIndexes,
    /// `system:prepareds`: this node's prepared statements.
    SystemPrepareds,
    /// A collection of a bucket (its default collection for a bucket's bare name).
    Keyspace(Keyspace),
}

/// A bucket's collection, by name. Whether it exists is the caller's to check (the
/// bucket's manifest).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Keyspace {
    pub bucket: String,
    pub scope: String,
    pub collection: String,
}

impl Keyspace {
    pub fn default_of(bucket: &str) -> Keyspace {
        Keyspace::new(bucket, DEFAULT, DEFAULT)
    }

    pub fn new(bucket: &str, scope: &str, collection: &str) -> Keyspace {
        Keyspace {
            bucket: bucket.to_string(),
            scope: scope.to_string(),
            collection: collection.to_string(),
        }
    }

    pub fn is_default(&self) -> bool {
        self.scope == DEFAULT && self.collection == DEFAULT
    }

    /// Whether `def` is an index of this keyspace.
    pub fn holds(&self, def: &IndexDef) -> bool {
        def.bucket == self.bucket && def.scope == self.scope && def.collection == self.collection
    }

    /// The name Couchbase's messages give it: `default:b`, or `default:b.s.c`.
    pub fn path(&self) -> String {
        if self.is_default() {
            format!("default:{}", self.bucket)
        } else {
            format!("default:{}.{}.{}", self.bucket, self.scope, self.collection)
        }
    }
}

const DEFAULT: &str = "_default";

/// Resolves `ks` against the request's `query_context` (`[default:]bucket.scope`): with a
/// context, a one-part name is a collection of its scope and `s.c` a collection of its
/// bucket; without one, a one-part name is a bucket (its default collection).
pub fn resolve(ks: &KeyspaceRef, query_context: Option<&str>) -> Result<Target, ServiceError> {
    match ks {
        KeyspaceRef::Bucket {
            namespace: Some(Namespace::System),
            bucket,
        } => match bucket.as_str() {
            "indexes" => Ok(Target::SystemIndexes),
            "prepareds" => Ok(Target::SystemPrepareds),
            other => Err(ServiceError::KeyspaceNotFound(format!("system:{other}"))),
        },
        KeyspaceRef::Bucket { bucket, .. } => Ok(Target::Keyspace(match context(query_context) {
            Some((b, s)) => Keyspace::new(&b, &s, bucket.as_str()),
            None => Keyspace::default_of(bucket.as_str()),
        })),
        KeyspaceRef::Collection {
            bucket,
            scope,
            collection,
            ..
        } => Ok(Target::Keyspace(Keyspace::new(
            bucket.as_str(),
            scope.as_str(),
            collection.as_str(),
        ))),
        KeyspaceRef::Relative { scope, collection } => match context(query_context) {
            Some((b, _)) => Ok(Target::Keyspace(Keyspace::new(
                &b,
                scope.as_str(),
                collection.as_str(),
            ))),
            None => Err(ServiceError::KeyspaceNotFound(format!(
                "{}.{} (a scope-relative name needs a query_context)",
                scope.as_str(),
                collection.as_str()
            ))),
        },
    }
}

/// `default:bucket.scope`, `bucket.scope` or `` `bucket`.`scope` `` → (bucket, scope).
fn context(qc: Option<&str>) -> Option<(String, String)> {
    let qc = qc?.trim();
    let qc = qc.rsplit_once(':').map_or(qc, |(_, rest)| rest);
    let (b, s) = qc.split_once('.')?;
    let strip = |t: &str| t.trim_matches('`').to_string();
    Some((strip(b), strip(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks(stmt: &str) -> KeyspaceRef {
        match sluice_query::parse(stmt).expect("parses") {
            sluice_query::Statement::Select(s) => s.from.expect("a FROM").keyspace,
            _ => panic!("a SELECT"),
        }
    }

    #[test]
    fn keyspaces_resolve_to_collections_and_system_keyspaces() {
        let r = |s: &str, qc| resolve(&ks(s), qc);
        let ks = |b: &str, s: &str, c: &str| Target::Keyspace(Keyspace::new(b, s, c));
        assert_eq!(
            r("SELECT * FROM system:indexes", None).unwrap(),
            Target::SystemIndexes
        );
        assert_eq!(
            r("SELECT * FROM b", None).unwrap(),
            Target::Keyspace(Keyspace::default_of("b"))
        );
        assert_eq!(
            r("SELECT * FROM default:b._default._default", None).unwrap(),
            ks("b", "_default", "_default")
        );
        assert_eq!(
            r("SELECT * FROM _default", Some("default:`b`.`_default`")).unwrap(),
            Target::Keyspace(Keyspace::default_of("b"))
        );
        assert_eq!(r("SELECT * FROM b.s.c", None).unwrap(), ks("b", "s", "c"));
        assert_eq!(
            r("SELECT * FROM hotel", Some("default:`travel`.`inv`")).unwrap(),
            ks("travel", "inv", "hotel")
        );
        assert_eq!(
            r("SELECT * FROM inv.hotel", Some("travel.other")).unwrap(),
            ks("travel", "inv", "hotel")
        );
        assert_eq!(
            r("SELECT * FROM system:nodes", None).unwrap_err().code(),
            12003
        );
        assert_eq!(r("SELECT * FROM s.c", None).unwrap_err().code(), 12003);
        assert_eq!(Keyspace::default_of("b").path(), "default:b");
        assert_eq!(Keyspace::new("b", "s", "c").path(), "default:b.s.c");
    }
}
