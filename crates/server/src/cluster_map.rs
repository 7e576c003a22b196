//! The cluster map as this node serves it: the planner's [`ClusterMap`] plus its CCCP JSON
//! rendered for this node (`thisNode`), once per revision.
//!
//! GET_CLUSTER_CONFIG, every NOT_MY_VBUCKET and the admin map endpoint answer from the
//! rendered bytes, so a busy node never re-renders a map per request. A node that is not
//! part of a cluster serves a map of itself alone: every vbucket active here, no replicas.
//!
//! The bucket JSON also carries the bucket's collections manifest uid
//! (`collectionsManifestUid`) as of the render: a manifest change renders the same revision
//! again (see `BucketHandle::install_manifest`).

use bytes::Bytes;
use sluice_cluster::cluster_map::REV_EPOCH;
use sluice_cluster::{
    place, BucketInfo, BucketKind, ClusterMap, NodeId, NodeInfo, Rev, ServingNode,
};
use sluice_engine::BucketType;
use sluice_types::MapVersion;

/// One revision of the map, rendered for this node.
#[derive(Debug)]
pub struct MapView {
    pub map: ClusterMap,
    /// This node's id in `map`.
    pub this: NodeId,
    /// The terse bucket config (GET_CLUSTER_CONFIG with a bucket, NOT_MY_VBUCKET).
    pub bucket_json: Bytes,
    /// The bucketless config (GET_CLUSTER_CONFIG before SELECT_BUCKET).
    pub global_json: Bytes,
    /// The collections manifest uid `bucket_json` shows.
    pub manifest_uid: u64,
    /// How this node was described to `render` (used when `map` does not list it), kept to
    /// render the same revision again.
    me: NodeInfo,
}

/// The bucket facts the rendered map shows.
pub struct BucketFacts<'a> {
    pub name: &'a str,
    pub uuid: &'a str,
    pub bucket_type: BucketType,
    /// The uid of the bucket's collections manifest this node serves.
    pub manifest_uid: u64,
}

impl MapView {
    /// Renders `map` for node `this`, which listens on `me`. A node the map does not list
    /// (joined, not yet rebalanced in) serves it too, adding itself as the `thisNode` entry.
    pub fn render(
        map: ClusterMap,
        this: NodeId,
        me: &NodeInfo,
        bucket: &BucketFacts<'_>,
    ) -> MapView {
        let listed = map.nodes().iter().find(|n| n.id == this).unwrap_or(me);
        let serving = ServingNode {
            host: &listed.host,
            kv_port: listed.kv_port,
            admin_port: listed.admin_port,
            services: listed.services,
        };
        let info = BucketInfo {
            name: bucket.name,
            uuid: bucket.uuid,
            kind: match bucket.bucket_type {
                BucketType::Couchbase => BucketKind::Couchbase,
                BucketType::Ephemeral => BucketKind::Ephemeral,
            },
        };
        let bucket_json =
            to_bytes(&map.terse_bucket_config_with_manifest(&info, &serving, bucket.manifest_uid));
        let global_json = to_bytes(&map.terse_global_config(&serving));
        MapView {
            map,
            this,
            bucket_json,
            global_json,
            manifest_uid: bucket.manifest_uid,
            me: me.clone(),
        }
    }

    /// How this node was described when the view was rendered.
    pub fn me(&self) -> &NodeInfo {
        &self.me
    }

    /// The version clients compare, as they send it with GET_CLUSTER_CONFIG.
    pub fn version(&self) -> MapVersion {
        let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        MapVersion {
            epoch: signed(REV_EPOCH),
            rev: signed(self.map.rev().0),
        }
    }

    pub fn rev(&self) -> Rev {
        self.map.rev()
    }

    /// Whether `other` shows exactly what this view shows, to the same node: rendering a
    /// map again need not tell anyone.
    pub fn same_rendering(&self, other: &MapView) -> bool {
        self.this == other.this
            && self.me == other.me
            && self.map == other.map
            && self.bucket_json == other.bucket_json
            && self.global_json == other.global_json
    }
}

/// The map of a node alone: every one of `vbuckets` active on it, `replicas` empty slots;
/// or, on a node that does not run the data service (waiting for its cluster's map), no
/// copy anywhere.
pub fn single_node(me: NodeInfo, replicas: u8, vbuckets: u16) -> ClusterMap {
    let vbmap = match me.runs(sluice_cluster::Service::Kv) {
        true => place(&[me.id], vbuckets, replicas).expect("one node can hold 1..=1024 vbuckets"),
        false => sluice_cluster::VbMap::new(
            replicas,
            vec![sluice_cluster::Chain::lost(replicas); usize::from(vbuckets)],
        )
        .expect("1..=1024 vbuckets of up to 3 replicas"),
    };
    ClusterMap::new(vec![me], vbmap).expect("a one-node map is valid")
}

fn to_bytes(config: &sluice_types::cccp::TerseConfig) -> Bytes {
    Bytes::from(serde_json::to_vec(config).expect("a terse config serialises"))
}
