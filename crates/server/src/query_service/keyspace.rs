//! Which data a statement's keyspace names.

use sluice_query::ast::{KeyspaceRef, Namespace};

use super::error::ServiceError;

/// A keyspace this service reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `system:indexes`: the index definitions.
    SystemIndexes,
    /// `system:prepareds`: this node's prepared statements.
    SystemPrepareds,
    /// A bucket's default collection.
    Bucket(String),
}

/// Resolves `ks` against the request's `query_context` (`[default:]bucket.scope`). Only
/// default collections are indexed so far: another collection is refused, saying so.
pub fn resolve(ks: &KeyspaceRef, query_context: Option<&str>) -> Result<Target, ServiceError> {
    let not_yet = |name: String| {
        ServiceError::NotSupported(format!(
            "{name}: Sluice's query service reads the default collection of a bucket only \
             (named collections are not indexed yet)"
        ))
    };
    match ks {
        KeyspaceRef::Bucket {
            namespace: Some(Namespace::System),
            bucket,
        } => match bucket.as_str() {
            "indexes" => Ok(Target::SystemIndexes),
            "prepareds" => Ok(Target::SystemPrepareds),
            other => Err(ServiceError::KeyspaceNotFound(format!("system:{other}"))),
        },
        KeyspaceRef::Bucket { bucket, .. } => match context(query_context) {
            // With a query context, a one-part name is a collection of its scope.
            Some((b, s)) if s == "_default" && bucket.as_str() == "_default" => {
                Ok(Target::Bucket(b.to_string()))
            }
            Some((b, s)) => Err(not_yet(format!("{b}.{s}.{}", bucket.as_str()))),
            None => Ok(Target::Bucket(bucket.as_str().to_string())),
        },
        KeyspaceRef::Collection {
            bucket,
            scope,
            collection,
            ..
        } => {
            if scope.as_str() == "_default" && collection.as_str() == "_default" {
                Ok(Target::Bucket(bucket.as_str().to_string()))
            } else {
                Err(not_yet(format!(
                    "{}.{}.{}",
                    bucket.as_str(),
                    scope.as_str(),
                    collection.as_str()
                )))
            }
        }
        KeyspaceRef::Relative { scope, collection } => match context(query_context) {
            Some((b, _)) if scope.as_str() == "_default" && collection.as_str() == "_default" => {
                Ok(Target::Bucket(b.to_string()))
            }
            Some((b, _)) => Err(not_yet(format!(
                "{b}.{}.{}",
                scope.as_str(),
                collection.as_str()
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
    fn keyspaces_resolve_to_default_collections_and_system_indexes() {
        let r = |s: &str, qc| resolve(&ks(s), qc);
        assert_eq!(
            r("SELECT * FROM system:indexes", None).unwrap(),
            Target::SystemIndexes
        );
        assert_eq!(
            r("SELECT * FROM b", None).unwrap(),
            Target::Bucket("b".into())
        );
        assert_eq!(
            r("SELECT * FROM default:b._default._default", None).unwrap(),
            Target::Bucket("b".into())
        );
        assert_eq!(
            r("SELECT * FROM _default", Some("default:`b`.`_default`")).unwrap(),
            Target::Bucket("b".into())
        );
        assert_eq!(
            r("SELECT * FROM system:nodes", None).unwrap_err().code(),
            12003
        );
        assert_eq!(r("SELECT * FROM b.s.c", None).unwrap_err().code(), 1020);
        assert_eq!(r("SELECT * FROM s.c", None).unwrap_err().code(), 12003);
    }
}
