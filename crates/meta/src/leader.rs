//! The operations that run on the leader: proposing a command, and changing the Raft
//! membership (learners, then voters per `desired_voters`). Each is public on `MetaNode`
//! (forwarded to the leader when needed, see `forward`) and has a `*_local` half that the
//! leader runs, for its own callers and for the forwarding routes.
//!
//! Membership policy: every node is added as a learner first and promoted only once it has
//! caught up (so a slow newcomer never stalls commits); the voter set is then whatever
//! `desired_voters` says for all members, keeping current voters. Dead voters are not
//! replaced automatically: `remove_node` them (a failed-over node is removed that way).

use crate::error::MetaError;
use crate::forward::{
    AddNode, LocalError, RemoveNode, PATH_ADD_NODE, PATH_PROPOSE, PATH_REMOVE_NODE,
};
use crate::node::{millis, MetaNode};
use crate::types::{cluster_id, raft_id, Peer};
use openraft::error::{ClientWriteError, RaftError};
use openraft::metrics::WaitError;
use openraft::ChangeMembers;
use sluice_cluster::metadata::{desired_voters, MetaCommand, MetaResponse};
use sluice_cluster::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

type WriteError = RaftError<u64, ClientWriteError<u64, Peer>>;

fn write_error(e: WriteError) -> LocalError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => LocalError::NotLeader,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            LocalError::Failed(MetaError::Membership(e))
        }
        RaftError::Fatal(f) => LocalError::Failed(MetaError::from_fatal(f)),
    }
}

/// Runs `fut` until `deadline`; past it, the outcome is unknown.
async fn until<T>(
    deadline: Instant,
    started: Instant,
    fut: impl Future<Output = Result<T, WriteError>>,
) -> Result<T, LocalError> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(remaining, fut).await {
        Ok(result) => result.map_err(write_error),
        Err(_) => Err(LocalError::Failed(MetaError::Timeout {
            waited_ms: millis(started.elapsed()),
        })),
    }
}

/// The pause before a membership change refused as "in progress" is tried again.
const MEMBERSHIP_RETRY: Duration = Duration::from_millis(50);

/// Whether a membership change failed only because another one is still in flight (two
/// nodes joining at once, or a change the previous leader began): it can be tried again.
fn change_in_flight(e: &LocalError) -> bool {
    matches!(
        e,
        LocalError::Failed(MetaError::Membership(
            openraft::error::ChangeMembershipError::InProgress(_)
        ))
    )
}

impl MetaNode {
    /// Changes the membership, waiting out (until `deadline`) a change already in flight:
    /// Raft takes one at a time, and concurrent admissions must each get theirs.
    async fn change_membership(
        &self,
        change: ChangeMembers<u64, Peer>,
        retain: bool,
        deadline: Instant,
        started: Instant,
    ) -> Result<openraft::raft::ClientWriteResponse<crate::types::TypeConfig>, LocalError> {
        loop {
            let attempt = until(
                deadline,
                started,
                self.raft().change_membership(change.clone(), retain),
            )
            .await;
            match attempt {
                Err(e) if change_in_flight(&e) && Instant::now() + MEMBERSHIP_RETRY < deadline => {
                    tracing::debug!(error = ?e, "membership change in flight; trying again");
                    tokio::time::sleep(MEMBERSHIP_RETRY).await;
                }
                other => return other,
            }
        }
    }

    /// Commits `cmd` to the replicated log and returns the state machine's answer to it (a
    /// `Rejection` is an answer: the command is in the log and changed nothing). Forwarded
    /// to the leader when this node is not it. `MetaError::Timeout` when no leader with a
    /// quorum commits it within `request_timeout` (e.g. a minority partition); the command
    /// may then still be committed later.
    pub async fn propose(&self, cmd: MetaCommand) -> Result<MetaResponse, MetaError> {
        self.on_leader(PATH_PROPOSE, &cmd, |wait| {
            self.propose_local(cmd.clone(), wait)
        })
        .await
    }

    /// Adds node `id` (Raft RPCs at `admin_addr`) to the Raft group: as a learner, then,
    /// once it has caught up, as a voter if `desired_voters` gives it a seat. Idempotent:
    /// adding a member again only re-runs the voter policy.
    pub async fn add_node(&self, id: NodeId, admin_addr: &str) -> Result<(), MetaError> {
        let op = AddNode {
            id,
            admin_addr: admin_addr.to_string(),
        };
        self.on_leader(PATH_ADD_NODE, &op, |wait| {
            self.add_node_local(id, admin_addr.to_string(), wait)
        })
        .await
    }

    /// Removes node `id` from the Raft group: its voter seat goes (another member is
    /// promoted if the policy says so), then its membership. Idempotent. The removed node
    /// keeps running until it is shut down, but no longer takes part.
    pub async fn remove_node(&self, id: NodeId) -> Result<(), MetaError> {
        let op = RemoveNode { id };
        self.on_leader(PATH_REMOVE_NODE, &op, |wait| {
            self.remove_node_local(id, wait)
        })
        .await
    }

    pub(crate) async fn propose_local(
        &self,
        cmd: MetaCommand,
        wait: Duration,
    ) -> Result<MetaResponse, LocalError> {
        let started = Instant::now();
        let written = until(started + wait, started, self.raft().client_write(cmd)).await?;
        written.data.ok_or_else(|| {
            LocalError::Failed(MetaError::BadReply {
                peer: self.config().admin_addr.clone(),
                reason: "the state machine gave no answer to a command".to_string(),
            })
        })
    }

    pub(crate) async fn add_node_local(
        &self,
        id: NodeId,
        admin_addr: String,
        wait: Duration,
    ) -> Result<(), LocalError> {
        let started = Instant::now();
        let deadline = started + wait;
        let rid = raft_id(id);
        let peer = Peer { admin_addr };
        let known = self.member_peer(rid);
        let change = match known {
            // A member that moved (a restart on another port): update its address.
            Some(old) if old != peer => ChangeMembers::SetNodes(BTreeMap::from([(rid, peer)])),
            Some(_) => return self.reconcile_voters(deadline, started).await,
            None => ChangeMembers::AddNodes(BTreeMap::from([(rid, peer)])),
        };
        let added = self
            .change_membership(change, true, deadline, started)
            .await?;
        self.wait_caught_up(rid, added.log_id.index, deadline, started)
            .await?;
        self.reconcile_voters(deadline, started).await
    }

    pub(crate) async fn remove_node_local(
        &self,
        id: NodeId,
        wait: Duration,
    ) -> Result<(), LocalError> {
        let started = Instant::now();
        let deadline = started + wait;
        let rid = raft_id(id);
        let (nodes, voters) = self.members();
        if voters.contains(&id) {
            let others: Vec<NodeId> = nodes.iter().copied().filter(|&n| n != id).collect();
            let mut remaining = voters.clone();
            remaining.remove(&id);
            let desired = desired_voters(&others, &remaining);
            if desired.is_empty() {
                return Err(LocalError::Failed(MetaError::LastVoter { node: id }));
            }
            let seats =
                ChangeMembers::ReplaceAllVoters(desired.iter().copied().map(raft_id).collect());
            self.change_membership(seats, true, deadline, started)
                .await?;
        }
        if self.member_peer(rid).is_some() {
            let gone = ChangeMembers::RemoveNodes(BTreeSet::from([rid]));
            self.change_membership(gone, false, deadline, started)
                .await?;
        }
        Ok(())
    }

    /// Promotes or demotes so the voters are `desired_voters` of all members.
    async fn reconcile_voters(
        &self,
        deadline: Instant,
        started: Instant,
    ) -> Result<(), LocalError> {
        let (nodes, voters) = self.members();
        let desired = desired_voters(&nodes, &voters);
        if desired == voters {
            return Ok(());
        }
        let seats = ChangeMembers::ReplaceAllVoters(desired.iter().copied().map(raft_id).collect());
        self.change_membership(seats, true, deadline, started)
            .await?;
        Ok(())
    }

    /// Waits until the leader has replicated its log up to `index` to `rid`.
    async fn wait_caught_up(
        &self,
        rid: u64,
        index: u64,
        deadline: Instant,
        started: Instant,
    ) -> Result<(), LocalError> {
        let me = raft_id(self.id());
        let remaining = deadline.saturating_duration_since(Instant::now());
        let waited = self
            .raft()
            .wait(Some(remaining))
            .metrics(
                |m| {
                    let matched = m
                        .replication
                        .as_ref()
                        .and_then(|r| r.get(&rid).copied().flatten());
                    m.current_leader != Some(me) || matched.is_some_and(|l| l.index >= index)
                },
                "the new learner catches up",
            )
            .await;
        match waited {
            Ok(m) if m.current_leader == Some(me) => Ok(()),
            Ok(_) => Err(LocalError::NotLeader),
            Err(WaitError::Timeout(..)) => Err(LocalError::Failed(MetaError::Timeout {
                waited_ms: millis(started.elapsed()),
            })),
            Err(WaitError::ShuttingDown) => Err(LocalError::Failed(MetaError::Shutdown)),
        }
    }

    /// The Raft member `rid`'s address, if it is a member.
    fn member_peer(&self, rid: u64) -> Option<Peer> {
        let metrics = self.raft().metrics();
        let m = metrics.borrow();
        m.membership_config.membership().get_node(&rid).cloned()
    }

    /// All members and the voters, in cluster ids.
    fn members(&self) -> (Vec<NodeId>, BTreeSet<NodeId>) {
        let metrics = self.raft().metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let nodes = membership
            .nodes()
            .filter_map(|(id, _)| cluster_id(*id))
            .collect();
        let voters = membership.voter_ids().filter_map(cluster_id).collect();
        (nodes, voters)
    }
}
