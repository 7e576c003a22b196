//! [`ClusterClient`]: the smart client. It routes each key by the cluster map, keeps one
//! pipelined connection per node, follows map changes and retries what a map change broke.
//!
//! - **Bootstrap.** The first seed that completes the usual handshake ([`Client::connect`]:
//!   HELLO, SASL, SELECT_BUCKET) and answers GET_CLUSTER_CONFIG with a valid map wins; its
//!   connection is kept if the map lists the seed's address.
//! - **Routing.** `vb = crc32(key) % vbuckets`; the request goes to the vbucket's active
//!   node (GET_REPLICA: to its replica `index`). Connections open on first use.
//! - **Map changes.** The map is replaced only by a strictly newer `(revEpoch, rev)`.
//!   NOT_MY_VBUCKET carries the answering node's map, taken if newer; otherwise the client
//!   asks the other nodes (GET_CLUSTER_CONFIG) for a newer one. A connection failure drops
//!   that connection and asks the other nodes. One refresh runs at a time; operations that
//!   failed meanwhile reuse its result.
//! - **Retries.** NOT_MY_VBUCKET, an unreachable node, a vbucket without an active copy, and
//!   ETMPFAIL/EBUSY are retried: at once when the map changed, else after a backoff doubling
//!   from `retry_backoff_min` to `retry_backoff_max`; at most `retries_max` times and within
//!   `operation_timeout` from the start. Then [`ClusterError::RetriesExhausted`]. A request
//!   lost with its connection may have been executed: a retried delete may then answer
//!   KEY_ENOENT.
//! - **Pipelining.** Every operation on a node shares its connection: concurrent callers'
//!   requests go out back to back and answers are matched by opaque (`node_conn`). The batch
//!   calls ([`ClusterClient::execute_many`], `get_many`, `set_many`) run up to
//!   `batch_in_flight_max` operations at once, so each node's connection carries a pipeline
//!   and the nodes work in parallel. At most `node_in_flight_max` requests wait for answers
//!   per node.

use bytes::Bytes;
use sluice_proto::encode::Packet;
use sluice_proto::{Opcode, Status};
use sluice_types::collection::{qualify, QUALIFIED_KEY_BYTES_MAX};
use sluice_types::{Cas, CollectionId, VbId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::OnceCell;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::Client;
use crate::cluster_ops::{
    bump, into_document, into_mutation, ClusterOptions, ClusterStats, Counters, Op, OpRef, OpResult,
};
use crate::error::{ClientError, ClusterError, RetryReason};
use crate::kv::{get_result, meta_result, mutation_result, store_extras};
use crate::node_conn::{CallError, NodeConn};
use crate::response::Response;
use crate::results::{GetResult, MutationResult, StoreOptions};
use crate::stream::TlsConnect;
use crate::vbucket_map::{ClusterView, MapVersion};
use crate::ConnectOptions;

/// The smart client. Cheap to clone: clones share the map and the connections.
#[derive(Clone)]
pub struct ClusterClient {
    inner: Arc<Inner>,
    /// The collection its keys name. Another than the default needs the Collections
    /// feature in the options (see [`ClusterClient::in_collection`]).
    collection: CollectionId,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient")
            .field("map", &self.inner.map().version())
            .field("seeds", &self.inner.seeds)
            .finish()
    }
}

/// A node's connection, opened by the first operation that needs it.
type Slot = OnceCell<Arc<NodeConn>>;

struct Inner {
    options: ClusterOptions,
    /// Asked for maps when no node of the current map answers.
    seeds: Vec<String>,
    map: RwLock<Arc<ClusterView>>,
    /// By `host:port` as the map lists it.
    conns: Mutex<HashMap<String, Arc<Slot>>>,
    /// Held across one refresh so concurrent failures share one round of fetches.
    refresh_gate: tokio::sync::Mutex<()>,
    counters: Counters,
}

/// How one attempt ended, short of success.
enum Failure {
    Final(ClusterError),
    Retry(RetryReason),
}

impl ClusterClient {
    /// Bootstraps from the first of `seeds` (`host:port` of any node's KV port) that answers
    /// with a valid map.
    pub async fn connect<S: AsRef<str>>(
        seeds: &[S],
        options: ClusterOptions,
    ) -> Result<ClusterClient, ClusterError> {
        if seeds.is_empty() {
            return Err(ClusterError::NoSeeds);
        }
        if options.connect.bucket.is_none() {
            return Err(ClusterError::NoBucket);
        }
        let seeds: Vec<String> = seeds.iter().map(|s| s.as_ref().to_string()).collect();
        let mut last = None;
        for seed in &seeds {
            match bootstrap_from(seed, &options).await {
                Ok((client, view)) => {
                    let view = Arc::new(view);
                    let mut conns = HashMap::new();
                    if view.lists(seed) {
                        let in_flight = options.node_in_flight_max.max(1);
                        let conn = NodeConn::start(client, seed.clone(), in_flight);
                        let slot = OnceCell::new_with(Some(Arc::new(conn)));
                        conns.insert(seed.clone(), Arc::new(slot));
                    }
                    let inner = Inner {
                        options,
                        seeds,
                        map: RwLock::new(view),
                        conns: Mutex::new(conns),
                        refresh_gate: tokio::sync::Mutex::new(()),
                        counters: Counters::default(),
                    };
                    return Ok(ClusterClient {
                        inner: Arc::new(inner),
                        collection: CollectionId::DEFAULT,
                    });
                }
                Err(e) => {
                    tracing::debug!(%seed, error = %e, "bootstrap seed failed");
                    last = Some(e);
                }
            }
        }
        Err(ClusterError::Bootstrap {
            seeds: seeds.len(),
            last: Box::new(last.expect("at least one seed was tried")),
        })
    }

    /// The map operations are routed by now.
    pub fn map(&self) -> Arc<ClusterView> {
        self.inner.map()
    }

    pub fn stats(&self) -> ClusterStats {
        self.inner.counters.snapshot()
    }

    /// Asks the nodes for a newer map now; true if one was installed.
    pub async fn refresh_map(&self) -> bool {
        let deadline = Instant::now() + self.inner.options.operation_timeout;
        let seen = self.inner.map().version();
        self.inner.refresh(seen, None, deadline).await
    }

    /// A client of the same connections and map whose keys name collection `cid`. Its
    /// options must ask for the Collections feature for any other than the default
    /// (each operation otherwise fails with [`ClusterError::NoCollections`]).
    pub fn in_collection(&self, cid: CollectionId) -> ClusterClient {
        ClusterClient {
            inner: self.inner.clone(),
            collection: cid,
        }
    }

    /// Reads a document from its active copy; a miss is
    /// `Err(ClusterError::Client(ClientError::Status(Status::KeyEnoent)))`
    /// (see [`ClusterError::is_not_found`]).
    pub async fn get(&self, key: &[u8]) -> Result<GetResult, ClusterError> {
        self.inner
            .run(OpRef::Get(key), self.collection)
            .await
            .map(into_document)
    }

    /// Reads a document from replica `index` (0-based) of its vbucket.
    pub async fn get_replica(&self, key: &[u8], index: u8) -> Result<GetResult, ClusterError> {
        self.inner
            .run(OpRef::GetReplica(key, index), self.collection)
            .await
            .map(into_document)
    }

    pub async fn set(
        &self,
        key: &[u8],
        value: &[u8],
        options: StoreOptions,
    ) -> Result<MutationResult, ClusterError> {
        self.write(OpRef::Set(key, value, options)).await
    }

    /// Stores a new document: KEY_EEXISTS (see [`ClusterError::status`]) if the key holds
    /// one already.
    pub async fn add(
        &self,
        key: &[u8],
        value: &[u8],
        options: StoreOptions,
    ) -> Result<MutationResult, ClusterError> {
        self.write(OpRef::Add(key, value, options)).await
    }

    /// Deletes a document; a non-zero `cas` must match the current one.
    pub async fn delete(&self, key: &[u8], cas: Cas) -> Result<MutationResult, ClusterError> {
        self.write(OpRef::Delete(key, cas)).await
    }

    async fn write(&self, op: OpRef<'_>) -> Result<MutationResult, ClusterError> {
        self.inner.run(op, self.collection).await.map(into_mutation)
    }

    /// Runs `ops` concurrently (pipelined per node, nodes in parallel), each with its own
    /// routing and retries; the answers come back in the order of `ops`.
    pub async fn execute_many(&self, ops: Vec<Op>) -> Vec<Result<OpResult, ClusterError>> {
        let total = ops.len();
        let mut results: Vec<Option<Result<OpResult, ClusterError>>> =
            std::iter::repeat_with(|| None).take(total).collect();
        let running_max = self.inner.options.batch_in_flight_max.max(1);
        let mut running = JoinSet::new();
        let mut todo = ops.into_iter().enumerate();
        loop {
            while running.len() < running_max {
                let Some((i, op)) = todo.next() else { break };
                let (inner, cid) = (self.inner.clone(), self.collection);
                running.spawn(async move { (i, inner.run(op.as_ref(), cid).await) });
            }
            match running.join_next().await {
                None => break,
                Some(Ok((i, result))) => results[i] = Some(result),
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Some(Err(e)) => panic!("a batch operation was cancelled: {e}"),
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every operation of the batch ran"))
            .collect()
    }

    /// [`ClusterClient::get`] for many keys at once; answers in the order of `keys`.
    pub async fn get_many<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Vec<Result<GetResult, ClusterError>> {
        let ops = keys
            .iter()
            .map(|k| Op::Get {
                key: Bytes::copy_from_slice(k.as_ref()),
            })
            .collect();
        let answers = self.execute_many(ops).await;
        answers.into_iter().map(|r| r.map(into_document)).collect()
    }

    /// [`ClusterClient::set`] for many documents at once, all with `options`.
    pub async fn set_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V)],
        options: StoreOptions,
    ) -> Vec<Result<MutationResult, ClusterError>> {
        let ops = items
            .iter()
            .map(|(k, v)| Op::Set {
                key: Bytes::copy_from_slice(k.as_ref()),
                value: Bytes::copy_from_slice(v.as_ref()),
                options,
            })
            .collect();
        let answers = self.execute_many(ops).await;
        answers.into_iter().map(|r| r.map(into_mutation)).collect()
    }
}

/// Handshake and map from one seed, within `connect_timeout`.
async fn bootstrap_from(
    seed: &str,
    options: &ClusterOptions,
) -> Result<(Client, ClusterView), ClusterError> {
    let started = Instant::now();
    let work = async {
        let mut client = Client::connect(seed, options.connect.clone()).await?;
        let config = client.get_cluster_config_bytes().await?;
        let view = ClusterView::parse(&config)?;
        Ok::<_, ClusterError>((client, view))
    };
    match tokio::time::timeout(options.connect_timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(ClusterError::Timeout {
            node: seed.to_string(),
            attempts: 1,
            elapsed_ms: elapsed_ms(started),
        }),
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Inner {
    fn map(&self) -> Arc<ClusterView> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// One operation, with its retries.
    async fn run(&self, op: OpRef<'_>, cid: CollectionId) -> Result<OpResult, ClusterError> {
        bump(&self.counters.operations);
        let started = Instant::now();
        let deadline = started + self.options.operation_timeout;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let map = self.map();
            let reason = match self.attempt(&map, op, cid, deadline).await {
                Ok(answer) => return Ok(answer),
                Err(Failure::Final(ClusterError::Timeout { node, .. })) => {
                    return Err(ClusterError::Timeout {
                        node,
                        attempts,
                        elapsed_ms: elapsed_ms(started),
                    })
                }
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Retry(reason)) => reason,
            };
            let exhausted = |last| ClusterError::RetriesExhausted {
                attempts,
                elapsed_ms: elapsed_ms(started),
                last,
            };
            if attempts > self.options.retries_max || Instant::now() >= deadline {
                return Err(exhausted(reason));
            }
            bump(&self.counters.retries);
            let seen = map.version();
            let changed = match &reason {
                RetryReason::Temporary { .. } => false,
                RetryReason::Unreachable { node, .. } => {
                    self.refresh(seen, Some(node.as_str()), deadline).await
                }
                RetryReason::NotMyVbucket { .. } | RetryReason::NoActive { .. } => {
                    self.refresh(seen, None, deadline).await
                }
            };
            if !changed {
                let wake = (Instant::now() + self.options.backoff(attempts)).min(deadline);
                tokio::time::sleep_until(wake).await;
            }
            if Instant::now() >= deadline {
                return Err(exhausted(reason));
            }
        }
    }

    /// One try under `map`. A NOT_MY_VBUCKET's map is taken here if newer; a failed
    /// connection is dropped here.
    async fn attempt(
        &self,
        map: &ClusterView,
        op: OpRef<'_>,
        cid: CollectionId,
        deadline: Instant,
    ) -> Result<OpResult, Failure> {
        let vb = match op {
            OpRef::FailoverLog(vb) if vb.0 >= map.num_vbuckets() => {
                return Err(Failure::Final(ClusterError::Client(
                    ClientError::Unexpected("the vbucket is beyond the cluster map"),
                )))
            }
            OpRef::FailoverLog(vb) => vb,
            _ => map.vbucket_of(op.key()),
        };
        let node = match op {
            OpRef::GetReplica(_, index) => {
                let replicas = map.num_replicas();
                if index >= replicas {
                    return Err(Failure::Final(ClusterError::NoSuchReplica {
                        index,
                        replicas,
                    }));
                }
                map.replica_node(vb, index).ok_or_else(|| {
                    Failure::Final(ClusterError::ReplicaUnavailable {
                        vb,
                        index,
                        version: map.version(),
                    })
                })?
            }
            _ => map.active_node(vb).ok_or_else(|| {
                Failure::Retry(RetryReason::NoActive {
                    vb,
                    version: map.version(),
                })
            })?,
        };
        let conn = self.conn(&node.addr, deadline).await?;
        // A collection-aware connection sends every key with its collection's id (routing
        // above hashed the logical key, as the server does).
        let mut qualified = [0; QUALIFIED_KEY_BYTES_MAX];
        let key = if matches!(op, OpRef::FailoverLog(_)) {
            &[][..]
        } else if conn.collections() {
            qualify(cid, op.key(), &mut qualified)
                .map_err(|e| Failure::Final(ClusterError::BadKey(e)))?
        } else if cid == CollectionId::DEFAULT {
            op.key()
        } else {
            return Err(Failure::Final(ClusterError::NoCollections(cid)));
        };
        let extras;
        let meta_extras;
        let framing;
        let packet = match op {
            OpRef::Get(_) | OpRef::GetReplica(..) => {
                Packet::request(op.opcode().byte(), vb.0, 0).key(key)
            }
            OpRef::FailoverLog(_) => Packet::request(op.opcode().byte(), vb.0, 0),
            // Extras version 2: the answer carries the datatype too.
            OpRef::GetMeta(_) => Packet::request(op.opcode().byte(), vb.0, 0)
                .extras(&[0x02])
                .key(key),
            OpRef::Set(_, value, options) | OpRef::Add(_, value, options) => {
                extras = store_extras(&options);
                framing = options.durability.map(|d| d.framing_extras());
                let p = Packet::request(op.opcode().byte(), vb.0, 0)
                    .extras(&extras)
                    .key(key)
                    .value(value)
                    .cas(options.cas.0);
                match &framing {
                    Some(f) => p.framing_extras(f),
                    None => p,
                }
            }
            OpRef::Delete(_, cas) => Packet::request(op.opcode().byte(), vb.0, 0)
                .key(key)
                .cas(cas.0),
            OpRef::WithMeta(_, _, value, meta, datatype) => {
                meta_extras = meta.extras();
                Packet::request(op.opcode().byte(), vb.0, 0)
                    .extras(&meta_extras)
                    .key(key)
                    .value(value)
                    .datatype(datatype)
            }
        };
        let resp = match conn.call(packet, deadline).await {
            Ok(resp) => resp,
            Err(CallError::Timeout) => {
                return Err(Failure::Final(ClusterError::Timeout {
                    node: node.addr.clone(),
                    attempts: 1,
                    elapsed_ms: 0,
                }))
            }
            Err(CallError::Lost(error)) => {
                bump(&self.counters.connection_failures);
                self.forget(&conn);
                return Err(Failure::Retry(RetryReason::Unreachable {
                    node: node.addr.clone(),
                    error,
                }));
            }
        };
        self.answer(op, vb, &conn, resp)
    }

    /// Turns an answer into the operation's result, or says why to retry.
    fn answer(
        &self,
        op: OpRef<'_>,
        vb: VbId,
        conn: &NodeConn,
        resp: Response,
    ) -> Result<OpResult, Failure> {
        if resp.opcode != op.opcode().byte() {
            return Err(Failure::Final(ClusterError::Client(
                ClientError::Unexpected("response opcode does not match the request"),
            )));
        }
        let status = resp
            .status()
            .map_err(|e| Failure::Final(ClusterError::Client(e)))?;
        let node = || conn.addr().to_string();
        match status {
            Status::Success => {}
            Status::NotMyVbucket => {
                bump(&self.counters.not_my_vbucket);
                if !resp.value.is_empty() {
                    match ClusterView::parse(&resp.value) {
                        Ok(view) => {
                            self.offer(view);
                        }
                        Err(e) => tracing::debug!(node = %node(), error = %e,
                            "NOT_MY_VBUCKET carried an unusable map"),
                    }
                }
                return Err(Failure::Retry(RetryReason::NotMyVbucket {
                    vb,
                    node: node(),
                }));
            }
            Status::Etmpfail
            | Status::Ebusy
            | Status::SyncWriteInProgress
            | Status::SyncWriteReCommitInProgress => {
                return Err(Failure::Retry(RetryReason::Temporary {
                    node: node(),
                    status,
                }))
            }
            other => {
                return Err(Failure::Final(ClusterError::Client(ClientError::Status(
                    other,
                ))))
            }
        }
        match op {
            OpRef::Get(_) | OpRef::GetReplica(..) => get_result(resp)
                .map(OpResult::Document)
                .map_err(|e| Failure::Final(ClusterError::Client(e))),
            OpRef::GetMeta(_) => meta_result(&resp)
                .map(OpResult::Meta)
                .map_err(|e| Failure::Final(ClusterError::Client(e))),
            OpRef::FailoverLog(_) => sluice_proto::body::failover_log::decode(&resp.value)
                .filter(|log| !log.is_empty())
                .map(OpResult::FailoverLog)
                .ok_or(Failure::Final(ClusterError::Client(
                    ClientError::Unexpected("malformed failover log"),
                ))),
            OpRef::Set(..) | OpRef::Add(..) | OpRef::Delete(..) | OpRef::WithMeta(..) => Ok(
                OpResult::Mutation(mutation_result(vb, &resp, conn.seqno_tokens())),
            ),
        }
    }

    /// Where and how a connection to `addr` is opened. Without TLS: at `addr`. With TLS: a
    /// node the map lists at its `kvSSL` port, its certificate verified for its host; an
    /// address the map does not list (a seed) as given, since a TLS client's seeds are TLS
    /// addresses.
    fn dial_for(&self, addr: &str) -> Result<(String, ConnectOptions), ClientError> {
        let mut connect = self.options.connect.clone();
        let Some(tls) = connect.tls.clone() else {
            return Ok((addr.to_string(), connect));
        };
        let map = self.map();
        let Some(node) = map.nodes().iter().find(|n| n.addr == addr) else {
            return Ok((addr.to_string(), connect));
        };
        let dial = node.kv_tls_addr().ok_or_else(|| {
            ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the map names no TLS port (kvSSL) for {addr}"),
            ))
        })?;
        connect.tls = Some(Arc::new(TlsConnect::for_host(
            tls.config.clone(),
            &node.host,
        )?));
        Ok((dial, connect))
    }

    /// The connection to `addr`, opened now if there is none (or only a dead one).
    async fn conn(&self, addr: &str, deadline: Instant) -> Result<Arc<NodeConn>, Failure> {
        let unreachable = |error: ClientError| {
            Failure::Retry(RetryReason::Unreachable {
                node: addr.to_string(),
                error: Arc::new(error),
            })
        };
        let slot = {
            let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            let slot = conns.entry(addr.to_string()).or_default();
            if slot.get().is_some_and(|c| c.is_dead()) {
                *slot = Arc::default();
            }
            slot.clone()
        };
        if let Some(c) = slot.get() {
            return Ok(c.clone());
        }
        let open = async {
            let (dial, connect) = self.dial_for(addr)?;
            let client = Client::connect(&dial, connect).await?;
            let in_flight = self.options.node_in_flight_max.max(1);
            Ok::<_, ClientError>(Arc::new(NodeConn::start(
                client,
                addr.to_string(),
                in_flight,
            )))
        };
        let connect_deadline = deadline.min(Instant::now() + self.options.connect_timeout);
        match tokio::time::timeout_at(connect_deadline, slot.get_or_try_init(|| open)).await {
            Ok(Ok(c)) => Ok(c.clone()),
            Ok(Err(e)) => {
                bump(&self.counters.connection_failures);
                Err(unreachable(e))
            }
            Err(_) if Instant::now() >= deadline => Err(Failure::Final(ClusterError::Timeout {
                node: addr.to_string(),
                attempts: 1,
                elapsed_ms: 0,
            })),
            Err(_) => {
                bump(&self.counters.connection_failures);
                Err(unreachable(ClientError::Io(
                    std::io::ErrorKind::TimedOut.into(),
                )))
            }
        }
    }

    /// Stops using `conn` (it failed); the next operation on its node opens a new one.
    fn forget(&self, conn: &Arc<NodeConn>) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let is_it = conns
            .get(conn.addr())
            .and_then(|slot| slot.get())
            .is_some_and(|c| Arc::ptr_eq(c, conn));
        if is_it {
            conns.remove(conn.addr());
        }
    }

    /// Installs `view` if it is newer than the map in use; true if it was. Connections to
    /// nodes the new map does not list are dropped (operations still using them finish).
    fn offer(&self, view: ClusterView) -> bool {
        let installed = {
            let mut current = self.map.write().unwrap_or_else(|p| p.into_inner());
            if view.version() <= current.version() {
                return false;
            }
            tracing::debug!(from = %current.version(), to = %view.version(), "cluster map updated");
            *current = Arc::new(view);
            current.clone()
        };
        bump(&self.counters.map_updates);
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|addr, _| installed.lists(addr));
        true
    }

    /// Looks for a map newer than `seen`: the current map's nodes first (but `exclude`),
    /// then the seeds it does not list. True if the map in use is newer than `seen` after.
    async fn refresh(&self, seen: MapVersion, exclude: Option<&str>, deadline: Instant) -> bool {
        // An async lock held across the fetches on purpose: the operations that fail
        // together wait for one refresh instead of each asking every node.
        let Ok(_gate) = tokio::time::timeout_at(deadline, self.refresh_gate.lock()).await else {
            return false;
        };
        let map = self.map();
        if map.version() > seen {
            return true;
        }
        let listed = map.nodes().iter().map(|n| n.addr.as_str());
        let unlisted = self
            .seeds
            .iter()
            .map(String::as_str)
            .filter(|s| !map.lists(s));
        for addr in listed.chain(unlisted).filter(|a| Some(*a) != exclude) {
            if Instant::now() >= deadline {
                break;
            }
            let fetch_deadline = deadline.min(Instant::now() + self.options.connect_timeout);
            if let Some(view) = self.fetch_map(addr, fetch_deadline).await {
                if self.offer(view) {
                    return true;
                }
            }
        }
        false
    }

    /// One node's map, if it answers with a valid one before `deadline`.
    async fn fetch_map(&self, addr: &str, deadline: Instant) -> Option<ClusterView> {
        let conn = self.conn(addr, deadline).await.ok()?;
        bump(&self.counters.config_fetches);
        let req = Packet::request(Opcode::GetClusterConfig.byte(), 0, 0);
        let resp = match conn.call(req, deadline).await {
            Ok(resp) => resp,
            Err(CallError::Timeout) => return None,
            Err(CallError::Lost(error)) => {
                tracing::debug!(%addr, %error, "connection lost while fetching the map");
                bump(&self.counters.connection_failures);
                self.forget(&conn);
                return None;
            }
        };
        let parsed = resp
            .into_success()
            .map_err(ClusterError::from)
            .and_then(|r| Ok(ClusterView::parse(&r.value)?));
        match parsed {
            Ok(view) => Some(view),
            Err(error) => {
                tracing::debug!(%addr, %error, "no usable map from this node");
                None
            }
        }
    }
}
