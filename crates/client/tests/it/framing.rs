//! What the client does with awkward bytes: oversized frames, a close mid-frame, packets that
//! are not responses, mismatched opaques, and typed calls while a pipeline is busy.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{answer, scripted_server, Reply, Req};
use sluice_client::{Client, ClientError, ConnectOptions, Opcode, Packet, Status};
use sluice_proto::FrameError;

async fn plain(script: impl FnMut(Req) -> Reply + Send + 'static) -> Client {
    let addr = scripted_server(script).await;
    Client::connect(addr, ConnectOptions::plain())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_body_over_the_packet_limit_is_refused_before_buffering() {
    let mut c = plain(|req| {
        let mut header = answer(&req, Status::Success).to_vec();
        header[8..12].copy_from_slice(&(31u32 << 20).to_be_bytes()); // 31 MiB > 30 MiB
        Reply::Bytes(header)
    })
    .await;
    let err = c.noop().await.unwrap_err();
    assert!(
        matches!(err, ClientError::Frame(FrameError::TooLarge { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn a_close_in_the_middle_of_a_frame_is_reported() {
    let mut c = plain(|req| {
        let full = answer(&req, Status::Success).value(b"0123456789").to_vec();
        Reply::BytesThenClose(full[..30].to_vec())
    })
    .await;
    assert!(matches!(c.noop().await, Err(ClientError::Closed)));
}

#[tokio::test]
async fn server_requests_and_foreign_opaques_are_unexpected() {
    let mut c = plain(|req| {
        let mut p = answer(&req, Status::Success);
        p.magic = sluice_proto::Magic::ServerRequest;
        Reply::Bytes(p.to_vec())
    })
    .await;
    assert!(matches!(c.noop().await, Err(ClientError::Unexpected(_))));

    let mut c = plain(|req| {
        let p = Packet::response(req.opcode, Status::Success, req.opaque + 1);
        Reply::Bytes(p.to_vec())
    })
    .await;
    assert!(matches!(c.noop().await, Err(ClientError::Unexpected(_))));
}

#[tokio::test]
async fn statuses_map_to_typed_errors() {
    let mut c = plain(|req| {
        let status = if req.key == b"missing" {
            Status::KeyEnoent
        } else {
            Status::Etmpfail
        };
        Reply::Bytes(answer(&req, status).to_vec())
    })
    .await;
    assert!(c.get(b"missing").await.unwrap_err().is_not_found());
    let err = c.get(b"busy").await.unwrap_err();
    assert_eq!(err.status(), Some(Status::Etmpfail));
}

#[tokio::test]
async fn unknown_status_codes_are_kept() {
    let mut c = plain(|req| {
        let mut p = answer(&req, Status::Success);
        p.vbucket_or_status = 0x7777;
        Reply::Bytes(p.to_vec())
    })
    .await;
    assert!(matches!(
        c.noop().await,
        Err(ClientError::UnknownStatus(0x7777))
    ));
}

#[tokio::test]
async fn pipelined_requests_get_distinct_opaques_and_block_typed_calls() {
    let mut c = plain(|req| Reply::Bytes(answer(&req, Status::Success).to_vec())).await;
    let a = c
        .send_request(Packet::request(Opcode::Noop.byte(), 0, 12345))
        .await
        .unwrap();
    let b = c
        .send_request(Packet::request(Opcode::Noop.byte(), 0, 12345))
        .await
        .unwrap();
    assert_ne!(a, b, "the packet's own opaque is replaced");
    let busy = c.noop().await.unwrap_err();
    assert!(
        matches!(busy, ClientError::PipelineBusy { in_flight: 2 }),
        "{busy}"
    );
    assert_eq!(c.read_response().await.unwrap().opaque, a);
    assert_eq!(c.read_response().await.unwrap().opaque, b);
    c.noop().await.unwrap();
}

#[tokio::test]
async fn stats_are_read_until_the_empty_terminator() {
    let mut c = plain(|req| {
        let mut out = Vec::new();
        for (k, v) in [("pid", "42"), ("uptime", "7")] {
            answer(&req, Status::Success)
                .key(k.as_bytes())
                .value(v.as_bytes())
                .encode_into(&mut out);
        }
        answer(&req, Status::Success).encode_into(&mut out);
        Reply::Bytes(out)
    })
    .await;
    let stats = c.stats("").await.unwrap();
    assert_eq!(
        stats,
        vec![("pid".into(), "42".into()), ("uptime".into(), "7".into())]
    );
}
