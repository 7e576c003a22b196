//! This node's place in the cluster: its node id and its meta node (the replicated cluster
//! metadata), and how it got them.
//!
//! ```text
//!  data dir has node.json ─────────────► restart: meta node with that id; it recovers the
//!                                        membership and state from its own log
//!  no node.json, no --join ────────────► a new cluster: node 0, a Raft group of one, the
//!                                        bucket defined and placed on it (replicas from
//!                                        --replicas, left empty until nodes join)
//!  no node.json, --join MEMBER ────────► ask MEMBER for an id (node.json written at once, so
//!                                        a crash resumes here), start the meta node, ask
//!                                        MEMBER to admit it; it then follows the cluster
//! ```
//!
//! Every step is idempotent, so a node that stops half way finishes on its next start. The
//! node then serves the map the replicated state holds (`follow_map`); a node the map does not
//! list (joined, not rebalanced in yet) holds no vbucket.

use crate::membership_error::MembershipError;
use serde::{Deserialize, Serialize};
use sluice_cluster::metadata::{BucketDef, ClusterState, MetaCommand};
use sluice_cluster::{place, BucketKind, NodeId, NodeInfo};
use sluice_engine::BucketType;
use sluice_meta::{MetaConfig, MetaNode};
use sluice_server::Node;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long one join step (or the first proposals of a new cluster) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a starting node waits for the replicated state to hold the bucket's map.
const MAP_WAIT: Duration = Duration::from_secs(60);

/// Kept in `<data-dir>/node.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Identity {
    node_id: NodeId,
    /// Whether the cluster admitted this node (a joiner writes its id before being admitted).
    admitted: bool,
}

/// How this start goes, decided before the meta node starts.
pub enum Plan {
    Restart(NodeId),
    NewCluster,
    /// Joining through the member at this admin address, with the id it gave.
    Join {
        member: String,
        id: NodeId,
    },
}

fn identity_path(data_dir: &Path) -> PathBuf {
    data_dir.join("node.json")
}

fn read_identity(data_dir: &Path) -> Result<Option<Identity>, MembershipError> {
    let path = identity_path(data_dir);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|source| MembershipError::Io {
        what: "reading",
        path: path.clone(),
        source,
    })?;
    let id =
        serde_json::from_str(&text).map_err(|source| MembershipError::Identity { path, source })?;
    Ok(Some(id))
}

fn write_identity(data_dir: &Path, id: &Identity) -> Result<(), MembershipError> {
    let path = identity_path(data_dir);
    let tmp = data_dir.join("node.json.tmp");
    let bytes = serde_json::to_vec_pretty(id).map_err(|source| MembershipError::Identity {
        path: path.clone(),
        source,
    })?;
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| MembershipError::Io {
            what: "writing",
            path,
            source,
        })
}

/// Decides how this node starts; a joiner gets its id from the member here.
pub async fn plan(node: &Node) -> Result<Plan, MembershipError> {
    let cfg = &node.config;
    match (read_identity(&cfg.data_dir)?, &cfg.join) {
        (Some(id), _) if id.admitted => Ok(Plan::Restart(id.node_id)),
        (Some(id), Some(member)) => Ok(Plan::Join {
            member: member.clone(),
            id: id.node_id,
        }),
        (Some(id), None) if id.node_id == NodeId(0) => Ok(Plan::NewCluster),
        (Some(id), None) => Err(MembershipError::UnfinishedJoin {
            data_dir: cfg.data_dir.clone(),
            id: id.node_id,
        }),
        (None, None) => Ok(Plan::NewCluster),
        (None, Some(member)) => {
            // Its vbuckets would be taken as copies of the cluster's without being copies.
            if node.holds_data() {
                return Err(MembershipError::HoldsData {
                    data_dir: cfg.data_dir.clone(),
                });
            }
            let id = sluice_meta::join::allocate_node_id(member, STEP_TIMEOUT)
                .await
                .map_err(|source| MembershipError::AllocateId {
                    member: member.clone(),
                    source,
                })?;
            write_identity(
                &cfg.data_dir,
                &Identity {
                    node_id: id,
                    admitted: false,
                },
            )?;
            tracing::info!(%member, node = %id, "joining the cluster");
            Ok(Plan::Join {
                member: member.clone(),
                id,
            })
        }
    }
}

impl Plan {
    pub fn node_id(&self) -> NodeId {
        match self {
            Plan::Restart(id) | Plan::Join { id, .. } => *id,
            Plan::NewCluster => NodeId(0),
        }
    }
}

/// Starts this node's meta node (its Raft routes must be served on the admin address before
/// [`complete`] runs).
pub async fn start_meta(node: &Node, plan: &Plan) -> Result<MetaNode, MembershipError> {
    let admin_addr = format!("{}:{}", node.config.advertise_host, node.admin_port());
    let mut config = MetaConfig::new(
        plan.node_id(),
        admin_addr,
        node.config.data_dir.join("meta"),
    );
    config.source_ip = node.config.source_ip;
    MetaNode::start(config)
        .await
        .map_err(|source| MembershipError::Meta {
            what: "starting the cluster metadata (meta) node",
            source,
        })
}

/// Finishes what `plan` started: creates the cluster or gets admitted, then waits until the
/// replicated state holds the bucket's map.
pub async fn complete(node: &Node, meta: &MetaNode, plan: &Plan) -> Result<(), MembershipError> {
    let me = node.node_info(plan.node_id());
    match plan {
        Plan::Restart(id) => {
            let listed = meta.state().borrow().node(*id).map(|e| e.info.clone());
            if let Some(listed) = listed.filter(|l| *l != me) {
                move_node(meta, listed, me.clone()).await?;
            }
        }
        Plan::NewCluster => create_cluster(node, meta, me).await?,
        Plan::Join { member, id } => {
            sluice_meta::join::admit(member, me, STEP_TIMEOUT)
                .await
                .map_err(|source| MembershipError::Admit {
                    member: member.clone(),
                    id: *id,
                    source,
                })?;
            write_identity(
                &node.config.data_dir,
                &Identity {
                    node_id: *id,
                    admitted: true,
                },
            )?;
            tracing::info!(%member, node = %id, "joined the cluster");
        }
    }
    let mut state = meta.state();
    let waited = tokio::time::timeout(MAP_WAIT, state.wait_for(|s| s.map().is_some())).await;
    match waited {
        Ok(Ok(_)) => Ok(()),
        _ => Err(MembershipError::NoMap(MAP_WAIT)),
    }
}

/// A new cluster of one: node 0 with the bucket placed on it. Each step is skipped if the
/// state already shows it (a restart after a crash half way).
async fn create_cluster(node: &Node, meta: &MetaNode, me: NodeInfo) -> Result<(), MembershipError> {
    meta.initialize_single()
        .await
        .map_err(|source| MembershipError::Meta {
            what: "starting a cluster of one",
            source,
        })?;
    let cfg = &node.config;
    let state = || meta.state().borrow().clone();
    if state().next_node_id() == NodeId(0) {
        expect_applied(meta, "allocating node 0", MetaCommand::AllocateNodeId).await?;
    }
    if state().node(me.id).is_none() {
        let add = MetaCommand::AddNode { info: me.clone() };
        expect_applied(meta, "adding node 0", add).await?;
    }
    if state().bucket().is_none() {
        let bucket = BucketDef {
            name: cfg.bucket.clone(),
            uuid: node.bucket_uuid.clone(),
            kind: match cfg.bucket_type {
                BucketType::Couchbase => BucketKind::Couchbase,
                BucketType::Ephemeral => BucketKind::Ephemeral,
            },
            replicas: cfg.replicas,
            vbuckets: cfg.vbuckets,
            quota_bytes: cfg.memory_quota_mb * 1024 * 1024,
        };
        let define = MetaCommand::DefineBucket { bucket };
        expect_applied(meta, "defining the bucket", define).await?;
    }
    if state().map().is_none() {
        let vbmap = place(&[me.id], cfg.vbuckets, cfg.replicas)?;
        let cmd = MetaCommand::SetMap {
            expected_rev: None,
            nodes: vec![me.id],
            vbmap,
        };
        expect_applied(meta, "placing the bucket", cmd).await?;
    }
    write_identity(
        &cfg.data_dir,
        &Identity {
            node_id: me.id,
            admitted: true,
        },
    )?;
    tracing::info!(node = %me.id, "created a new cluster");
    Ok(())
}

/// This node restarted on other ports: peers must reach its Raft routes at the new admin
/// address, and the map must list the new KV port. Needs a majority of the voters (on one
/// node, itself).
async fn move_node(meta: &MetaNode, listed: NodeInfo, me: NodeInfo) -> Result<(), MembershipError> {
    tracing::info!(node = %me.id, from = ?listed, to = ?me, "this node moved to other ports");
    let admin_addr = format!("{}:{}", me.host, me.admin_port);
    meta.add_node(me.id, &admin_addr)
        .await
        .map_err(|source| MembershipError::Meta {
            what: "recording this node's new admin address with the cluster",
            source,
        })?;
    let moved = MetaCommand::MoveNode { info: me };
    expect_applied(meta, "recording this node's new address", moved).await?;
    Ok(())
}

/// Proposes `cmd` (`what` it does, for the error) and fails if the cluster refuses it.
async fn expect_applied(
    meta: &MetaNode,
    what: &'static str,
    cmd: MetaCommand,
) -> Result<(), MembershipError> {
    match meta.propose(cmd).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(rejection)) => Err(MembershipError::Refused { what, rejection }),
        Err(source) => Err(MembershipError::Meta { what, source }),
    }
}

/// Serves every map the replicated state publishes, as node `id`. Runs until the meta node
/// stops.
pub async fn follow_map(node: Arc<Node>, meta: MetaNode) {
    let id = meta.id();
    let mut states = meta.state();
    loop {
        let state: Arc<ClusterState> = states.borrow_and_update().clone();
        if let Some(map) = state.map() {
            if map.rev() > node.cluster_map().rev() || node.cluster_map().this != id {
                node.install_map(map.clone(), id);
            }
        }
        if states.changed().await.is_err() {
            return;
        }
    }
}
