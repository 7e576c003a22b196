//! Creating and dropping scopes and collections. Each operation checks everything before it
//! changes anything, so a refused one leaves the manifest exactly as it was; a successful one
//! adds 1 to the uid and answers the new uid.

use crate::collections::error::ManifestError;
use crate::collections::manifest::{
    Collection, Manifest, Scope, COLLECTIONS_PER_BUCKET_MAX, DEFAULT_NAME, MAX_TTL_S_MAX,
    SCOPES_PER_BUCKET_MAX,
};
use crate::collections::name::check_name;

impl Manifest {
    /// Creates scope `name`, empty, with the next scope id.
    pub fn create_scope(&mut self, name: &str) -> Result<u64, ManifestError> {
        check_name(name)?;
        if self.scope(name).is_some() {
            return Err(ManifestError::ScopeExists {
                scope: name.to_string(),
            });
        }
        if self.scopes.len() >= SCOPES_PER_BUCKET_MAX {
            return Err(ManifestError::TooManyScopes {
                max: SCOPES_PER_BUCKET_MAX,
            });
        }
        let id = allocate(&mut self.next_scope_id, "scope")?;
        self.scopes.push(Scope {
            name: name.to_string(),
            id,
            collections: Vec::new(),
        });
        Ok(self.changed())
    }

    /// Drops scope `name` and every collection in it. `_default` cannot be dropped.
    pub fn drop_scope(&mut self, name: &str) -> Result<u64, ManifestError> {
        if name == DEFAULT_NAME {
            return Err(ManifestError::DropDefaultScope);
        }
        let at = self.scope_index(name)?;
        self.scopes.remove(at);
        Ok(self.changed())
    }

    /// Creates collection `name` in scope `scope` with the next collection id; documents
    /// written to it live at most `max_ttl_s` seconds (0: no limit).
    pub fn create_collection(
        &mut self,
        scope: &str,
        name: &str,
        max_ttl_s: u32,
    ) -> Result<u64, ManifestError> {
        check_name(name)?;
        let at = self.scope_index(scope)?;
        let exists = self.scopes[at].collections.iter().any(|c| c.name == name);
        if exists {
            return Err(ManifestError::CollectionExists {
                scope: scope.to_string(),
                collection: name.to_string(),
            });
        }
        // `_default` exists in the `_default` scope only, from the start.
        if name == DEFAULT_NAME {
            return Err(ManifestError::NameStart {
                name: name.to_string(),
            });
        }
        if max_ttl_s > MAX_TTL_S_MAX {
            return Err(ManifestError::MaxTtl {
                max_ttl_s,
                max: MAX_TTL_S_MAX,
            });
        }
        if self.collection_count() >= COLLECTIONS_PER_BUCKET_MAX {
            return Err(ManifestError::TooManyCollections {
                max: COLLECTIONS_PER_BUCKET_MAX,
            });
        }
        let id = allocate(&mut self.next_collection_id, "collection")?;
        self.scopes[at].collections.push(Collection {
            name: name.to_string(),
            id,
            max_ttl_s,
        });
        Ok(self.changed())
    }

    /// Sets the maxTTL of collection `name` of scope `scope` (0: no limit). Documents
    /// written from then on are capped by it; those written before keep their expiry, as in
    /// Couchbase.
    pub fn set_collection_max_ttl(
        &mut self,
        scope: &str,
        name: &str,
        max_ttl_s: u32,
    ) -> Result<u64, ManifestError> {
        if max_ttl_s > MAX_TTL_S_MAX {
            return Err(ManifestError::MaxTtl {
                max_ttl_s,
                max: MAX_TTL_S_MAX,
            });
        }
        let at = self.scope_index(scope)?;
        let Some(c) = self.scopes[at]
            .collections
            .iter_mut()
            .find(|c| c.name == name)
        else {
            return Err(ManifestError::CollectionNotFound {
                scope: scope.to_string(),
                collection: name.to_string(),
            });
        };
        c.max_ttl_s = max_ttl_s;
        Ok(self.changed())
    }

    /// Drops collection `name` of scope `scope`. `_default._default` cannot be dropped (a
    /// deviation from Couchbase: see the module comment).
    pub fn drop_collection(&mut self, scope: &str, name: &str) -> Result<u64, ManifestError> {
        let at = self.scope_index(scope)?;
        if scope == DEFAULT_NAME && name == DEFAULT_NAME {
            return Err(ManifestError::DropDefaultCollection);
        }
        let collections = &mut self.scopes[at].collections;
        let Some(c) = collections.iter().position(|c| c.name == name) else {
            return Err(ManifestError::CollectionNotFound {
                scope: scope.to_string(),
                collection: name.to_string(),
            });
        };
        collections.remove(c);
        Ok(self.changed())
    }

    /// Where scope `name` is in `scopes`.
    fn scope_index(&self, name: &str) -> Result<usize, ManifestError> {
        self.scopes
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| ManifestError::ScopeNotFound {
                scope: name.to_string(),
            })
    }

    /// Records a change: the index follows the scopes, and the uid moves on.
    fn changed(&mut self) -> u64 {
        self.reindex();
        // A u64 of changes never runs out; overflow would be a bug.
        self.uid = self.uid.checked_add(1).expect("manifest uid overflow");
        self.uid
    }
}

/// Hands out the id `next` holds and moves it on. `u32::MAX` itself is never handed out, so
/// "every id handed out is below the counter" always holds.
fn allocate(next: &mut u32, what: &str) -> Result<u32, ManifestError> {
    let id = *next;
    let after =
        id.checked_add(1)
            .filter(|&n| n < u32::MAX)
            .ok_or_else(|| ManifestError::IdsExhausted {
                what: what.to_string(),
            })?;
    *next = after;
    Ok(id)
}
