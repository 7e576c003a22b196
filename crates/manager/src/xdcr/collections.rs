//! Which target collection a source change goes to: Couchbase's implicit mapping, by name.
//! A change of the source's collection `scope.collection` (named by its id in the stream)
//! goes to the target bucket's collection of the same names, whatever its id there. Pure:
//! manifests in, routes out.

use serde_json::Value;
use sluice_cluster::collections::Manifest;
use std::collections::HashMap;

/// A collection's scope and name.
pub type Path = (String, String);

/// Where a source change goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// To the target's collection with this id.
    To(u32),
    /// The source's manifest does not know the collection (dropped, or newer than the
    /// manifest the pipeline holds).
    UnknownAtSource(u32),
    /// The target has no collection of that scope and name.
    MissingAtTarget(Path),
}

/// The collections of both sides, by what the routing looks up.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    source: HashMap<u32, Path>,
    target: HashMap<Path, u32>,
}

/// A target manifest (`GET /pools/default/buckets/B/scopes`) that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable collections manifest: {0}")]
pub struct ManifestJsonError(&'static str);

impl Routes {
    pub fn new(source: &Manifest, target: HashMap<Path, u32>) -> Routes {
        let mut routes = Routes {
            source: HashMap::new(),
            target,
        };
        routes.set_source(source);
        routes
    }

    /// The source's collections, from its manifest (again, once it changed).
    pub fn set_source(&mut self, manifest: &Manifest) {
        self.source = manifest
            .scopes()
            .iter()
            .flat_map(|s| {
                s.collections
                    .iter()
                    .map(|c| (c.id, (s.name.clone(), c.name.clone())))
            })
            .collect();
    }

    pub fn set_target(&mut self, target: HashMap<Path, u32>) {
        self.target = target;
    }

    pub fn route(&self, source_cid: u32) -> Route {
        let Some(path) = self.source.get(&source_cid) else {
            return Route::UnknownAtSource(source_cid);
        };
        match self.target.get(path) {
            Some(&cid) => Route::To(cid),
            None => Route::MissingAtTarget(path.clone()),
        }
    }
}

/// The target's collections from its manifest as Couchbase's REST gives it: `{"scopes":
/// [{"name", "collections": [{"name", "uid": "<hex>"}]}]}`.
pub fn parse_manifest(json: &Value) -> Result<HashMap<Path, u32>, ManifestJsonError> {
    let scopes = json["scopes"]
        .as_array()
        .ok_or(ManifestJsonError("no scopes"))?;
    let mut out = HashMap::new();
    for s in scopes {
        let scope = s["name"]
            .as_str()
            .ok_or(ManifestJsonError("a scope without a name"))?;
        let collections = s["collections"]
            .as_array()
            .ok_or(ManifestJsonError("a scope without collections"))?;
        for c in collections {
            let name = c["name"]
                .as_str()
                .ok_or(ManifestJsonError("a collection without a name"))?;
            let uid = c["uid"]
                .as_str()
                .and_then(|u| u32::from_str_radix(u, 16).ok())
                .ok_or(ManifestJsonError("a collection without a hex uid"))?;
            out.insert((scope.to_string(), name.to_string()), uid);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(collections: &[(&str, &str)]) -> Manifest {
        let mut m = Manifest::new();
        for (scope, name) in collections {
            if m.scope(scope).is_none() {
                m.create_scope(scope).unwrap();
            }
            m.create_collection(scope, name, 0).unwrap();
        }
        m
    }

    #[test]
    fn changes_go_to_the_collection_of_the_same_names_whatever_its_id() {
        // The source made `inv.hotel` before `inv.air`, the target the other way round.
        let source = manifest(&[("inv", "hotel"), ("inv", "air"), ("app", "only_here")]);
        let target = manifest(&[("inv", "air"), ("inv", "hotel")]);
        let routes = Routes::new(&source, parse_manifest(&target.to_json()).unwrap());
        let id = |m: &Manifest, s: &str, c: &str| m.collection_id(s, c).unwrap();
        assert_eq!(routes.route(0), Route::To(0), "the default collection");
        let hotel = routes.route(id(&source, "inv", "hotel"));
        assert_eq!(hotel, Route::To(id(&target, "inv", "hotel")));
        assert_ne!(id(&source, "inv", "hotel"), id(&target, "inv", "hotel"));
        let only = routes.route(id(&source, "app", "only_here"));
        assert_eq!(
            only,
            Route::MissingAtTarget(("app".into(), "only_here".into()))
        );
        assert_eq!(routes.route(999), Route::UnknownAtSource(999));
    }

    #[test]
    fn a_manifest_that_cannot_be_read_says_why() {
        let bad = serde_json::json!({"scopes": [{"name": "s", "collections": [{"name": "c", "uid": "zz"}]}]});
        assert!(parse_manifest(&bad).is_err());
        assert!(parse_manifest(&serde_json::json!({})).is_err());
    }
}
