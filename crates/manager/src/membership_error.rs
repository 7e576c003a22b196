//! Why a node could not take its place in the cluster.

use sluice_cluster::metadata::Rejection;
use sluice_cluster::{NodeId, PlaceError};
use sluice_meta::join::JoinError;
use sluice_meta::MetaError;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {}: {source}", path.display())]
    Identity {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} was joining a cluster as {id} when it stopped: start it again with --join", data_dir.display())]
    UnfinishedJoin { data_dir: PathBuf, id: NodeId },
    #[error("{} already holds data; a node joins a cluster with an empty data directory", data_dir.display())]
    HoldsData { data_dir: PathBuf },
    #[error("asking {member} for a node id: {source}")]
    AllocateId {
        member: String,
        #[source]
        source: JoinError,
    },
    #[error("asking {member} to admit node {id}: {source}")]
    Admit {
        member: String,
        id: NodeId,
        #[source]
        source: JoinError,
    },
    #[error("{what}: {source}")]
    Meta {
        what: &'static str,
        #[source]
        source: MetaError,
    },
    #[error("{what}: refused: {rejection}")]
    Refused {
        what: &'static str,
        rejection: Rejection,
    },
    #[error(
        "a new cluster starts on a node running the kv (data) service, which holds its \
         bucket; this one runs {services}: start it with kv among --services, or join it to a \
         cluster with --join"
    )]
    FirstNodeWithoutData { services: sluice_cluster::Services },
    #[error("placing the bucket: {0}")]
    Place(#[from] PlaceError),
    #[error("{}: {source}", path.display())]
    Secret {
        path: PathBuf,
        #[source]
        source: sluice_meta::secret::BadSecret,
    },
    #[error("{} is missing: this node is a member, and without the cluster's secret its peers refuse it", path.display())]
    NoSecret { path: PathBuf },
    #[error("{0}")]
    ClusterIdentity(#[source] sluice_server::ClusterIdentityError),
    #[error("the cluster's map did not arrive within {0:?}")]
    NoMap(Duration),
}
