//! Pipelined KV sets on one connection: the load, and each batch of the background
//! writers. Up to [`WINDOW`] sets in flight; a temporary failure (the server pushing back
//! while it frees memory) is retried after a short pause, as a real client would.

use sluice_client::{Client, Opcode, Packet, Status};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::BenchError;
use crate::load::drive::ANSWER_GRACE;

/// Sets in flight per connection: enough to hide the round trip.
const WINDOW: usize = 64;
const TEMPFAIL_BACKOFF: Duration = Duration::from_millis(2);
/// The JSON datatype bit: the documents are JSON, said so rather than sniffed.
const DATATYPE_JSON: u8 = 0x01;

/// Sets every `(key, value)`; counts each success in `done`. Returns the number set.
pub async fn set_all(
    client: &mut Client,
    items: impl Iterator<Item = (String, String)>,
    done: &AtomicU64,
) -> Result<u64, BenchError> {
    let extras = [0u8; 8];
    let mut items = items.fuse();
    let mut sent: VecDeque<(String, String)> = VecDeque::new();
    let mut retry: VecDeque<(String, String)> = VecDeque::new();
    let mut ok = 0u64;
    loop {
        while client.in_flight() < WINDOW {
            let Some((key, value)) = retry.pop_front().or_else(|| items.next()) else {
                break;
            };
            let vb = client.vbucket_of(key.as_bytes()).0;
            let req = Packet::request(Opcode::Set.byte(), vb, 0)
                .extras(&extras)
                .datatype(DATATYPE_JSON)
                .key(key.as_bytes())
                .value(value.as_bytes());
            client.queue_request(req);
            sent.push_back((key, value));
        }
        if client.in_flight() == 0 {
            return Ok(ok);
        }
        client.flush().await?;
        let resp = tokio::time::timeout(ANSWER_GRACE, client.read_response())
            .await
            .map_err(|_| BenchError::NoAnswer(ANSWER_GRACE))??;
        let item = sent.pop_front().expect("one item per request in flight");
        match resp.status_code {
            s if s == Status::Success.code() => {
                ok += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            s if s == Status::Etmpfail.code() || s == Status::Enomem.code() => {
                retry.push_back(item);
                tokio::time::sleep(TEMPFAIL_BACKOFF).await;
            }
            status => return Err(BenchError::Prefill { status }),
        }
    }
}
