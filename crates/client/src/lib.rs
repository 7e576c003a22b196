//! An async (tokio) client for Sluice, and for plain memcached, over the binary protocol.
//!
//! Layout:
//! - `client`          — [`Client`]: connect, opaque assignment, the pipelined low-level API
//!   ([`Client::send_request`] / [`Client::read_response`]) and the one-request round trip the
//!   typed operations share;
//! - `connection`      — bytes ↔ frames on one TCP stream, with a bounded read buffer;
//! - `bootstrap`       — HELLO, SASL (SCRAM via `sluice-sasl`), SELECT_BUCKET, cluster config;
//! - `cluster_config`  — the few fields of the cluster map JSON the single-node client needs;
//! - `vbucket_map`     — the cluster map parsed for routing: [`ClusterView`], [`MapVersion`];
//! - `cluster_client`  — [`ClusterClient`], the smart client: routes by the map, one pipelined
//!   connection per node (`node_conn`), map refresh and bounded retries; `cluster_ops` —
//!   its options, batch operations and counters;
//! - `kv`              — get / set / add / replace / delete / incr / decr;
//! - `admin`           — noop, stats, observe_seqno, get_cluster_config;
//! - `admin_http`      — JSON over HTTP to a node's admin port (cluster tools), as the
//!   [`Credentials`] given (HTTP Basic);
//! - `dcp`             — a DCP consumer ([`dcp::DcpStream`]): positions, flow control, noops,
//!   rollbacks, reconnects;
//! - `options`, `response`, `results`, `error`.
//!
//! The codec is `sluice-proto`'s, shared with the server: this crate only adds I/O.
//!
//! ```no_run
//! use sluice_client::{Client, ConnectOptions, Opcode, Packet, StoreOptions};
//!
//! # async fn demo() -> Result<(), sluice_client::ClientError> {
//! let opts = ConnectOptions::sluice("Administrator", "password", "default");
//! let mut c = Client::connect("127.0.0.1:11210", opts).await?;
//! c.set(b"k", b"v", StoreOptions::default()).await?;
//! assert_eq!(&c.get(b"k").await?.value[..], b"v");
//!
//! // Pipelined: several requests in flight, answers read in order.
//! for key in [&b"a"[..], b"b", b"c"] {
//!     let vb = c.vbucket_of(key).0;
//!     c.queue_request(Packet::request(Opcode::Get.byte(), vb, 0).key(key));
//! }
//! c.flush().await?;
//! while c.in_flight() > 0 {
//!     let answer = c.read_response().await?;
//!     println!("opaque {} status {:?}", answer.opaque, answer.status());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A cluster: the [`ClusterClient`] routes each key to the node the map names, follows map
//! changes, and pipelines batches.
//!
//! ```no_run
//! use sluice_client::{ClusterClient, ClusterOptions, StoreOptions};
//!
//! # async fn demo() -> Result<(), sluice_client::ClusterError> {
//! let opts = ClusterOptions::sluice("Administrator", "password", "default");
//! let c = ClusterClient::connect(&["127.0.0.1:12000", "127.0.0.1:12002"], opts).await?;
//! c.set(b"k", b"v", StoreOptions::default()).await?;
//! let docs = c.get_many(&["k", "a", "b"]).await;
//! assert_eq!(&docs[0].as_ref().unwrap().value[..], b"v");
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]

mod admin;
pub mod admin_http;
pub mod admin_kept;
mod bootstrap;
mod client;
mod cluster_client;
mod cluster_config;
mod cluster_ops;
mod connection;
mod credentials;
pub mod dcp;
mod error;
mod kv;
pub mod net;
mod node_conn;
mod options;
mod response;
mod results;
mod stream;
pub mod tls_transport;
pub mod vbucket_map;

pub use client::Client;
pub use cluster_client::ClusterClient;
pub use cluster_ops::{ClusterOptions, ClusterStats, Op, OpResult};
pub use connection::READ_BUFFER_BYTES_MAX;
pub use credentials::Credentials;
pub use error::{ClientError, ClusterError, MapError, RetryReason};
pub use options::{ConnectOptions, AGENT, DEFAULT_FEATURES};
pub use response::Response;
pub use results::{
    DocMeta, Durability, GetResult, MutationResult, MutationToken, ObserveSeqno, StoreOptions,
};
pub use sluice_proto::DurabilityLevel;
pub use stream::TlsConnect;
pub use vbucket_map::{ClusterView, MapNode, MapVersion, VbChain, VbucketMap};

// Re-exported so callers of the low-level API need not depend on the codec crate directly.
pub use sluice_proto::encode::Packet;
pub use sluice_proto::{Feature, Opcode, Status};
