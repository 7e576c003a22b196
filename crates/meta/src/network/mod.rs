//! The sending side of Raft's RPCs: openraft asks `NetworkFactory` for a `PeerNetwork` per
//! peer, and each call POSTs the request as JSON to the peer's `/internal/raft/...` route
//! (served by `http::router`).
//!
//! The answer body is the JSON of what the peer's `Raft` returned: its response, or the
//! `RaftError` it raised. Failures to get an answer become the `RPCError` kinds openraft acts
//! on: `Unreachable` (no connection, or the peer is shutting down: openraft backs off before
//! retrying), `Timeout`, or `Network` (retry at once).
//!
//! - `client` — `HttpClient`: one kept-alive HTTP/1.1 connection, bounded in time and bytes.

pub(crate) mod client;

use crate::types::{cluster_id, Peer, TypeConfig};
use client::{HttpClient, HttpError};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{RPCTypes, RaftNetwork, RaftNetworkFactory};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_client::net::Dial;
use sluice_cluster::ClusterState;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub(crate) const PATH_APPEND: &str = "/internal/raft/append";
pub(crate) const PATH_VOTE: &str = "/internal/raft/vote";
pub(crate) const PATH_SNAPSHOT: &str = "/internal/raft/snapshot";

/// Makes the per-peer clients of one node.
pub(crate) struct NetworkFactory {
    /// This node's Raft id, for the errors openraft wants to see it in.
    own: u64,
    /// How this node's RPCs connect (`MetaConfig::dial`).
    dial: Dial,
    /// The replicated state, whose node table has the peers' TLS ports.
    state: watch::Receiver<Arc<ClusterState>>,
    /// The cluster identity every RPC is made as.
    who: sluice_client::Credentials,
}

impl NetworkFactory {
    pub(crate) fn new(
        own: u64,
        dial: Dial,
        state: watch::Receiver<Arc<ClusterState>>,
        who: sluice_client::Credentials,
    ) -> NetworkFactory {
        NetworkFactory {
            own,
            dial,
            state,
            who,
        }
    }
}

/// The admin address to call member `raft` at. Its membership entry records `listed`: the
/// address it was called at when it joined (`NodeInfo::admin_addr` as the joiner's member
/// dialed). Over TLS (`dial.tls`) it is
/// called at its TLS admin port as the node table lists it; in cleartext at `listed`, unless
/// that is its TLS port (it joined while the cluster encrypted its traffic), then at its
/// cleartext one. Decided at each new client, so the members of a cluster restarted with
/// encryption turned on or off reach each other at once. A member the table does not list
/// yet (a joiner being added) is called at `listed`.
pub(crate) fn member_addr(dial: &Dial, state: &ClusterState, raft: u64, listed: &str) -> String {
    let Some(info) = cluster_id(raft)
        .and_then(|id| state.node(id))
        .map(|e| &e.info)
    else {
        return listed.to_string();
    };
    let joined_over_tls = info.tls.is_some() && info.admin_addr(true) == listed;
    match &dial.tls {
        Some(_) => info.admin_addr(true),
        None if joined_over_tls => info.admin_addr(false),
        None => listed.to_string(),
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerNetwork;

    /// Does not connect: the first RPC does.
    async fn new_client(&mut self, target: u64, node: &Peer) -> PeerNetwork {
        let addr = member_addr(&self.dial, &self.state.borrow(), target, &node.admin_addr);
        PeerNetwork {
            own: self.own,
            target,
            client: HttpClient::new(addr, self.dial.clone(), &self.who),
        }
    }
}

/// The RPC client for one peer.
pub(crate) struct PeerNetwork {
    own: u64,
    target: u64,
    client: HttpClient,
}

impl PeerNetwork {
    async fn call<Req, Resp, E>(
        &mut self,
        path: &str,
        action: RPCTypes,
        request: &Req,
        ttl: Duration,
    ) -> Result<Resp, RPCError<u64, Peer, RaftError<u64, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let answer: Result<Resp, RaftError<u64, E>> = self
            .client
            .post(path, request, ttl)
            .await
            .map_err(|e| self.failure(e, action, ttl))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    fn failure<E: std::error::Error>(
        &self,
        e: HttpError,
        action: RPCTypes,
        ttl: Duration,
    ) -> RPCError<u64, Peer, E> {
        tracing::debug!(peer = self.client.addr(), "meta {action} rpc failed: {e}");
        match e {
            // A peer that refuses this node's secret is, for Raft, a peer it cannot reach.
            HttpError::Connect { .. } | HttpError::Unavailable | HttpError::Refused(_) => {
                RPCError::Unreachable(Unreachable::new(&e))
            }
            HttpError::Timeout(_) => RPCError::Timeout(Timeout {
                action,
                id: self.own,
                target: self.target,
                timeout: ttl,
            }),
            HttpError::Status(_) | HttpError::Transport(_) | HttpError::Decode(_) => {
                RPCError::Network(NetworkError::new(&e))
            }
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, Peer, RaftError<u64>>> {
        self.call(
            PATH_APPEND,
            RPCTypes::AppendEntries,
            &rpc,
            option.hard_ttl(),
        )
        .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, Peer, RaftError<u64, InstallSnapshotError>>,
    > {
        self.call(
            PATH_SNAPSHOT,
            RPCTypes::InstallSnapshot,
            &rpc,
            option.hard_ttl(),
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, Peer, RaftError<u64>>> {
        self.call(PATH_VOTE, RPCTypes::Vote, &rpc, option.hard_ttl())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::metadata::MetaCommand;
    use sluice_cluster::{NodeId, NodeInfo, TlsPorts};

    #[test]
    fn members_are_called_at_the_port_the_encryption_needs() {
        let mut state = ClusterState::new();
        let info = NodeInfo {
            id: NodeId(0),
            host: "10.0.0.1".into(),
            kv_port: 11210,
            admin_port: 8091,
            tls: Some(TlsPorts {
                kv: 11207,
                admin: 18091,
            }),
            services: sluice_cluster::Services::ALL,
        };
        let _ = sluice_cluster::metadata::apply(&mut state, &MetaCommand::AllocateNodeId);
        let _ = sluice_cluster::metadata::apply(&mut state, &MetaCommand::AddNode { info });
        assert!(state.node(NodeId(0)).is_some());
        let clear = Dial::default();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let tls = Dial {
            source: None,
            tls: Some(std::sync::Arc::new(config)),
        };
        // Cleartext: the membership's address, as recorded.
        assert_eq!(
            member_addr(&clear, &state, 0, "10.0.0.1:8091"),
            "10.0.0.1:8091"
        );
        assert_eq!(member_addr(&clear, &state, 0, "elsewhere:1"), "elsewhere:1");
        // Joined under encryption, now in cleartext: the cleartext port.
        assert_eq!(
            member_addr(&clear, &state, 0, "10.0.0.1:18091"),
            "10.0.0.1:8091"
        );
        // Over TLS: the TLS port, whatever the membership recorded.
        assert_eq!(
            member_addr(&tls, &state, 0, "10.0.0.1:8091"),
            "10.0.0.1:18091"
        );
        // A joiner the table does not list yet: as recorded.
        assert_eq!(
            member_addr(&tls, &state, 7, "10.0.0.2:18091"),
            "10.0.0.2:18091"
        );
    }
}
