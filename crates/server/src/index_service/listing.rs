//! The cluster's index catalog as this node last read it: every index of every bucket, with
//! the nodes that hold a copy of it. The control plane installs a new listing at each
//! change of the metadata ([`IndexService::set_listing`]); the query service plans with it
//! (an index is usable if some copy is) and scans a copy on another node when this node
//! holds none.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_cluster::NodeId;
use sluice_index::IndexDef;

use super::catalog::same_index;
use super::IndexService;

/// A node holding a copy of an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub id: NodeId,
    /// Its admin address, as this node dials it (the TLS port when the cluster encrypts
    /// its control traffic).
    pub admin: String,
    /// Its plain admin address (`host:port`), as users know the node.
    pub shown: String,
}

/// One index of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// `IndexDef::to_json` of the index (id and state are each copy's own).
    pub definition: String,
    pub deferred: bool,
    /// Copies besides the first.
    pub replicas: u8,
    /// The nodes holding a copy.
    pub holders: Vec<Holder>,
}

impl Listed {
    /// Whether node `id` holds a copy.
    pub fn held_by(&self, id: NodeId) -> bool {
        self.holders.iter().any(|h| h.id == id)
    }

    /// Node `this`'s own copy of `def` (this listed index) among `held` (its store's
    /// definitions), if the catalog places one here and it is the same index.
    pub fn own_copy<'a>(
        &self,
        this: NodeId,
        held: &'a [IndexDef],
        def: &IndexDef,
    ) -> Option<&'a IndexDef> {
        if !self.held_by(this) {
            return None;
        }
        held.iter().find(|h| same_index(h, def))
    }

    /// The holders other than node `this`.
    pub fn others(&self, this: NodeId) -> Vec<Holder> {
        self.holders
            .iter()
            .filter(|h| h.id != this)
            .cloned()
            .collect()
    }
}

/// The whole catalog, by bucket and catalog name (`sluice_cluster::catalog_name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Bumped at every install: the query service's planning caches key on it.
    pub generation: u64,
    /// This node's id in the cluster.
    pub this: NodeId,
    pub buckets: BTreeMap<String, BTreeMap<String, Listed>>,
}

impl Default for Listing {
    /// Nothing installed yet (generation 0).
    fn default() -> Listing {
        Listing {
            generation: 0,
            this: NodeId(0),
            buckets: BTreeMap::new(),
        }
    }
}

impl Listing {
    /// Index `name` (a catalog name) of `bucket`.
    pub fn get(&self, bucket: &str, name: &str) -> Option<&Listed> {
        self.buckets.get(bucket)?.get(name)
    }
}

impl IndexService {
    /// Installs the catalog as the metadata now says (a new generation if it changed).
    pub fn set_listing(&self, mut listing: Listing) {
        let mut current = self.listing.write();
        listing.generation = current.generation;
        if **current != listing {
            listing.generation += 1;
            *current = Arc::new(listing);
        }
    }

    /// The catalog as last installed.
    pub fn listing(&self) -> Arc<Listing> {
        self.listing.read().clone()
    }
}
