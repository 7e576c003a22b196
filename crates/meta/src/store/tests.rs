//! The store against openraft's storage test suite, and what survives a reopen.

use super::log::LogStore;
use super::state_machine::StateMachine;
use super::MetaDb;
use crate::error::StoreError;
use crate::types::TypeConfig;
use openraft::storage::RaftLogStorage;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, LogId, StorageError, Vote};
use sluice_cluster::NodeId;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = MetaDb::open(dir.path(), NodeId(0)).expect("open");
        let (sm, _) = StateMachine::open(db.clone()).await.expect("state machine");
        Ok((dir, LogStore::new(db), sm))
    }
}

#[test]
fn passes_openraft_storage_suite() {
    Suite::test_all(Builder).expect("suite");
}

#[tokio::test]
async fn the_vote_and_committed_id_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let vote = Vote::new_committed(3, 1);
    let committed = Some(LogId::new(CommittedLeaderId::new(3, 1), 7));
    {
        let mut log = LogStore::new(MetaDb::open(dir.path(), NodeId(1)).unwrap());
        log.save_vote(&vote).await.unwrap();
        log.save_committed(committed).await.unwrap();
    }
    let mut log = LogStore::new(MetaDb::open(dir.path(), NodeId(1)).unwrap());
    assert_eq!(log.read_vote().await.unwrap(), Some(vote));
    assert_eq!(log.read_committed().await.unwrap(), committed);
}

#[test]
fn a_directory_belongs_to_one_node() {
    let dir = tempfile::tempdir().unwrap();
    drop(MetaDb::open(dir.path(), NodeId(1)).unwrap());
    assert!(matches!(
        MetaDb::open(dir.path(), NodeId(2)),
        Err(StoreError::WrongNode {
            found: NodeId(1),
            expected: NodeId(2)
        })
    ));
}
