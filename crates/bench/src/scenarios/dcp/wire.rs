//! How many bytes an event took on the wire, from the message layouts (24-byte header,
//! extras, key, value): the consumer API hands over decoded events, not frames. Exact for
//! what this server sends a consumer that negotiated no framing extras and no compression
//! (v1 snapshot markers, v2 deletions); noops are answered inside the client and not counted.

use sluice_client::dcp::DcpEvent;
use sluice_proto::dcp::message::{
    COMPLETION_EXTRAS_LEN, DELETION_V1_EXTRAS_LEN, DELETION_V2_EXTRAS_LEN, EXPIRATION_EXTRAS_LEN,
    MUTATION_EXTRAS_LEN, PREPARE_EXTRAS_LEN, SET_VBUCKET_STATE_EXTRAS_LEN,
    SNAPSHOT_MARKER_V1_EXTRAS_LEN, STREAM_END_EXTRAS_LEN,
};
use sluice_proto::HEADER_LEN;

pub fn wire_len(event: &DcpEvent) -> usize {
    let extras = match event {
        DcpEvent::Mutation(_) => MUTATION_EXTRAS_LEN,
        DcpEvent::Deletion(d) if d.delete_time.is_some() => DELETION_V2_EXTRAS_LEN,
        DcpEvent::Deletion(_) => DELETION_V1_EXTRAS_LEN,
        DcpEvent::Expiration(_) => EXPIRATION_EXTRAS_LEN,
        DcpEvent::SnapshotMarker { .. } => SNAPSHOT_MARKER_V1_EXTRAS_LEN,
        DcpEvent::StreamEnd { .. } => STREAM_END_EXTRAS_LEN,
        DcpEvent::VbucketState { .. } => SET_VBUCKET_STATE_EXTRAS_LEN,
        DcpEvent::Prepare { .. } => PREPARE_EXTRAS_LEN,
        DcpEvent::Commit { key, .. } | DcpEvent::Abort { key, .. } => {
            return HEADER_LEN + COMPLETION_EXTRAS_LEN + key.len()
        }
        // Answers to a stream request, not stream messages.
        DcpEvent::Rollback { .. } | DcpEvent::StreamOpened { .. } => return 0,
    };
    let body = event.item().map_or(0, |i| i.key.len() + i.value.len());
    HEADER_LEN + extras + body
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_client::dcp::{DcpItem, SnapshotFlags, StreamEndReason};
    use sluice_proto::dcp::message::{DcpDocument, SnapshotMarker};
    use sluice_proto::dcp::DcpMessage;
    use sluice_types::{Cas, Datatype, Seqno, VbId, VbState};

    fn doc(value: &'static [u8], delete_time: Option<u32>) -> DcpDocument {
        DcpDocument {
            key: Bytes::from_static(b"sluice:0000000000000000000000042"),
            value: Bytes::from_static(value),
            datatype: Datatype(0),
            cas: Cas(7),
            seqno: Seqno(9),
            rev_seqno: 1,
            flags: 0,
            expiry: 0,
            delete_time,
        }
    }

    fn item(d: &DcpDocument) -> DcpItem {
        DcpItem {
            vb: VbId(3),
            key: d.key.clone(),
            value: d.value.clone(),
            cas: d.cas,
            seqno: d.seqno,
            rev_seqno: d.rev_seqno,
            flags: d.flags,
            expiry: d.expiry,
            datatype: d.datatype,
            delete_time: d.delete_time,
        }
    }

    #[test]
    fn matches_the_encoder_for_every_kind() {
        let m = doc(b"abcdefghij", None);
        let d2 = doc(b"", Some(5));
        let d1 = doc(b"", None);
        let x = doc(b"", Some(6));
        let pairs = [
            (DcpEvent::Mutation(item(&m)), DcpMessage::Mutation(m)),
            (DcpEvent::Deletion(item(&d2)), DcpMessage::Deletion(d2)),
            (DcpEvent::Deletion(item(&d1)), DcpMessage::Deletion(d1)),
            (DcpEvent::Expiration(item(&x)), DcpMessage::Expiration(x)),
            (
                DcpEvent::SnapshotMarker {
                    vb: VbId(3),
                    start: Seqno(1),
                    end: Seqno(9),
                    flags: SnapshotFlags::DISK,
                },
                DcpMessage::SnapshotMarker(SnapshotMarker {
                    start: Seqno(1),
                    end: Seqno(9),
                    flags: SnapshotFlags::DISK,
                    sync: None,
                }),
            ),
            (
                DcpEvent::StreamEnd {
                    vb: VbId(3),
                    reason: StreamEndReason::Closed,
                },
                DcpMessage::StreamEnd(StreamEndReason::Closed),
            ),
            (
                DcpEvent::VbucketState {
                    vb: VbId(3),
                    state: VbState::Active,
                },
                DcpMessage::SetVbucketState(VbState::Active),
            ),
        ];
        for (event, msg) in pairs {
            assert_eq!(wire_len(&event), msg.wire_len(), "{event:?}");
        }
    }
}
