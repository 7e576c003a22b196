//! `apply`: one command against the state, deterministic and total.
//!
//! Each command is checked in full before anything changes, so a refused command leaves the
//! state exactly as it was, and the same command on the same state gives the same answer on
//! every replica (no clock, no randomness, ordered maps only).

use crate::cluster_map::{ClusterMap, Rev};
use crate::collections::{Manifest, ManifestError};
use crate::limits::{NODES_MAX, VBUCKETS_MAX};
use crate::metadata::command::{Applied, FailOverCommand, MetaCommand, MetaResponse, Rejection};
use crate::metadata::state::{
    BucketDef, BucketEntry, ClusterState, NodeEntry, NodeStatus, RebalanceRecord, BUCKETS_MAX,
    HOST_BYTES_MAX,
};
use crate::metadata::users::{check_user_name, UserRecord, USERS_MAX};
use crate::metadata::{indexes, xdcr};
use crate::node::{NodeId, NodeInfo};
use crate::vbmap::{Chain, MapError, VbMap};
use sluice_types::VbId;
use std::collections::{BTreeMap, BTreeSet};

/// Applies `cmd` to `state`. A refused command changes nothing and answers why.
pub fn apply(state: &mut ClusterState, cmd: &MetaCommand) -> MetaResponse {
    let response = match cmd {
        MetaCommand::AllocateNodeId => allocate_node_id(state),
        MetaCommand::AddNode { info } => add_node(state, info),
        MetaCommand::MoveNode { info } => move_node(state, info),
        MetaCommand::RemoveNode { id } => remove_node(state, *id),
        MetaCommand::DefineBucket { bucket } => define_bucket(state, bucket),
        MetaCommand::DeleteBucket { name } => delete_bucket(state, name),
        MetaCommand::SetBucketQuota { name, quota_bytes } => {
            set_bucket_quota(state, name, *quota_bytes)
        }
        MetaCommand::SetBucketReplicas { name, replicas } => {
            set_bucket_replicas(state, name, *replicas)
        }
        MetaCommand::SetBucketDurabilityMin { name, level } => {
            let changed = edit_bucket(state, name, |def| def.durability_min = *level)?;
            Ok(Applied::BucketDurabilityMinSet { changed })
        }
        MetaCommand::SetMap {
            bucket,
            expected_rev,
            nodes,
            vbmap,
        } => set_map(state, bucket, *expected_rev, nodes, vbmap),
        MetaCommand::SetChains {
            bucket,
            expected_rev,
            chains,
        } => set_chains(state, bucket, *expected_rev, chains),
        MetaCommand::FailOver(cmd) => fail_over(state, cmd),
        MetaCommand::StartRebalance { target } => start_rebalance(state, target),
        MetaCommand::FinishRebalance {} => finish_rebalance(state),
        MetaCommand::AbortRebalance => abort_rebalance(state),
        MetaCommand::PutUser { name, user } => put_user(state, name, user),
        MetaCommand::DeleteUser { name } => delete_user(state, name),
        MetaCommand::CreateScope { bucket, name } => {
            change_manifest(state, bucket, |m| m.create_scope(name))
        }
        MetaCommand::DropScope { bucket, name } => {
            change_manifest(state, bucket, |m| m.drop_scope(name)).inspect(|_| {
                if let Some(entry) = state.buckets.get_mut(bucket) {
                    indexes::drop_indexes_of(entry, name, None);
                }
            })
        }
        MetaCommand::CreateCollection {
            bucket,
            scope,
            name,
            max_ttl_s,
        } => change_manifest(state, bucket, |m| {
            m.create_collection(scope, name, *max_ttl_s)
        }),
        MetaCommand::DropCollection {
            bucket,
            scope,
            name,
        } => change_manifest(state, bucket, |m| m.drop_collection(scope, name)).inspect(|_| {
            if let Some(entry) = state.buckets.get_mut(bucket) {
                indexes::drop_indexes_of(entry, scope, Some(name));
            }
        }),
        MetaCommand::SetCollectionMaxTtl {
            bucket,
            scope,
            name,
            max_ttl_s,
        } => change_manifest(state, bucket, |m| {
            m.set_collection_max_ttl(scope, name, *max_ttl_s)
        }),
        MetaCommand::CreateIndex {
            bucket,
            name,
            index,
            on,
        } => indexes::create_index(state, bucket, name, index, on.as_deref()),
        MetaCommand::DropIndex { bucket, name } => indexes::drop_index(state, bucket, name),
        MetaCommand::BuildIndexes { bucket, names } => indexes::build_indexes(state, bucket, names),
        MetaCommand::SetClusterUuid { uuid } => xdcr::set_cluster_uuid(state, uuid),
        MetaCommand::PutRemoteCluster { remote, create } => {
            xdcr::put_remote(state, remote, *create)
        }
        MetaCommand::DeleteRemoteCluster { name } => xdcr::delete_remote(state, name),
        MetaCommand::CreateReplication { replication } => {
            xdcr::create_replication(state, replication)
        }
        MetaCommand::SetReplicationPaused { id, paused } => xdcr::set_paused(state, id, *paused),
        MetaCommand::SetReplicationSettings { id, settings } => {
            xdcr::set_settings(state, id, settings)
        }
        MetaCommand::SetReplicationFilter {
            id,
            filter,
            restream,
        } => xdcr::set_filter(state, id, filter.as_deref(), *restream),
        MetaCommand::DeleteReplication { id } => xdcr::delete_replication(state, id),
        MetaCommand::SaveXdcrCheckpoints {
            id,
            restreams,
            checkpoints,
        } => xdcr::save_checkpoints(state, id, *restreams, checkpoints),
    };
    debug_assert_eq!(state.check(), Ok(()), "applying {cmd:?} broke an invariant");
    response
}

/// A usable host, and no other node on the same host with the same KV or admin port.
fn check_address(state: &ClusterState, info: &NodeInfo) -> Result<(), Rejection> {
    if info.host.is_empty() || info.host.len() > HOST_BYTES_MAX {
        return Err(Rejection::BadHost {
            max: HOST_BYTES_MAX,
        });
    }
    let others = state
        .nodes
        .values()
        .map(|n| &n.info)
        .filter(|o| o.id != info.id);
    for other in others {
        if other.host != info.host {
            continue;
        }
        let port = if other.kv_port == info.kv_port {
            info.kv_port
        } else if other.admin_port == info.admin_port {
            info.admin_port
        } else {
            continue;
        };
        return Err(Rejection::AddressInUse {
            host: info.host.clone(),
            port,
        });
    }
    Ok(())
}

fn move_node(state: &mut ClusterState, info: &NodeInfo) -> MetaResponse {
    let id = info.id;
    let entry = state.nodes.get(&id).ok_or(Rejection::UnknownNode { id })?;
    if entry.info == *info {
        return Ok(Applied::NodeMoved { id, revs: vec![] });
    }
    if entry.info.services != info.services {
        return Err(Rejection::ServicesChanged {
            id,
            had: entry.info.services,
            asked: info.services,
        });
    }
    check_address(state, info)?;
    let mut moved = Vec::new();
    for (name, map) in state.maps() {
        if !map.nodes().iter().any(|n| n.id == id) {
            continue;
        }
        let nodes = map
            .nodes()
            .iter()
            .map(|n| if n.id == id { info.clone() } else { n.clone() })
            .collect();
        moved.push((name.to_string(), map.next(nodes, map.vbmap().clone())?));
    }
    state.nodes.get_mut(&id).expect("checked above").info = info.clone();
    let mut revs = Vec::with_capacity(moved.len());
    for (name, map) in moved {
        revs.push((name.clone(), map.rev()));
        state.buckets.get_mut(&name).expect("listed above").map = Some(map);
    }
    Ok(Applied::NodeMoved { id, revs })
}

fn allocate_node_id(state: &mut ClusterState) -> MetaResponse {
    // u32::MAX itself is never handed out, so "every id is below next_node_id" stays
    // expressible.
    let id = state.next_node_id;
    let next = id
        .checked_add(1)
        .filter(|&n| n < u32::MAX)
        .ok_or(Rejection::NodeIdsExhausted)?;
    state.next_node_id = next;
    Ok(Applied::NodeIdAllocated { id: NodeId(id) })
}

fn add_node(state: &mut ClusterState, info: &NodeInfo) -> MetaResponse {
    let id = info.id;
    if id.0 >= state.next_node_id {
        return Err(Rejection::NodeIdNotAllocated { id });
    }
    if state.retired.contains(&id) {
        return Err(Rejection::NodeIdRetired { id });
    }
    if state.nodes.contains_key(&id) {
        return Err(Rejection::NodeExists { id });
    }
    if state.nodes.len() >= NODES_MAX {
        return Err(Rejection::TooManyNodes { max: NODES_MAX });
    }
    check_address(state, info)?;
    let entry = NodeEntry {
        info: info.clone(),
        status: NodeStatus::Joining,
    };
    state.nodes.insert(id, entry);
    Ok(Applied::NodeAdded { id })
}

fn remove_node(state: &mut ClusterState, id: NodeId) -> MetaResponse {
    if !state.nodes.contains_key(&id) {
        return Err(Rejection::UnknownNode { id });
    }
    if map_lists(state, id) {
        return Err(Rejection::NodeInMap { id });
    }
    if state
        .rebalance
        .as_ref()
        .is_some_and(|r| r.target.contains(&id))
    {
        return Err(Rejection::NodeInRebalance { id });
    }
    state.nodes.remove(&id);
    state.retired.insert(id);
    super::index_placement::repair(state);
    Ok(Applied::NodeRemoved { id })
}

fn define_bucket(state: &mut ClusterState, bucket: &BucketDef) -> MetaResponse {
    bucket.validate()?;
    match state.buckets.get(&bucket.name) {
        Some(defined) if defined.def == *bucket => {
            return Ok(Applied::BucketDefined { created: false })
        }
        Some(_) => {
            return Err(Rejection::BucketExists {
                name: bucket.name.clone(),
            })
        }
        None => {}
    }
    if state.rebalance.is_some() {
        return Err(Rejection::RebalanceRunning);
    }
    if state.buckets.len() >= BUCKETS_MAX {
        return Err(Rejection::TooManyBuckets { max: BUCKETS_MAX });
    }
    let entry = BucketEntry {
        def: bucket.clone(),
        map: None,
        manifest: Manifest::new(),
        indexes: Default::default(),
    };
    state.buckets.insert(bucket.name.clone(), entry);
    Ok(Applied::BucketDefined { created: true })
}

fn delete_bucket(state: &mut ClusterState, name: &str) -> MetaResponse {
    if !state.buckets.contains_key(name) {
        return Err(Rejection::NoSuchBucket {
            name: name.to_string(),
        });
    }
    if state.rebalance.is_some() {
        return Err(Rejection::RebalanceRunning);
    }
    state.buckets.remove(name);
    xdcr::drop_replications_from(state, name);
    Ok(Applied::BucketDeleted)
}

fn set_bucket_quota(state: &mut ClusterState, name: &str, quota_bytes: u64) -> MetaResponse {
    let changed = edit_bucket(state, name, |def| def.quota_bytes = quota_bytes)?;
    Ok(Applied::BucketQuotaSet { changed })
}

fn set_bucket_replicas(state: &mut ClusterState, name: &str, replicas: u8) -> MetaResponse {
    let changed = edit_bucket(state, name, |def| def.replicas = replicas)?;
    Ok(Applied::BucketReplicasSet { changed })
}

/// Changes bucket `name`'s definition with `edit` if the result is valid: whether it
/// changed anything.
fn edit_bucket(
    state: &mut ClusterState,
    name: &str,
    edit: impl FnOnce(&mut BucketDef),
) -> Result<bool, Rejection> {
    let entry = state
        .buckets
        .get_mut(name)
        .ok_or_else(|| Rejection::NoSuchBucket {
            name: name.to_string(),
        })?;
    let mut def = entry.def.clone();
    edit(&mut def);
    def.validate()?;
    let changed = def != entry.def;
    entry.def = def;
    Ok(changed)
}

/// The name a command's bucket is filed under. Commands logged before buckets were named
/// carry an empty name, meaning the cluster's only bucket.
fn bucket_key(state: &ClusterState, name: &str) -> Result<String, Rejection> {
    let missing = || Rejection::NoSuchBucket {
        name: name.to_string(),
    };
    if name.is_empty() {
        return match state.buckets.keys().collect::<Vec<_>>()[..] {
            [only] => Ok(only.clone()),
            _ => Err(missing()),
        };
    }
    match state.buckets.contains_key(name) {
        true => Ok(name.to_string()),
        false => Err(missing()),
    }
}

fn set_map(
    state: &mut ClusterState,
    bucket: &str,
    expected_rev: Option<Rev>,
    nodes: &[NodeId],
    vbmap: &VbMap,
) -> MetaResponse {
    let key = bucket_key(state, bucket)?;
    let entry = &state.buckets[&key];
    check_rev(&key, entry.map.as_ref(), expected_rev)?;
    check_vbuckets(&entry.def, vbmap)?;
    let infos = listed_infos(state, nodes)?;
    let map = match &entry.map {
        None => ClusterMap::new(infos, vbmap.clone())?,
        Some(current) => current.next(infos, vbmap.clone())?,
    };
    let rev = map.rev();
    state.buckets.get_mut(&key).expect("found above").map = Some(map);
    if state.rebalance.is_none() {
        for id in nodes {
            if let Some(entry) = state.nodes.get_mut(id) {
                if entry.status == NodeStatus::Joining {
                    entry.status = NodeStatus::Active;
                }
            }
        }
    }
    Ok(Applied::MapSet { rev })
}

fn set_chains(
    state: &mut ClusterState,
    bucket: &str,
    expected_rev: Rev,
    changes: &[(u16, Chain)],
) -> MetaResponse {
    let max = usize::from(VBUCKETS_MAX);
    if changes.len() > max {
        return Err(Rejection::TooManyChains {
            count: changes.len(),
            max,
        });
    }
    let key = bucket_key(state, bucket)?;
    let entry = state.buckets.get_mut(&key).expect("found above");
    check_rev(&key, entry.map.as_ref(), Some(expected_rev))?;
    let current = entry
        .map
        .as_ref()
        .ok_or(Rejection::NoMapYet { name: key.clone() })?;
    let old = current.vbmap();
    let mut chains: Vec<Chain> = old.iter().map(|(_, c)| c.clone()).collect();
    for (vb, chain) in changes {
        let count = old.num_vbuckets();
        let slot = chains
            .get_mut(usize::from(*vb))
            .ok_or(MapError::UnknownVbucket {
                vb: VbId(*vb),
                count,
            })?;
        *slot = chain.clone();
    }
    let next = current.with_vbmap(VbMap::new(old.replicas(), chains)?)?;
    let rev = next.rev();
    entry.map = Some(next);
    Ok(Applied::MapSet { rev })
}

fn fail_over(state: &mut ClusterState, cmd: &FailOverCommand) -> MetaResponse {
    let nodes = &cmd.nodes;
    if nodes.is_empty() {
        return Err(Rejection::NoNodes);
    }
    let failed = distinct(nodes)?;
    for &id in nodes {
        match state.nodes.get(&id) {
            None => return Err(Rejection::UnknownNode { id }),
            Some(n) if n.status == NodeStatus::FailedOver => {
                return Err(Rejection::NodeFailedOver { id })
            }
            Some(_) => {}
        }
    }
    // Every next map is built (and so checked) before anything changes.
    let mut next: BTreeMap<String, ClusterMap> = BTreeMap::new();
    for change in &cmd.maps {
        let key = bucket_key(state, &change.bucket)?;
        let entry = &state.buckets[&key];
        if next.contains_key(&key) {
            return Err(Rejection::DuplicateBucket { name: key });
        }
        let current = entry
            .map
            .as_ref()
            .ok_or(Rejection::NoMapYet { name: key.clone() })?;
        check_rev(&key, Some(current), Some(change.expected_rev))?;
        check_vbuckets(&entry.def, &change.vbmap)?;
        let survivors = current
            .nodes()
            .iter()
            .filter(|n| !failed.contains(&n.id))
            .cloned()
            .collect();
        let map = current.next(survivors, change.vbmap.clone())?;
        next.insert(key, map);
    }
    if let Some((name, _)) = state.maps().find(|(name, _)| !next.contains_key(*name)) {
        return Err(Rejection::MissingBucketMap {
            name: name.to_string(),
        });
    }
    for id in &failed {
        if let Some(entry) = state.nodes.get_mut(id) {
            entry.status = NodeStatus::FailedOver;
        }
    }
    let mut revs = Vec::with_capacity(next.len());
    for (name, map) in next {
        revs.push((name.clone(), map.rev()));
        state.buckets.get_mut(&name).expect("found above").map = Some(map);
    }
    let rebalance_aborted = state.rebalance.take().is_some();
    super::index_placement::repair(state);
    Ok(Applied::FailedOver {
        revs,
        rebalance_aborted,
    })
}

fn start_rebalance(state: &mut ClusterState, target: &[NodeId]) -> MetaResponse {
    if state.rebalance.is_some() {
        return Err(Rejection::RebalanceRunning);
    }
    if target.is_empty() {
        return Err(Rejection::NoNodes);
    }
    distinct(target)?;
    for &id in target {
        usable(state, id)?;
    }
    state.rebalance = Some(RebalanceRecord {
        target: target.to_vec(),
    });
    Ok(Applied::RebalanceStarted)
}

fn finish_rebalance(state: &mut ClusterState) -> MetaResponse {
    let rebalance = state.rebalance.as_ref().ok_or(Rejection::NoRebalance)?;
    let target: BTreeSet<NodeId> = rebalance.target.iter().copied().collect();
    // A map's node list covers every node holding a copy (a `ClusterMap` invariant), so
    // lists inside the target mean nothing is left on the nodes about to be ejected.
    for (name, map) in state.maps() {
        if let Some(outside) = map.nodes().iter().find(|n| !target.contains(&n.id)) {
            return Err(Rejection::RebalanceIncomplete {
                bucket: name.to_string(),
                id: outside.id,
            });
        }
    }
    let ejected: Vec<NodeId> = state
        .nodes
        .keys()
        .copied()
        .filter(|id| !target.contains(id))
        .collect();
    for id in &ejected {
        state.nodes.remove(id);
        state.retired.insert(*id);
    }
    for id in &target {
        if let Some(entry) = state.nodes.get_mut(id) {
            entry.status = NodeStatus::Active;
        }
    }
    state.rebalance = None;
    super::index_placement::repair(state);
    Ok(Applied::RebalanceFinished { ejected })
}

fn abort_rebalance(state: &mut ClusterState) -> MetaResponse {
    state.rebalance.take().ok_or(Rejection::NoRebalance)?;
    Ok(Applied::RebalanceAborted)
}

/// The command was planned from bucket `bucket`'s map in force.
fn check_rev(
    bucket: &str,
    map: Option<&ClusterMap>,
    expected: Option<Rev>,
) -> Result<(), Rejection> {
    let actual = map.map(ClusterMap::rev);
    if actual == expected {
        Ok(())
    } else {
        Err(Rejection::StaleRev {
            bucket: bucket.to_string(),
            expected,
            actual,
        })
    }
}

fn check_vbuckets(bucket: &BucketDef, vbmap: &VbMap) -> Result<(), Rejection> {
    let actual = vbmap.num_vbuckets();
    if actual == bucket.vbuckets {
        Ok(())
    } else {
        Err(Rejection::VbucketCount {
            bucket: bucket.name.clone(),
            expected: bucket.vbuckets,
            actual,
        })
    }
}

/// A node that may hold copies: known and not failed over.
fn usable(state: &ClusterState, id: NodeId) -> Result<&NodeEntry, Rejection> {
    match state.nodes.get(&id) {
        None => Err(Rejection::UnknownNode { id }),
        Some(n) if n.status == NodeStatus::FailedOver => Err(Rejection::NodeFailedOver { id }),
        Some(n) => Ok(n),
    }
}

/// The node table's addresses for a map's node list, in the list's order.
fn listed_infos(state: &ClusterState, nodes: &[NodeId]) -> Result<Vec<NodeInfo>, Rejection> {
    distinct(nodes)?;
    nodes
        .iter()
        .map(|&id| usable(state, id).map(|n| n.info.clone()))
        .collect()
}

fn distinct(nodes: &[NodeId]) -> Result<BTreeSet<NodeId>, Rejection> {
    let mut seen = BTreeSet::new();
    for &id in nodes {
        if !seen.insert(id) {
            return Err(Rejection::DuplicateNode { id });
        }
    }
    Ok(seen)
}

/// Whether any bucket's map lists node `id`.
fn map_lists(state: &ClusterState, id: NodeId) -> bool {
    state
        .maps()
        .any(|(_, m)| m.nodes().iter().any(|n| n.id == id))
}

/// Changes bucket `bucket`'s collections manifest with `change` (which changes nothing when it
/// refuses): the manifest's new uid.
fn change_manifest(
    state: &mut ClusterState,
    bucket: &str,
    change: impl FnOnce(&mut Manifest) -> Result<u64, ManifestError>,
) -> MetaResponse {
    let entry = state
        .buckets
        .get_mut(bucket)
        .ok_or_else(|| Rejection::NoSuchBucket {
            name: bucket.to_string(),
        })?;
    let uid = change(&mut entry.manifest)?;
    Ok(Applied::ManifestChanged { uid })
}

fn put_user(state: &mut ClusterState, name: &str, user: &UserRecord) -> MetaResponse {
    check_user_name(name)?;
    if user.roles.is_empty() {
        return Err(Rejection::NoRoles);
    }
    let created = !state.users.contains_key(name);
    if created && state.users.len() >= USERS_MAX {
        return Err(Rejection::TooManyUsers { max: USERS_MAX });
    }
    state.users.insert(name.to_string(), user.clone());
    Ok(Applied::UserPut { created })
}

fn delete_user(state: &mut ClusterState, name: &str) -> MetaResponse {
    match state.users.remove(name) {
        Some(_) => Ok(Applied::UserDeleted),
        None => Err(Rejection::NoSuchUser {
            name: name.to_string(),
        }),
    }
}
