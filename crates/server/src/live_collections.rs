//! The part of a bucket's manifest the engine needs (`sluice_engine::LiveCollections`):
//! which scopes and collections are live, and the next ids, so it can tell dropped ones
//! from ones it has not heard of yet, and record each change in its vbuckets.

use sluice_cluster::Manifest;
use sluice_engine::{CollectionEntry, LiveCollections};
use sluice_types::CollectionId;

pub fn of(manifest: &Manifest) -> LiveCollections {
    let scopes = manifest.scopes().iter().map(|s| (s.id, s.name.clone()));
    let collections = manifest.scopes().iter().flat_map(|s| {
        s.collections.iter().map(move |c| {
            let entry = CollectionEntry {
                scope: s.id,
                name: c.name.clone(),
                max_ttl_s: c.max_ttl_s,
            };
            (CollectionId(c.id), entry)
        })
    });
    LiveCollections::with_entries(
        manifest.uid(),
        scopes,
        collections,
        manifest.next_collection_id(),
        manifest.next_scope_id(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_collection_is_dropped_for_the_engine_too() {
        let mut m = Manifest::default();
        m.create_scope("s").unwrap();
        m.create_collection("s", "a", 0).unwrap();
        m.create_collection("s", "b", 60).unwrap();
        let a = CollectionId(m.collection_id("s", "a").unwrap());
        let live = of(&m);
        assert!(!live.is_dropped(a));
        assert_eq!(live.entries().count(), 3);
        m.drop_collection("s", "a").unwrap();
        let live = of(&m);
        assert!(live.is_dropped(a));
        assert_eq!(live.manifest_uid(), m.uid());
        let b = live.entries().find(|(_, e)| e.name == "b").unwrap().1;
        assert_eq!(b.max_ttl_s, 60);
    }
}
