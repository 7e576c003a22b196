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
//!
//! The cluster secret (`sluice_meta::ClusterSecret`) is made with a new cluster and kept in
//! `<data-dir>/cluster_secret` (owner-only); a joiner receives it from the member in answer
//! to its first step, made as the administrator it was started with, and writes it before
//! `node.json`. Every start hands it to the meta node (Raft RPCs) and to the node's
//! credentials (peers' replication on the KV port, internal calls on the admin port).

use crate::membership_error::MembershipError;
use serde::{Deserialize, Serialize};
use sluice_client::net::Dial;
use sluice_client::Credentials;
use sluice_cluster::metadata::{BucketDef, MetaCommand};
use sluice_cluster::{place, BucketKind, NodeId, NodeInfo};
use sluice_engine::BucketType;
use sluice_meta::{ClusterSecret, MetaConfig, MetaNode};
use sluice_server::Node;
use std::path::{Path, PathBuf};
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

/// A plan and the cluster secret it starts with.
pub struct Planned {
    pub plan: Plan,
    pub secret: ClusterSecret,
}

fn secret_path(data_dir: &Path) -> PathBuf {
    data_dir.join("cluster_secret")
}

fn read_secret(data_dir: &Path) -> Result<Option<ClusterSecret>, MembershipError> {
    let path = secret_path(data_dir);
    let Some(text) = read_if_present(&path)? else {
        return Ok(None);
    };
    ClusterSecret::try_from(text)
        .map(Some)
        .map_err(|source| MembershipError::Secret { path, source })
}

/// Writes the secret readable by its owner only, replacing the file in one rename.
fn write_secret(data_dir: &Path, secret: &ClusterSecret) -> Result<(), MembershipError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = secret_path(data_dir);
    let tmp = data_dir.join("cluster_secret.tmp");
    let _ = std::fs::remove_file(&tmp);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(secret.as_password().as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| MembershipError::Io {
            what: "writing",
            path,
            source,
        })
}

/// The secret a member kept: a member without one cannot prove itself to its peers.
fn kept_secret(data_dir: &Path) -> Result<ClusterSecret, MembershipError> {
    read_secret(data_dir)?.ok_or_else(|| MembershipError::NoSecret {
        path: secret_path(data_dir),
    })
}

/// A new cluster's secret, from the OS's randomness (or the one a crash left behind).
fn new_cluster_secret(data_dir: &Path) -> Result<ClusterSecret, MembershipError> {
    if let Some(kept) = read_secret(data_dir)? {
        return Ok(kept);
    }
    let mut bytes = [0u8; sluice_meta::secret::SECRET_BYTES];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    let secret = ClusterSecret::from_bytes(bytes);
    write_secret(data_dir, &secret)?;
    Ok(secret)
}

/// The administrator this node was started with: what its join is made as.
fn admin(node: &Node) -> Credentials {
    Credentials::new(&node.config.username, &node.config.password)
}

fn identity_path(data_dir: &Path) -> PathBuf {
    data_dir.join("node.json")
}

/// The text of `path`, or `None` if there is no such file.
fn read_if_present(path: &Path) -> Result<Option<String>, MembershipError> {
    if !path.exists() {
        return Ok(None);
    }
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|source| MembershipError::Io {
            what: "reading",
            path: path.to_path_buf(),
            source,
        })
}

fn read_identity(data_dir: &Path) -> Result<Option<Identity>, MembershipError> {
    let path = identity_path(data_dir);
    let Some(text) = read_if_present(&path)? else {
        return Ok(None);
    };
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

/// Decides how this node starts; a joiner gets its id and the secret from the member here.
/// The node's credentials know the secret once this returns.
pub async fn plan(node: &Node) -> Result<Planned, MembershipError> {
    let planned = decide(node).await?;
    node.credentials
        .set_cluster_secret(planned.secret.as_password())
        .map_err(MembershipError::ClusterIdentity)?;
    Ok(planned)
}

async fn decide(node: &Node) -> Result<Planned, MembershipError> {
    let cfg = &node.config;
    let dir = &cfg.data_dir;
    let plan = match (read_identity(dir)?, &cfg.join) {
        (Some(id), _) if id.admitted => Plan::Restart(id.node_id),
        (Some(id), Some(member)) => Plan::Join {
            member: member.clone(),
            id: id.node_id,
        },
        (Some(id), None) if id.node_id == NodeId(0) => {
            let secret = new_cluster_secret(dir)?;
            return Ok(Planned {
                plan: Plan::NewCluster,
                secret,
            });
        }
        (Some(id), None) => {
            return Err(MembershipError::UnfinishedJoin {
                data_dir: cfg.data_dir.clone(),
                id: id.node_id,
            })
        }
        (None, None) => {
            let secret = new_cluster_secret(dir)?;
            return Ok(Planned {
                plan: Plan::NewCluster,
                secret,
            });
        }
        (None, Some(member)) => {
            // Its vbuckets would be taken as copies of the cluster's without being copies.
            if node.holds_data() {
                return Err(MembershipError::HoldsData {
                    data_dir: cfg.data_dir.clone(),
                });
            }
            let allocated = sluice_meta::join::allocate_node_id(
                member,
                &member_dial(node),
                &admin(node),
                STEP_TIMEOUT,
            )
            .await
            .map_err(|source| MembershipError::AllocateId {
                member: member.clone(),
                source,
            })?;
            let id = allocated.id;
            // The secret first: a node.json without it would be a member that cannot prove it.
            write_secret(dir, &allocated.secret)?;
            write_identity(
                &cfg.data_dir,
                &Identity {
                    node_id: id,
                    admitted: false,
                },
            )?;
            tracing::info!(%member, node = %id, "joining the cluster");
            return Ok(Planned {
                plan: Plan::Join {
                    member: member.clone(),
                    id,
                },
                secret: allocated.secret,
            });
        }
    };
    Ok(Planned {
        plan,
        secret: kept_secret(dir)?,
    })
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
pub async fn start_meta(node: &Node, planned: &Planned) -> Result<MetaNode, MembershipError> {
    let admin_addr = format!("{}:{}", node.config.advertise_host, node.admin_port());
    let mut config = MetaConfig::new(
        planned.plan.node_id(),
        admin_addr,
        node.config.data_dir.join("meta"),
        planned.secret.clone(),
    );
    config.dial = member_dial(node);
    MetaNode::start(config)
        .await
        .map_err(|source| MembershipError::Meta {
            what: "starting the cluster metadata (meta) node",
            source,
        })
}

/// How this node calls its peers: from its source address, and over TLS (verifying them
/// against the cluster's CA) when the cluster encrypts its control traffic.
pub fn member_dial(node: &Node) -> Dial {
    node.member_dial()
}

/// Finishes what `plan` started: creates the cluster or gets admitted, then waits until the
/// replicated state holds the bucket's map.
pub async fn complete(node: &Node, meta: &MetaNode, plan: &Plan) -> Result<(), MembershipError> {
    let me = node.node_info(plan.node_id());
    match plan {
        Plan::Restart(id) => {
            let listed = meta.state().borrow().node(*id).map(|e| e.info.clone());
            if let Some(listed) = listed.filter(|l| *l != me) {
                // Said before anything else changes (the move would be refused the same).
                if listed.services != me.services {
                    return Err(MembershipError::Refused {
                        what: "restarting as a member",
                        rejection: sluice_cluster::Rejection::ServicesChanged {
                            id: *id,
                            had: listed.services,
                            asked: me.services,
                        },
                    });
                }
                move_node(meta, listed, me.clone()).await?;
            }
        }
        Plan::NewCluster => create_cluster(node, meta, me).await?,
        Plan::Join { member, id } => {
            sluice_meta::join::admit(member, &member_dial(node), &admin(node), me, STEP_TIMEOUT)
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
    // Once the state lists this node, it holds every bucket defined before the node was
    // added, with its map.
    let id = plan.node_id();
    let mut state = meta.state();
    let waited = tokio::time::timeout(MAP_WAIT, state.wait_for(|s| s.node(id).is_some())).await;
    match waited {
        Ok(Ok(_)) => Ok(()),
        _ => Err(MembershipError::NoMap(MAP_WAIT)),
    }
}

/// A new cluster of one: node 0 with the bucket placed on it. Each step is skipped if the
/// state already shows it (a restart after a crash half way).
async fn create_cluster(node: &Node, meta: &MetaNode, me: NodeInfo) -> Result<(), MembershipError> {
    // The bucket is placed on this node alone: it must be able to hold vbuckets.
    if !me.runs(sluice_cluster::Service::Kv) {
        return Err(MembershipError::FirstNodeWithoutData {
            services: me.services,
        });
    }
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
    if state().uuid().is_empty() {
        let uuid = MetaCommand::SetClusterUuid {
            uuid: new_cluster_uuid(),
        };
        expect_applied(meta, "naming the cluster", uuid).await?;
    }
    if state().bucket(&cfg.bucket).is_none() {
        let bucket = BucketDef {
            name: cfg.bucket.clone(),
            uuid: node.bucket.uuid.clone(),
            kind: match cfg.bucket_type {
                BucketType::Couchbase => BucketKind::Couchbase,
                BucketType::Ephemeral => BucketKind::Ephemeral,
            },
            replicas: cfg.replicas,
            vbuckets: cfg.vbuckets,
            quota_bytes: cfg.memory_quota_mb * 1024 * 1024,
            durability_min: None,
            conflict_resolution: Default::default(),
        };
        let define = MetaCommand::DefineBucket { bucket };
        expect_applied(meta, "defining the bucket", define).await?;
    }
    if state().map(&cfg.bucket).is_none() {
        let vbmap = place(&[me.id], cfg.vbuckets, cfg.replicas)?;
        let cmd = MetaCommand::SetMap {
            bucket: cfg.bucket.clone(),
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

/// A fresh cluster uuid: 128 random bits in hex, as Couchbase's.
fn new_cluster_uuid() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Gives a cluster created before clusters had uuids its uuid: proposed until one is set
/// (by this node or another; the first proposal wins), retrying while there is no quorum.
pub async fn ensure_cluster_uuid(meta: MetaNode) {
    let mut pause = std::time::Duration::from_millis(200);
    while meta.state().borrow().uuid().is_empty() {
        let cmd = MetaCommand::SetClusterUuid {
            uuid: new_cluster_uuid(),
        };
        match meta.propose(cmd).await {
            Ok(_) => return,
            Err(e) => tracing::debug!(error = %e, "naming the cluster; retrying"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(5));
    }
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
