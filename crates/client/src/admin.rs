//! Connection and node operations: noop, stats, observe_seqno, get_cluster_config.

use bytes::Bytes;
use sluice_proto::encode::Packet;
use sluice_proto::Opcode;
use sluice_types::{Seqno, VbId, VbUuid};

use crate::client::Client;
use crate::error::ClientError;
use crate::kv::be_u64;
use crate::results::ObserveSeqno;

/// A STAT group answers with one packet per stat; this bounds a runaway answer.
const STATS_ENTRIES_MAX: usize = 1_000_000;

impl Client {
    pub async fn noop(&mut self) -> Result<(), ClientError> {
        let req = Packet::request(Opcode::Noop.byte(), 0, 0);
        self.call(req).await?.into_success()?;
        Ok(())
    }

    /// STAT for `group` ("" = the general stats): (name, value) pairs in the server's order.
    pub async fn stats(&mut self, group: &str) -> Result<Vec<(String, String)>, ClientError> {
        let req = Packet::request(Opcode::Stat.byte(), 0, 0).key(group.as_bytes());
        let mut resp = self.call(req).await?;
        let opaque = resp.opaque;
        let mut out = Vec::new();
        loop {
            resp = resp.into_success()?;
            // The terminator is an answer with neither key nor value.
            if resp.key.is_empty() && resp.value.is_empty() {
                return Ok(out);
            }
            if out.len() >= STATS_ENTRIES_MAX {
                return Err(ClientError::Unexpected("STAT answer without an end"));
            }
            out.push((
                String::from_utf8_lossy(&resp.key).into_owned(),
                String::from_utf8_lossy(&resp.value).into_owned(),
            ));
            resp = self.read_more(Opcode::Stat.byte(), opaque).await?;
        }
    }

    /// OBSERVE_SEQNO: the vbucket's persisted and current seqnos, and whether `vb_uuid` is
    /// still its newest branch.
    pub async fn observe_seqno(
        &mut self,
        vb: VbId,
        vb_uuid: VbUuid,
    ) -> Result<ObserveSeqno, ClientError> {
        let uuid = vb_uuid.0.to_be_bytes();
        let req = Packet::request(Opcode::ObserveSeqno.byte(), vb.0, 0).value(&uuid);
        let resp = self.call(req).await?.into_success()?;
        parse_observe_seqno(&resp.value)
    }

    /// The cluster map of the selected bucket, parsed.
    pub async fn get_cluster_config(&mut self) -> Result<serde_json::Value, ClientError> {
        let bytes = self.get_cluster_config_bytes().await?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    pub(crate) async fn get_cluster_config_bytes(&mut self) -> Result<Bytes, ClientError> {
        let req = Packet::request(Opcode::GetClusterConfig.byte(), 0, 0);
        Ok(self.call(req).await?.into_success()?.value)
    }
}

/// Format 0: `u8 0, u16 vb, u64 uuid, u64 persisted, u64 current` (27 bytes);
/// format 1 (hard failover) adds `u64 old_uuid, u64 old_last_seqno` (43 bytes).
fn parse_observe_seqno(v: &[u8]) -> Result<ObserveSeqno, ClientError> {
    let bad = ClientError::Unexpected("malformed OBSERVE_SEQNO answer");
    let (format, expected_len) = match v.first() {
        Some(0) => (0, 27),
        Some(1) => (1, 43),
        _ => return Err(bad),
    };
    if v.len() != expected_len {
        return Err(bad);
    }
    let u64_at = |at: usize| be_u64(&v[at..at + 8]).unwrap_or(0);
    Ok(ObserveSeqno {
        vb: VbId(u16::from_be_bytes([v[1], v[2]])),
        vb_uuid: VbUuid(u64_at(3)),
        persisted: Seqno(u64_at(11)),
        current: Seqno(u64_at(19)),
        failed_over: (format == 1).then(|| (VbUuid(u64_at(27)), Seqno(u64_at(35)))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(format: u8, extra: &[u64]) -> Vec<u8> {
        let mut v = vec![format];
        v.extend_from_slice(&7u16.to_be_bytes());
        for x in [0xabcd_u64, 5, 9].iter().chain(extra) {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    #[test]
    fn parses_both_observe_seqno_formats() {
        let o = parse_observe_seqno(&answer(0, &[])).unwrap();
        assert_eq!(
            (o.vb, o.vb_uuid, o.persisted, o.current, o.failed_over),
            (VbId(7), VbUuid(0xabcd), Seqno(5), Seqno(9), None)
        );
        let o = parse_observe_seqno(&answer(1, &[0x1111, 4])).unwrap();
        assert_eq!(o.failed_over, Some((VbUuid(0x1111), Seqno(4))));
    }

    #[test]
    fn rejects_truncated_or_unknown_observe_seqno_answers() {
        assert!(parse_observe_seqno(&answer(0, &[])[..20]).is_err());
        assert!(parse_observe_seqno(&answer(2, &[])).is_err());
        assert!(parse_observe_seqno(&answer(1, &[])).is_err());
        assert!(parse_observe_seqno(&[]).is_err());
    }
}
