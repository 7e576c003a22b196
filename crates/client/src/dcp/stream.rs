//! [`DcpStream`]: one DCP connection following many vbuckets, delivering their changes in
//! order and keeping each vbucket's resume position.
//!
//! Lifecycle of a vbucket on the stream:
//!
//! ```text
//!  request ──SUCCESS──► streaming ──STREAM_END ok/closed──► done
//!     ▲  │                  │
//!     │  │ROLLBACK(0)       └──STREAM_END other reason──► request again from the position
//!     │  ▼
//!     │ position := 0, Rollback event
//!     │
//!     └── ROLLBACK(s > 0) ─► GET_FAILOVER_LOG ─► position := (uuid covering s, s),
//!                                                 Rollback event, request again
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use sluice_proto::dcp::StreamFlags;
use sluice_proto::encode::Packet;
use sluice_proto::Opcode;
use sluice_types::{Seqno, VbId};

use super::acks::Acks;
use super::error::DcpError;
use super::event::DcpEvent;
use super::handshake;
use super::link::Link;
use super::options::DcpOptions;
use super::position::{DcpPosition, StreamPositions};
use crate::client::Client;
use crate::error::ClientError;

/// A producer that keeps answering ROLLBACK to the point it named itself is broken; stop
/// instead of looping.
pub(super) const ROLLBACKS_IN_A_ROW_MAX: u32 = 16;

/// Where a new stream starts.
#[derive(Debug, Clone)]
pub enum StartFrom {
    /// Every vbucket of the bucket from seqno 0.
    Beginning,
    /// Every vbucket from its current high seqno ([`StreamPositions::from_now`]).
    Now,
    /// The given vbuckets from saved positions.
    Positions(StreamPositions),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum VbStream {
    /// STREAM_REQ sent with this opaque, not answered yet.
    Requested { opaque: u32 },
    /// Accepted: the producer's messages for the vbucket carry this opaque.
    Streaming { opaque: u32 },
    /// ROLLBACK answered; waiting for the failover log to pick the uuid to go back with.
    FetchingLog,
    /// ROLLBACK reported to the application ([`RollbackMode::Report`](super::RollbackMode::Report)); waiting for
    /// [`DcpStream::restart`].
    Parked,
    /// Ended (ok / closed) or refused: nothing more will come.
    Done,
}

#[derive(Debug)]
pub(super) struct VbEntry {
    pub(super) state: VbStream,
    /// ROLLBACK answers since the last accepted request.
    pub(super) rollbacks: u32,
}

/// Our requests on the connection still waiting for an answer, by opaque.
#[derive(Debug, Clone, Copy)]
pub(super) enum Pending {
    StreamRequest(VbId),
    FailoverLog { vb: VbId, rollback_to: Seqno },
    CloseStream(VbId),
}

/// A DCP consumer connection. See the module documentation of [`crate::dcp`].
pub struct DcpStream {
    pub(super) link: Link,
    pub(super) opts: DcpOptions,
    pub(super) positions: StreamPositions,
    pub(super) vbs: BTreeMap<VbId, VbEntry>,
    pub(super) pending: HashMap<u32, Pending>,
    pub(super) next_opaque: u32,
    pub(super) acks: Acks,
    /// Vbuckets not `Done`.
    pub(super) live: usize,
    /// SET_VBUCKET_STATE requests delivered as events, to answer on the next `next()`.
    pub(super) vb_state_answers: Vec<u32>,
    /// Vbuckets to request again as takeovers: closed for it, or to close once accepted.
    pub(super) takeovers: BTreeSet<VbId>,
}

impl std::fmt::Debug for DcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcpStream")
            .field("name", &self.opts.name)
            .field("vbuckets", &self.vbs.len())
            .field("live", &self.live)
            .field("unacked_delivered_bytes", &self.acks.pending())
            .finish()
    }
}

impl DcpStream {
    /// Connects (bootstrap, DCP_OPEN, controls) and requests a stream for every vbucket of
    /// the starting point, pipelined. Answers to the requests arrive through
    /// [`DcpStream::next`]. The whole connect is bounded by `opts.connect_timeout`.
    pub async fn connect(
        addr: &str,
        opts: DcpOptions,
        from: StartFrom,
    ) -> Result<DcpStream, DcpError> {
        Self::open(addr, opts, from, &BTreeSet::new()).await
    }

    /// Reconnects from saved positions (e.g. [`StreamPositions::load`]): every vbucket
    /// continues after the last change the application received, without gap or duplicate
    /// as long as the producer still has that history (otherwise a `Rollback` event says
    /// how far back it had to go).
    pub async fn resume(
        addr: &str,
        opts: DcpOptions,
        positions: StreamPositions,
    ) -> Result<DcpStream, DcpError> {
        Self::connect(addr, opts, StartFrom::Positions(positions)).await
    }

    /// [`DcpStream::connect`], leaving out vbuckets already `finished` (the reconnecting
    /// helper's way of not reopening streams that ended).
    pub(crate) async fn open(
        addr: &str,
        opts: DcpOptions,
        from: StartFrom,
        finished: &BTreeSet<VbId>,
    ) -> Result<DcpStream, DcpError> {
        opts.validate().map_err(DcpError::InvalidOptions)?;
        let limit = opts.connect_timeout;
        match tokio::time::timeout(limit, Self::open_inner(addr, opts, from, finished)).await {
            Ok(r) => r,
            Err(_) => Err(DcpError::ConnectTimeout {
                addr: addr.to_string(),
                after: limit,
            }),
        }
    }

    async fn open_inner(
        addr: &str,
        opts: DcpOptions,
        from: StartFrom,
        finished: &BTreeSet<VbId>,
    ) -> Result<DcpStream, DcpError> {
        let connect_err = |source| DcpError::Connect {
            addr: addr.to_string(),
            source,
        };
        let mut client = match Client::connect(addr, opts.connect.clone()).await {
            Ok(c) => c,
            Err(ClientError::Io(e)) => return Err(connect_err(e)),
            Err(ClientError::Closed) => {
                return Err(connect_err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "the server closed the connection during the bootstrap",
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let positions = match from {
            StartFrom::Beginning => {
                StreamPositions::from_beginning(client.num_vbuckets().ok_or(DcpError::NoBucket)?)
            }
            StartFrom::Now => StreamPositions::from_now(&mut client).await?,
            StartFrom::Positions(p) => {
                if let Some(n) = client.num_vbuckets() {
                    if let Some(bad) = p.iter().find(|pos| pos.vb.0 >= n) {
                        return Err(DcpError::PositionsMismatch {
                            vb: bad.vb,
                            num_vbuckets: n,
                        });
                    }
                }
                p
            }
        };
        handshake::run(&mut client, &opts).await?;
        let (socket, already_read) = client.into_parts();
        let link = Link::spawn(socket, already_read, opts.dead_after());
        let mut stream = DcpStream {
            link,
            acks: Acks::new(opts.window_bytes),
            opts,
            vbs: BTreeMap::new(),
            pending: HashMap::new(),
            next_opaque: 1,
            live: 0,
            positions,
            vb_state_answers: Vec::new(),
            takeovers: BTreeSet::new(),
        };
        let vbs: Vec<VbId> = stream.positions.iter().map(|p| p.vb).collect();
        for vb in vbs {
            if finished.contains(&vb) {
                stream.vbs.insert(
                    vb,
                    VbEntry {
                        state: VbStream::Done,
                        rollbacks: 0,
                    },
                );
            } else {
                stream.live += 1;
                stream.request(vb);
            }
        }
        tracing::debug!(name = %stream.opts.name, streams = stream.live, "DCP stream open");
        Ok(stream)
    }

    /// The next event, in the order the producer sent them (per vbucket, stream order;
    /// vbuckets interleave). Answers to stream requests, rollbacks and stream re-requests
    /// are handled here, so call it continuously.
    ///
    /// Cancel-safe: nothing is lost if the future is dropped before it completes (e.g. in a
    /// `tokio::select!` beside a shutdown signal).
    ///
    /// Errors: [`DcpError::AllStreamsEnded`] once every vbucket is done;
    /// [`DcpError::StreamRequest`] drops one vbucket and the stream goes on; errors for
    /// which [`DcpError::is_connection_lost`] holds end this connection (see
    /// [`ReconnectingStream`](super::ReconnectingStream)).
    pub async fn next(&mut self) -> Result<DcpEvent, DcpError> {
        loop {
            if self.live == 0 {
                return Err(DcpError::AllStreamsEnded);
            }
            if let Some(ack) = self.acks.due(Instant::now()) {
                self.link.send(ack);
            }
            for opaque in std::mem::take(&mut self.vb_state_answers) {
                // The application handled the state change it was given: the producer
                // may go on with the takeover.
                let answer = Packet::response(
                    Opcode::DcpSetVbucketState.byte(),
                    sluice_proto::Status::Success,
                    opaque,
                );
                self.link.send(answer.to_vec());
            }
            let inbound = self.link.recv().await?;
            if let Some(event) = self.handle(inbound)? {
                return Ok(event);
            }
        }
    }

    /// The position of every vbucket after the last event delivered: save these to resume
    /// later without missing or repeating anything.
    pub fn positions(&self) -> &StreamPositions {
        &self.positions
    }

    /// Vbuckets whose stream ended for good (ok / closed) or was refused.
    pub fn finished_vbuckets(&self) -> BTreeSet<VbId> {
        self.vbs
            .iter()
            .filter(|(_, e)| e.state == VbStream::Done)
            .map(|(vb, _)| *vb)
            .collect()
    }

    /// Vbuckets still streaming (or being requested).
    pub fn live_streams(&self) -> usize {
        self.live
    }

    /// Asks the producer to stop streaming `vb` (DCP_CLOSE_STREAM). Changes already on
    /// their way are still delivered; a `StreamEnd { reason: closed }` event then marks the
    /// end, after which `vb` is finished. Only a vbucket that is streaming can be closed:
    /// `false` if `vb` is still being requested, rolling back, or already finished.
    pub fn close_stream(&mut self, vb: VbId) -> bool {
        if !matches!(
            self.vbs.get(&vb).map(|e| e.state),
            Some(VbStream::Streaming { .. })
        ) {
            return false;
        }
        let opaque = self.take_opaque();
        self.link
            .send(Packet::request(Opcode::DcpCloseStream.byte(), vb.0, opaque).to_vec());
        self.pending.insert(opaque, Pending::CloseStream(vb));
        true
    }

    /// Requests `pos.vb` again from `pos`: after a reported rollback
    /// ([`RollbackMode::Report`](super::RollbackMode::Report)), or to restart a finished vbucket. `false` if the vbucket
    /// is still streaming or being requested.
    pub fn restart(&mut self, pos: DcpPosition) -> bool {
        let vb = pos.vb;
        let state = self.vbs.get(&vb).map(|e| e.state);
        match state {
            Some(VbStream::Parked) => {}
            Some(VbStream::Done) | None => self.live += 1,
            Some(_) => return false,
        }
        self.positions.insert(pos);
        self.request(vb);
        true
    }

    /// Asks the producer to hand `vb` over to this client (a takeover stream): the stream is
    /// closed and requested again with the takeover flag from the current position. The
    /// producer sends everything, then `VbucketState` events (pending, then active) and a
    /// `StreamEnd` ok. A vbucket still being requested (or re-requested after a rollback)
    /// is taken over as soon as the producer accepts it: its acceptance is no event, and an
    /// idle vbucket sends nothing after it, so a caller waiting for one could wait forever.
    /// `false` if `vb` is neither streaming nor being requested.
    pub fn takeover(&mut self, vb: VbId) -> bool {
        match self.vbs.get(&vb).map(|e| e.state) {
            Some(VbStream::Streaming { .. }) => {
                if !self.close_stream(vb) {
                    return false;
                }
            }
            Some(VbStream::Requested { .. } | VbStream::FetchingLog) => {}
            _ => return false,
        }
        self.takeovers.insert(vb);
        true
    }

    /// Tells the producer how far this consumer's copy of `vb` is: `in_memory` applied,
    /// `persisted` on disk (DCP_SEQNO_ACKNOWLEDGED with Sluice's 16-byte extras). The
    /// producer counts it for the `consumer_name` of the options when it waits for
    /// durability. No answer comes back.
    pub fn ack_seqno(&mut self, vb: VbId, in_memory: Seqno, persisted: Seqno) {
        let mut extras = [0u8; 16];
        extras[..8].copy_from_slice(&in_memory.0.to_be_bytes());
        extras[8..].copy_from_slice(&persisted.0.to_be_bytes());
        self.link.send(
            Packet::request(Opcode::DcpSeqnoAcknowledged.byte(), vb.0, 0)
                .extras(&extras)
                .to_vec(),
        );
    }

    /// The DCP_OPEN name of this connection.
    pub fn name(&self) -> &str {
        &self.opts.name
    }

    pub(super) fn take_opaque(&mut self) -> u32 {
        let o = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1).max(1);
        o
    }

    /// Sends a stream request for `vb` from its current position.
    pub(super) fn request(&mut self, vb: VbId) {
        self.request_with(vb, StreamFlags(0));
    }

    /// [`Self::request`] with stream flags (a takeover).
    pub(super) fn request_with(&mut self, vb: VbId, flags: StreamFlags) {
        let pos = *self
            .positions
            .get(vb)
            .expect("every streamed vbucket has a position");
        let opaque = self.take_opaque();
        let mut req = pos.stream_request(self.opts.end);
        req.flags = flags;
        let extras = req.encode();
        let bytes = Packet::request(Opcode::DcpStreamReq.byte(), vb.0, opaque)
            .extras(&extras)
            .to_vec();
        self.link.send(bytes);
        self.pending.insert(opaque, Pending::StreamRequest(vb));
        let entry = self.vbs.entry(vb).or_insert(VbEntry {
            state: VbStream::Done,
            rollbacks: 0,
        });
        entry.state = VbStream::Requested { opaque };
    }

    pub(super) fn finish(&mut self, vb: VbId) {
        if let Some(e) = self.vbs.get_mut(&vb) {
            if e.state != VbStream::Done {
                e.state = VbStream::Done;
                self.live -= 1;
            }
        }
    }

    /// Flow control: `wire_len` bytes were consumed.
    pub(super) fn consumed(&mut self, wire_len: usize) {
        if let Some(ack) = self.acks.consumed(wire_len, Instant::now()) {
            self.link.send(ack);
        }
    }
}
