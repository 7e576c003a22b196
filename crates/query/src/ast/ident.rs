//! Names: identifiers and keyspace references.

use std::fmt;

/// An identifier as the statement spelled it (case-sensitive; backticks removed). It may be
/// empty or contain any character: ``` `` ``` and `` `a b` `` are identifiers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ident(String);

impl Ident {
    pub fn new(name: impl Into<String>) -> Self {
        Ident(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Ident {
    /// Always backticked, so the rendering never collides with a keyword; a backtick is
    /// doubled and a backslash escaped, since Couchbase reads escapes inside backticks too.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`")?;
        for c in self.0.chars() {
            match c {
                '`' => f.write_str("``")?,
                '\\' => f.write_str("\\\\")?,
                _ => write!(f, "{c}")?,
            }
        }
        f.write_str("`")
    }
}

/// The namespaces a keyspace can be qualified with: `default:` (the data) and `system:`
/// (catalog keyspaces such as `system:indexes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Namespace {
    Default,
    System,
}

impl Namespace {
    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::Default => "default",
            Namespace::System => "system",
        }
    }
}

/// A keyspace as a statement names it. Which bucket a one- or two-part name means depends
/// on the request's `query_context`, which the planner resolves; the parser keeps the form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyspaceRef {
    /// `b`, `default:b`, `system:indexes`: a bucket's default collection, a keyspace of
    /// the query context's scope, or a system keyspace.
    Bucket {
        namespace: Option<Namespace>,
        bucket: Ident,
    },
    /// `b.s.c` or `default:b.s.c`.
    Collection {
        namespace: Option<Namespace>,
        bucket: Ident,
        scope: Ident,
        collection: Ident,
    },
    /// `s.c`: a collection of the query context's bucket. Couchbase allows no namespace here.
    Relative { scope: Ident, collection: Ident },
}

impl KeyspaceRef {
    /// The alias a FROM term gets when the statement gives none: the last path element.
    pub fn default_alias(&self) -> &Ident {
        match self {
            KeyspaceRef::Bucket { bucket, .. } => bucket,
            KeyspaceRef::Collection { collection, .. }
            | KeyspaceRef::Relative { collection, .. } => collection,
        }
    }

    pub fn namespace(&self) -> Option<Namespace> {
        match self {
            KeyspaceRef::Bucket { namespace, .. } | KeyspaceRef::Collection { namespace, .. } => {
                *namespace
            }
            KeyspaceRef::Relative { .. } => None,
        }
    }
}

impl fmt::Display for KeyspaceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ns) = self.namespace() {
            write!(f, "{}:", ns.as_str())?;
        }
        match self {
            KeyspaceRef::Bucket { bucket, .. } => write!(f, "{bucket}"),
            KeyspaceRef::Collection {
                bucket,
                scope,
                collection,
                ..
            } => write!(f, "{bucket}.{scope}.{collection}"),
            KeyspaceRef::Relative { scope, collection } => write!(f, "{scope}.{collection}"),
        }
    }
}
