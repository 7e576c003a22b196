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

use crate::types::{Peer, TypeConfig};
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
use std::time::Duration;

pub(crate) const PATH_APPEND: &str = "/internal/raft/append";
pub(crate) const PATH_VOTE: &str = "/internal/raft/vote";
pub(crate) const PATH_SNAPSHOT: &str = "/internal/raft/snapshot";

/// Makes the per-peer clients of one node.
pub(crate) struct NetworkFactory {
    /// This node's Raft id, for the errors openraft wants to see it in.
    own: u64,
    /// Where this node's RPCs connect from (`MetaConfig::source_ip`).
    source: Option<std::net::IpAddr>,
    /// The cluster identity every RPC is made as.
    who: sluice_client::Credentials,
}

impl NetworkFactory {
    pub(crate) fn new(
        own: u64,
        source: Option<std::net::IpAddr>,
        who: sluice_client::Credentials,
    ) -> NetworkFactory {
        NetworkFactory { own, source, who }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerNetwork;

    /// Does not connect: the first RPC does.
    async fn new_client(&mut self, target: u64, node: &Peer) -> PeerNetwork {
        PeerNetwork {
            own: self.own,
            target,
            client: HttpClient::new(node.admin_addr.clone(), self.source, &self.who),
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
