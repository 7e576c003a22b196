//! What one replication keeps on a node across its pipeline's runs: its figures and its
//! checkpoints (`checkpoint`), and the file they are saved in under the data directory
//! (`DATA_DIR/xdcr/HASH.json`, written to a new file and renamed over the old one).

use parking_lot::Mutex;
use sluice_client::dcp::StreamPositions;
use sluice_server::Node;
use sluice_types::VbId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint::{Record, Ring};
use super::stats::XdcrStats;

/// What one replication keeps on this node across its pipeline's runs.
pub struct Shared {
    pub stats: XdcrStats,
    /// Per vbucket, its checkpoints (`checkpoint`): where the stream resumes, and what
    /// the target acknowledged by then.
    pub(super) checkpoints: Mutex<Checkpoints>,
    /// Where the checkpoints are saved.
    path: PathBuf,
}

/// A replication's checkpoints on this node.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    /// The replication's re-stream count they were made under (`ReplicationDef::restreams`):
    /// a pipeline of another count voids them at its start, and does not move them.
    pub(super) restreams: u64,
    pub(super) rings: BTreeMap<VbId, Ring>,
}

/// The checkpoint file: every vbucket's ring.
#[derive(serde::Serialize, serde::Deserialize)]
struct CheckpointFile {
    format: u32,
    #[serde(default)]
    restreams: u64,
    rings: Vec<Ring>,
}

/// This file format (1 was a `StreamPositions` file: positions without target answers).
const CHECKPOINT_FORMAT: u32 = 2;

impl Shared {
    /// The replication `id`'s state on `node`, with the checkpoints saved by an earlier run.
    pub fn load(node: &Node, id: &str) -> Shared {
        let path = checkpoint_path(node, id);
        let saved = match load(&path) {
            Ok(saved) => saved,
            Err(e) => {
                tracing::warn!(replication = %id, path = %path.display(), error = %e,
                    "unreadable XDCR checkpoints: the replication starts from zero");
                Checkpoints::default()
            }
        };
        Shared {
            stats: XdcrStats::default(),
            checkpoints: Mutex::new(saved),
            path,
        }
    }

    /// The checkpoint of `vb`'s seqno (0 when there is none).
    pub fn checkpoint_seqno(&self, vb: VbId) -> u64 {
        self.checkpoints
            .lock()
            .rings
            .get(&vb)
            .map_or(0, |r| r.newest().source.seqno.0)
    }

    /// Forgets the checkpoints (the replication was deleted).
    pub fn remove_saved(&self) {
        self.checkpoints.lock().rings.clear();
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "removing XDCR checkpoints");
            }
        }
    }

    /// Writes the checkpoints to a new file and renames it over the old one.
    pub(super) fn save(&self) {
        let file = {
            let saved = self.checkpoints.lock();
            CheckpointFile {
                format: CHECKPOINT_FORMAT,
                restreams: saved.restreams,
                rings: saved.rings.values().cloned().collect(),
            }
        };
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = self.path.with_extension("json.tmp");
            std::fs::write(&tmp, serde_json::to_vec(&file)?)?;
            std::fs::rename(&tmp, &self.path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %self.path.display(), error = %e, "saving XDCR checkpoints");
        }
    }
}

/// The checkpoints saved at `path` (none if there is no file). A format 1 file (positions
/// only) gives rings of one record without target answers: the first start checks nothing
/// of them, as before.
fn load(path: &Path) -> Result<Checkpoints, LoadError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Checkpoints::default()),
        Err(e) => return Err(LoadError::Io(e)),
    };
    let (restreams, rings) = match serde_json::from_slice::<CheckpointFile>(&bytes) {
        Ok(f) if f.format == CHECKPOINT_FORMAT => (f.restreams, f.rings),
        Ok(f) => return Err(LoadError::Format(f.format)),
        Err(_) => {
            let positions = StreamPositions::load(path).map_err(LoadError::Positions)?;
            let rings = positions.iter().map(|p| Ring::of(Record::at(*p)));
            (0, rings.collect())
        }
    };
    let rings = rings.into_iter().map(|r| (r.newest().source.vb, r));
    Ok(Checkpoints {
        restreams,
        rings: rings.collect(),
    })
}

#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error(transparent)]
    Io(std::io::Error),
    #[error("checkpoint file format {0} (this node reads {CHECKPOINT_FORMAT})")]
    Format(u32),
    #[error(transparent)]
    Positions(sluice_client::dcp::DcpError),
}

/// `DATA_DIR/xdcr/HASH.json`: ids hold '/' and may be long, so they are hashed.
fn checkpoint_path(node: &Node, id: &str) -> PathBuf {
    node.config
        .data_dir
        .join("xdcr")
        .join(format!("{:016x}.json", fnv1a(id.as_bytes())))
}

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
