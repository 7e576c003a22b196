//! The seqno and history queries a consumer needs before streaming: GET_ALL_VB_SEQNOS and
//! GET_FAILOVER_LOG, and the "from now" starting point built from them.

use sluice_proto::body::{failover_log, vb_seqnos};
use sluice_proto::encode::Packet;
use sluice_proto::Opcode;
use sluice_types::{FailoverEntry, Seqno, VbId, VbState};

use super::error::DcpError;
use super::position::{DcpPosition, StreamPositions};
use crate::client::Client;
use crate::error::ClientError;

impl Client {
    /// The high seqno of every vbucket alive on the node, sorted by vbucket.
    pub async fn get_all_vb_seqnos(&mut self) -> Result<Vec<(VbId, Seqno)>, ClientError> {
        let req = Packet::request(Opcode::GetAllVbSeqnos.byte(), 0, 0);
        let resp = self.call(req).await?.into_success()?;
        vb_seqnos::decode(&resp.value).ok_or(ClientError::Unexpected(
            "GET_ALL_VB_SEQNOS answer is not a list of (u16, u64)",
        ))
    }

    /// The high seqno of every vbucket in `state` on the node, sorted by vbucket (the
    /// 4-byte state filter of GET_ALL_VB_SEQNOS).
    pub async fn get_vb_seqnos_in(
        &mut self,
        state: VbState,
    ) -> Result<Vec<(VbId, Seqno)>, ClientError> {
        let filter = (state as u32).to_be_bytes();
        let req = Packet::request(Opcode::GetAllVbSeqnos.byte(), 0, 0).extras(&filter);
        let resp = self.call(req).await?.into_success()?;
        vb_seqnos::decode(&resp.value).ok_or(ClientError::Unexpected(
            "GET_ALL_VB_SEQNOS answer is not a list of (u16, u64)",
        ))
    }

    /// `vb`'s failover log, newest entry first.
    pub async fn get_failover_log(&mut self, vb: VbId) -> Result<Vec<FailoverEntry>, ClientError> {
        let req = Packet::request(Opcode::GetFailoverLog.byte(), vb.0, 0);
        let resp = self.call(req).await?.into_success()?;
        failover_log::decode(&resp.value).ok_or(ClientError::Unexpected("malformed failover log"))
    }
}

impl StreamPositions {
    /// "From now": every vbucket at its current high seqno, on its newest branch, as a
    /// complete snapshot. Built from the node's own seqnos and failover logs, so the stream
    /// requests are accepted as they are: asking from a made-up position and following
    /// the rollbacks instead is how clients end up re-reading everything from 0
    /// (dcp-lessons.md, client problem 1).
    ///
    /// Seqnos are read before the failover logs: a branch that starts in between starts at
    /// or above the seqno read, so the pair is still a point of that newest branch.
    pub async fn from_now(client: &mut Client) -> Result<StreamPositions, DcpError> {
        let seqnos = client.get_all_vb_seqnos().await?;
        // Pipelined: one round trip for all the logs instead of one per vbucket.
        for (vb, _) in &seqnos {
            client.queue_request(Packet::request(Opcode::GetFailoverLog.byte(), vb.0, 0));
        }
        client.flush().await?;
        let mut positions = Vec::with_capacity(seqnos.len());
        let mut failure = None;
        for (vb, high) in &seqnos {
            let resp = client.read_response().await?;
            if failure.is_some() {
                continue; // drain the rest so the connection stays in step
            }
            if resp.opcode != Opcode::GetFailoverLog.byte() {
                failure = Some(DcpError::Unexpected("answer to GET_FAILOVER_LOG expected"));
                continue;
            }
            match resp.into_success().map(|r| failover_log::decode(&r.value)) {
                Ok(Some(log)) => positions.push(DcpPosition::at(*vb, log[0].uuid, *high)),
                Ok(None) => failure = Some(DcpError::Unexpected("malformed failover log")),
                Err(e) => failure = Some(e.into()),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(StreamPositions::from_positions(positions)),
        }
    }
}
