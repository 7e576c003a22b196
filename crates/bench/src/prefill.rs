//! Fills the whole key space before timing, so gets hit (memaslap's runs had no misses either).

use sluice_client::{Client, Opcode, Packet, Status};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::task::JoinSet;

use crate::error::BenchError;
use crate::load::ANSWER_GRACE;
use crate::workload::{key, Workload};

/// Sets in flight per connection while prefilling: enough to hide the round trip.
const PREFILL_WINDOW: usize = 64;

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
    while more || client.in_flight() > 0 {
        while more && client.in_flight() < PREFILL_WINDOW {
            match keys.next() {
                Some(i) => {
                    let k = key(i);
                    let vb = client.vbucket_of(&k).0;
                    let req = Packet::request(Opcode::Set.byte(), vb, 0)
                        .extras(&extras)
                        .key(&k)
                        .value(&work.value);
                    client.queue_request(req);
                }
                None => more = false,
            }
        }
        client.flush().await?;
        if client.in_flight() > 0 {
            let resp = tokio::time::timeout(ANSWER_GRACE, client.read_response())
                .await
                .map_err(|_| BenchError::NoAnswer(ANSWER_GRACE))??;
            if resp.status_code != Status::Success.code() {
                return Err(BenchError::Prefill {
                    status: resp.status_code,
                });
            }
            completed.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}
