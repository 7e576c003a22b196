//! Fills the whole key space before timing, so gets hit (memaslap's runs had no misses either).

use sluice_client::{Client, Opcode, Packet, Status};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

use crate::error::BenchError;
use crate::load::drive::ANSWER_GRACE;
use crate::load::workload::Workload;

/// Sets in flight per connection while prefilling: enough to hide the round trip.
const PREFILL_WINDOW: usize = 64;
/// Pause after a temporary failure before sending more.
const TEMPFAIL_BACKOFF: Duration = Duration::from_millis(2);

/// Writes every key once, connection `i` taking keys `i, i + n, …`. Returns the clients.
pub async fn prefill(
    clients: Vec<Client>,
    work: Arc<Workload>,
    completed: Arc<AtomicU64>,
) -> Result<Vec<Client>, BenchError> {
    let n = clients.len() as u64;
    let mut tasks = JoinSet::new();
    for (i, mut client) in clients.into_iter().enumerate() {
        let work = work.clone();
        let completed = completed.clone();
        tasks.spawn(async move {
            let keys = (i as u64..work.keys).step_by(n as usize);
            fill(&mut client, &work, keys, &completed).await?;
            Ok::<_, BenchError>(client)
        });
    }
    let mut out = Vec::with_capacity(n as usize);
    while let Some(joined) = tasks.join_next().await {
        out.push(joined.map_err(|e| BenchError::Io(std::io::Error::other(e)))??);
    }
    Ok(out)
}

async fn fill(
    client: &mut Client,
    work: &Workload,
    mut keys: impl Iterator<Item = u64>,
    completed: &AtomicU64,
) -> Result<(), BenchError> {
    let extras = [0u8; 8];
    let mut more = true;
    // Keys in flight, in send order (answers come back in that order), and keys a temporary
    // failure sent back: a bucket larger than its quota pushes back while the pager evicts,
    // and a real client retries.
    let mut sent: VecDeque<u64> = VecDeque::new();
    let mut retry: VecDeque<u64> = VecDeque::new();
    while more || !retry.is_empty() || client.in_flight() > 0 {
        while client.in_flight() < PREFILL_WINDOW {
            let next = match retry.pop_front() {
                Some(i) => Some(i),
                None if more => keys.next(),
                None => None,
            };
            let Some(i) = next else {
                more = false;
                break;
            };
            let wk = work.wire_key(i);
            let vb = client.vbucket_of(&wk.logical).0;
            let req = Packet::request(Opcode::Set.byte(), vb, 0)
                .extras(&extras)
                .key(wk.bytes())
                .value(&work.value);
            client.queue_request(req);
            sent.push_back(i);
        }
        client.flush().await?;
        if client.in_flight() > 0 {
            let resp = tokio::time::timeout(ANSWER_GRACE, client.read_response())
                .await
                .map_err(|_| BenchError::NoAnswer(ANSWER_GRACE))??;
            let i = sent.pop_front().expect("one key per request in flight");
            match resp.status_code {
                s if s == Status::Success.code() => {
                    completed.fetch_add(1, Ordering::Relaxed);
                }
                s if s == Status::Etmpfail.code() || s == Status::Enomem.code() => {
                    retry.push_back(i);
                    tokio::time::sleep(TEMPFAIL_BACKOFF).await;
                }
                status => return Err(BenchError::Prefill { status }),
            }
        }
    }
    Ok(())
}
