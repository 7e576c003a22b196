//! Cross-cluster replication in the replicated metadata: the cluster's own uuid (how other
//! clusters tell it apart), the references to remote clusters, and the replications from
//! this cluster's buckets to theirs. Any node can fail without losing them, and every node's
//! pipeline (`sluice-manager`'s `xdcr`) follows them.
//!
//! - A remote cluster reference is named by the user and keeps what a pipeline needs to
//!   reach the remote: an admin address, credentials, and the remote's uuid (learned when the
//!   reference was checked against the remote, before it was proposed). The password is
//!   kept as given: the pipeline logs in with it, so it cannot be a verifier.
//! - A replication is named, as in Couchbase, `REMOTE_UUID/FROM_BUCKET/TO_BUCKET`: one
//!   replication per pair of buckets and remote cluster.
//! - A reference that replications use cannot be deleted, nor pointed at another cluster;
//!   deleting a bucket deletes the replications from it.
//! - Each replication's checkpoints (per vbucket: the stream position up to which every
//!   change reached the target) are kept here too, as the pipelines report them every few
//!   seconds: a vbucket that moves to another node (failover, rebalance) resumes from its
//!   last reported checkpoint there, not from zero.

use crate::metadata::command::{Applied, MetaResponse, Rejection};
use crate::metadata::state::ClusterState;
use serde::{Deserialize, Serialize};

/// Longest remote cluster name, in bytes.
pub const REMOTE_NAME_BYTES_MAX: usize = 255;
/// Longest remote `host:port`.
pub const REMOTE_HOSTNAME_BYTES_MAX: usize = 262;
/// Longest credential (user name or password) kept for a remote.
pub const REMOTE_CREDENTIAL_BYTES_MAX: usize = 256;
/// Largest CA certificate bundle kept for a remote, in PEM bytes.
pub const REMOTE_CA_BYTES_MAX: usize = 64 << 10;
/// Longest cluster uuid.
pub const CLUSTER_UUID_BYTES_MAX: usize = 64;
/// Most remote cluster references one cluster keeps.
pub const REMOTES_MAX: usize = 64;
/// Most replications one cluster runs: each is a DCP connection per node.
pub const REPLICATIONS_MAX: usize = 128;
/// Longest filter expression (as `sluice_query::xdcr_filter` accepts).
pub const FILTER_BYTES_MAX: usize = 4096;
/// Couchbase's default `optimisticReplicationThreshold`: larger documents are pre-checked
/// with GET_META before they are sent.
pub const OPTIMISTIC_THRESHOLD_DEFAULT: u32 = 256;
/// Couchbase's largest `optimisticReplicationThreshold` (20 MiB, the largest document).
pub const OPTIMISTIC_THRESHOLD_MAX: u32 = 20 << 20;

/// A reference to another cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteCluster {
    pub name: String,
    /// The remote cluster's uuid, as its `GET /pools` gave it.
    pub uuid: String,
    /// `host:port` of one of the remote's admin ports; the pipeline learns the others (and
    /// the KV ports) from the remote's map.
    pub hostname: String,
    pub username: String,
    /// Sent to the remote at every login; never shown by this cluster's REST.
    pub password: String,
    /// The CA (PEM) the remote's certificates chain to. With it, the remote is reached over
    /// TLS only (Couchbase's `secureType=full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
}

/// A replication from one of this cluster's buckets to a remote cluster's bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationDef {
    /// `REMOTE_UUID/FROM_BUCKET/TO_BUCKET` ([`replication_id`]).
    pub id: String,
    pub from_bucket: String,
    /// The remote cluster reference's name.
    pub to_cluster: String,
    pub to_bucket: String,
    /// Only the changes this filter (`sluice_query::xdcr_filter`: an expression, or a
    /// regular expression on the key) accepts are replicated. `None`: every change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_expression: Option<String>,
    /// A paused replication keeps its checkpoints; resumed, it goes on from them.
    #[serde(default)]
    pub paused: bool,
    /// Times its filter changed with a re-stream (`SetReplicationFilter`): checkpoints
    /// made under another count are void, so every vbucket streams again from zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restreams: u64,
    #[serde(flatten)]
    pub settings: ReplicationSettings,
}

/// The settings a replication's owner may change while it runs (Couchbase's names in the
/// REST). Each defaults as Couchbase's does, so definitions stored before they existed read
/// as they behaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationSettings {
    /// Deletions are not sent (`filterDeletion`).
    #[serde(default)]
    pub filter_deletion: bool,
    /// Expirations are not sent (`filterExpiration`).
    #[serde(default)]
    pub filter_expiration: bool,
    /// Documents reach the target without their expiry (`filterBypassExpiry`).
    #[serde(default)]
    pub bypass_expiry: bool,
    /// Documents larger than this many bytes are pre-checked with GET_META
    /// (`optimisticReplicationThreshold`).
    #[serde(default = "default_threshold")]
    pub optimistic_threshold: u32,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn default_threshold() -> u32 {
    OPTIMISTIC_THRESHOLD_DEFAULT
}

impl Default for ReplicationSettings {
    fn default() -> Self {
        ReplicationSettings {
            filter_deletion: false,
            filter_expiration: false,
            bypass_expiry: false,
            optimistic_threshold: OPTIMISTIC_THRESHOLD_DEFAULT,
        }
    }
}

impl ReplicationSettings {
    pub fn validate(&self) -> Result<(), Rejection> {
        if self.optimistic_threshold > OPTIMISTIC_THRESHOLD_MAX {
            return Err(Rejection::BadReplication {
                reason: format!(
                    "optimisticReplicationThreshold is at most {OPTIMISTIC_THRESHOLD_MAX} bytes"
                ),
            });
        }
        Ok(())
    }
}

/// Where one vbucket's stream resumes: every change up to `seqno` (of the history
/// `vb_uuid` names, inside the snapshot `snap_start..=snap_end`) reached the target, whose
/// answers to those writes named `targets` (the newest per target vbucket): a resume checks
/// the target still has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdcrCheckpoint {
    pub vb: u16,
    pub vb_uuid: u64,
    pub seqno: u64,
    pub snap_start: u64,
    pub snap_end: u64,
    /// Sorted by target vbucket, one entry each; at most `VBUCKETS_MAX`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<XdcrTargetAck>,
}

/// The target's answer to the newest write of a checkpoint to one target vbucket: the
/// history (`uuid`) and `seqno` it was stored at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdcrTargetAck {
    pub vb: u16,
    pub uuid: u64,
    pub seqno: u64,
}

/// The id of the replication of `from` to bucket `to` of the cluster with uuid `remote_uuid`.
pub fn replication_id(remote_uuid: &str, from: &str, to: &str) -> String {
    format!("{remote_uuid}/{from}/{to}")
}

fn bad_remote(reason: &'static str) -> Rejection {
    Rejection::BadRemote {
        reason: reason.to_string(),
    }
}

fn is_uuid(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-';
    !s.is_empty() && s.len() <= CLUSTER_UUID_BYTES_MAX && s.chars().all(ok)
}

impl RemoteCluster {
    /// Checks the reference's syntax and limits (not whether the remote answers: that is
    /// the proposer's job, before it proposes).
    pub fn validate(&self) -> Result<(), Rejection> {
        let printable = |s: &str| !s.chars().any(char::is_control);
        if self.name.is_empty()
            || self.name.len() > REMOTE_NAME_BYTES_MAX
            || !printable(&self.name)
            || self.name.contains('/')
        {
            return Err(bad_remote(
                "a name is 1 to 255 printable bytes, without '/'",
            ));
        }
        if !is_uuid(&self.uuid) {
            return Err(bad_remote("the remote's uuid is not a uuid"));
        }
        let host_ok = !self.hostname.is_empty()
            && self.hostname.len() <= REMOTE_HOSTNAME_BYTES_MAX
            && printable(&self.hostname)
            && !self.hostname.contains('/');
        if !host_ok {
            return Err(bad_remote("a hostname is host or host:port"));
        }
        if self.username.is_empty()
            || self.username.len() > REMOTE_CREDENTIAL_BYTES_MAX
            || self.password.len() > REMOTE_CREDENTIAL_BYTES_MAX
        {
            return Err(bad_remote(
                "a user name is 1 to 256 bytes, a password at most 256",
            ));
        }
        if self
            .ca_pem
            .as_ref()
            .is_some_and(|ca| ca.len() > REMOTE_CA_BYTES_MAX)
        {
            return Err(bad_remote("a CA bundle is at most 64 KiB"));
        }
        Ok(())
    }
}

impl ReplicationDef {
    pub fn validate(&self, remote: &RemoteCluster) -> Result<(), Rejection> {
        let expected = replication_id(&remote.uuid, &self.from_bucket, &self.to_bucket);
        if self.id != expected {
            return Err(Rejection::BadReplication {
                reason: format!("its id must be {expected}"),
            });
        }
        if self.to_bucket.is_empty() || self.to_bucket.contains('/') {
            return Err(Rejection::BadReplication {
                reason: "the target bucket's name is empty or holds '/'".into(),
            });
        }
        check_filter(self.filter_expression.as_deref())?;
        self.settings.validate()
    }
}

fn check_filter(filter: Option<&str>) -> Result<(), Rejection> {
    if filter.is_some_and(|f| f.len() > FILTER_BYTES_MAX) {
        return Err(Rejection::BadReplication {
            reason: format!("a filter expression is at most {FILTER_BYTES_MAX} bytes"),
        });
    }
    Ok(())
}

/// `SetClusterUuid`: the first uuid proposed is the cluster's for good; later ones change
/// nothing (`set: false`), so every node may propose one when it finds none.
pub(crate) fn set_cluster_uuid(state: &mut ClusterState, uuid: &str) -> MetaResponse {
    if !is_uuid(uuid) {
        return Err(bad_remote(
            "a cluster uuid is 1 to 64 letters, digits or '-'",
        ));
    }
    if !state.uuid.is_empty() {
        return Ok(Applied::ClusterUuidSet { set: false });
    }
    state.uuid = uuid.to_string();
    Ok(Applied::ClusterUuidSet { set: true })
}

/// `PutRemoteCluster`: creates the reference (`create`, refused if the name is taken) or
/// replaces it (refused if there is none, or if replications use it and it would now
/// name another cluster).
pub(crate) fn put_remote(
    state: &mut ClusterState,
    remote: &RemoteCluster,
    create: bool,
) -> MetaResponse {
    remote.validate()?;
    if remote.uuid == state.uuid {
        return Err(bad_remote("that is this cluster"));
    }
    match (state.remotes.get(&remote.name), create) {
        (Some(_), true) => {
            return Err(Rejection::RemoteExists {
                name: remote.name.clone(),
            })
        }
        (None, false) => {
            return Err(Rejection::NoSuchRemote {
                name: remote.name.clone(),
            })
        }
        (Some(old), false) if old.uuid != remote.uuid => {
            let users = replications_to(state, &remote.name);
            if !users.is_empty() {
                return Err(Rejection::RemoteInUse {
                    name: remote.name.clone(),
                    replications: users,
                });
            }
        }
        _ => {}
    }
    if create && state.remotes.len() >= REMOTES_MAX {
        return Err(Rejection::TooManyRemotes { max: REMOTES_MAX });
    }
    state.remotes.insert(remote.name.clone(), remote.clone());
    Ok(Applied::XdcrChanged)
}

fn replications_to(state: &ClusterState, remote: &str) -> Vec<String> {
    state
        .replications
        .values()
        .filter(|r| r.to_cluster == remote)
        .map(|r| r.id.clone())
        .collect()
}

pub(crate) fn delete_remote(state: &mut ClusterState, name: &str) -> MetaResponse {
    if !state.remotes.contains_key(name) {
        return Err(Rejection::NoSuchRemote {
            name: name.to_string(),
        });
    }
    let users = replications_to(state, name);
    if !users.is_empty() {
        return Err(Rejection::RemoteInUse {
            name: name.to_string(),
            replications: users,
        });
    }
    state.remotes.remove(name);
    Ok(Applied::XdcrChanged)
}

pub(crate) fn create_replication(state: &mut ClusterState, def: &ReplicationDef) -> MetaResponse {
    let Some(remote) = state.remotes.get(&def.to_cluster) else {
        return Err(Rejection::NoSuchRemote {
            name: def.to_cluster.clone(),
        });
    };
    def.validate(remote)?;
    if !state.buckets.contains_key(&def.from_bucket) {
        return Err(Rejection::NoSuchBucket {
            name: def.from_bucket.clone(),
        });
    }
    if state.replications.contains_key(&def.id) {
        return Err(Rejection::ReplicationExists { id: def.id.clone() });
    }
    if state.replications.len() >= REPLICATIONS_MAX {
        return Err(Rejection::TooManyReplications {
            max: REPLICATIONS_MAX,
        });
    }
    state.replications.insert(def.id.clone(), def.clone());
    Ok(Applied::XdcrChanged)
}

fn replication_mut<'s>(
    state: &'s mut ClusterState,
    id: &str,
) -> Result<&'s mut ReplicationDef, Rejection> {
    state
        .replications
        .get_mut(id)
        .ok_or_else(|| Rejection::NoSuchReplication { id: id.to_string() })
}

/// `SetReplicationPaused`; pausing a paused replication changes nothing.
pub(crate) fn set_paused(state: &mut ClusterState, id: &str, paused: bool) -> MetaResponse {
    replication_mut(state, id)?.paused = paused;
    Ok(Applied::XdcrChanged)
}

pub(crate) fn set_settings(
    state: &mut ClusterState,
    id: &str,
    settings: &ReplicationSettings,
) -> MetaResponse {
    settings.validate()?;
    replication_mut(state, id)?.settings = *settings;
    Ok(Applied::XdcrChanged)
}

/// `SetReplicationFilter`: a new filter (`None`: every change). With `restream`, the
/// replication's checkpoints are void (here, and on every node: `restreams` counts up), so
/// its pipelines stream every vbucket from zero and the changes the old filter kept back
/// that the new one lets through reach the target; without, they go on from their
/// checkpoints and the new filter applies to later changes only (Couchbase's
/// `filterSkipRestream`).
pub(crate) fn set_filter(
    state: &mut ClusterState,
    id: &str,
    filter: Option<&str>,
    restream: bool,
) -> MetaResponse {
    check_filter(filter)?;
    let def = replication_mut(state, id)?;
    def.filter_expression = filter.map(String::from);
    if restream {
        def.restreams += 1;
        state.xdcr_checkpoints.remove(id);
    }
    Ok(Applied::XdcrChanged)
}

pub(crate) fn delete_replication(state: &mut ClusterState, id: &str) -> MetaResponse {
    replication_mut(state, id)?;
    state.replications.remove(id);
    state.xdcr_checkpoints.remove(id);
    Ok(Applied::XdcrChanged)
}

/// `SaveXdcrCheckpoints`: each vbucket's checkpoint replaced by the one reported (the last
/// report wins: a vbucket streams from one node at a time, and a late report from the node
/// it left only makes the next owner resend changes, which the target refuses as identical).
/// A report made before the last re-stream (`restreams`) is refused: its checkpoints are void.
pub(crate) fn save_checkpoints(
    state: &mut ClusterState,
    id: &str,
    restreams: u64,
    checkpoints: &[XdcrCheckpoint],
) -> MetaResponse {
    let def = state
        .replications
        .get(id)
        .ok_or_else(|| Rejection::NoSuchReplication { id: id.to_string() })?;
    if def.restreams != restreams {
        return Err(Rejection::BadReplication {
            reason: format!(
                "checkpoints made before re-stream {} of the replication (they are of {restreams})",
                def.restreams
            ),
        });
    }
    let vbuckets = state.bucket(&def.from_bucket).map_or(0, |b| b.vbuckets);
    if let Some(bad) = checkpoints.iter().find(|c| c.vb >= vbuckets) {
        return Err(Rejection::BadReplication {
            reason: format!(
                "a checkpoint names vbucket {}; the bucket has {vbuckets}",
                bad.vb
            ),
        });
    }
    let ordered = |t: &[XdcrTargetAck]| {
        t.len() <= usize::from(crate::limits::VBUCKETS_MAX)
            && t.windows(2).all(|w| w[0].vb < w[1].vb)
    };
    if let Some(bad) = checkpoints.iter().find(|c| !ordered(&c.targets)) {
        return Err(Rejection::BadReplication {
            reason: format!(
                "the checkpoint of vbucket {} names {} target vbuckets, not sorted, repeated or \
                 too many",
                bad.vb,
                bad.targets.len()
            ),
        });
    }
    let saved = state.xdcr_checkpoints.entry(id.to_string()).or_default();
    saved.extend(checkpoints.iter().map(|c| (c.vb, c.clone())));
    Ok(Applied::XdcrChanged)
}

/// A deleted bucket's replications go with it.
pub(crate) fn drop_replications_from(state: &mut ClusterState, bucket: &str) {
    state.replications.retain(|_, r| r.from_bucket != bucket);
    let kept = &state.replications;
    state.xdcr_checkpoints.retain(|id, _| kept.contains_key(id));
}

/// The invariants: every replication names a known remote and bucket, under its own id.
pub(crate) fn check(state: &ClusterState) -> Result<(), String> {
    if !state.uuid.is_empty() && !is_uuid(&state.uuid) {
        return Err(format!("the cluster uuid {:?} is not a uuid", state.uuid));
    }
    for (name, remote) in &state.remotes {
        if *name != remote.name {
            return Err(format!("remote {name:?} is filed under another name"));
        }
        remote.validate().map_err(|e| e.to_string())?;
    }
    for (id, r) in &state.replications {
        let Some(remote) = state.remotes.get(&r.to_cluster) else {
            return Err(format!("replication {id} names no known remote"));
        };
        if *id != r.id {
            return Err(format!("replication {id} is filed under another id"));
        }
        r.validate(remote).map_err(|e| e.to_string())?;
        if !state.buckets.contains_key(&r.from_bucket) {
            return Err(format!("replication {id} is from no known bucket"));
        }
    }
    if let Some(id) = state
        .xdcr_checkpoints
        .keys()
        .find(|id| !state.replications.contains_key(*id))
    {
        return Err(format!("checkpoints of {id}, which is no replication"));
    }
    Ok(())
}
