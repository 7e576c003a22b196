//! Before a drain is timed, the node must be doing nothing else: every change persisted
//! (couchbase buckets; STAT vbucket-seqno's `last_persisted_seqno` equal to `high_seqno`)
//! and the server's CPU quiet (storage compaction and eviction done, as far as can be seen);
//! and, like the peer baselines, the rest of the box quiet too (it is shared), for a bounded
//! time.

use sluice_client::Client;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::harness::proc_stats::{CpuSplit, PhaseCpu};

const POLL_EVERY: Duration = Duration::from_millis(200);
/// The server counts as quiet below this many cores busy over [`QUIET_WINDOW`].
const QUIET_CORES: f64 = 0.05;
/// Other processes on the box count as quiet below this (peer-baselines.md uses 0.3).
const QUIET_OTHERS_CORES: f64 = 0.3;
const QUIET_WINDOW: Duration = Duration::from_millis(500);

/// Waits until every vbucket has persisted its high seqno. Fails if the unpersisted count
/// does not go down for `stall`. Returns how long it waited.
pub async fn wait_persisted(client: &mut Client, stall: Duration) -> Result<Duration, BenchError> {
    let start = Instant::now();
    let mut best = (u64::MAX, Instant::now());
    loop {
        let left = unpersisted(&client.stats("vbucket-seqno").await?);
        if left == 0 {
            return Ok(start.elapsed());
        }
        if left < best.0 {
            best = (left, Instant::now());
        } else if best.1.elapsed() >= stall {
            return Err(BenchError::PersistenceStalled {
                unpersisted: left,
                waited: stall,
            });
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Waits until the server uses less than [`QUIET_CORES`] and everything else on the box
/// less than [`QUIET_OTHERS_CORES`], for at most `max`. Returns the wait and the last
/// reading (a box that never quiets down is reported, not fatal).
pub async fn wait_quiet(pid: u32, max: Duration) -> Result<(Duration, CpuSplit), BenchError> {
    let start = Instant::now();
    loop {
        let phase = PhaseCpu::start(pid)?;
        tokio::time::sleep(QUIET_WINDOW).await;
        let cpu = phase.split()?;
        let quiet = cpu.server_cores < QUIET_CORES && cpu.other_cores < QUIET_OTHERS_CORES;
        if quiet || start.elapsed() >= max {
            return Ok((start.elapsed(), cpu));
        }
    }
}

/// Sum over vbuckets of `high_seqno - last_persisted_seqno`.
fn unpersisted(stats: &[(String, String)]) -> u64 {
    let mut high: HashMap<&str, u64> = HashMap::new();
    let mut persisted: HashMap<&str, u64> = HashMap::new();
    for (k, v) in stats {
        let Some((vb, field)) = k.split_once(':') else {
            continue;
        };
        let Ok(n) = v.parse::<u64>() else { continue };
        match field {
            "high_seqno" => high.insert(vb, n),
            "last_persisted_seqno" => persisted.insert(vb, n),
            _ => None,
        };
    }
    high.iter()
        .map(|(vb, h)| h.saturating_sub(persisted.get(vb).copied().unwrap_or(0)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_not_persisted_yet() {
        let s = |k: &str, v: &str| (k.to_string(), v.to_string());
        let stats = [
            s("vb_0:high_seqno", "10"),
            s("vb_0:last_persisted_seqno", "4"),
            s("vb_0:uuid", "123"),
            s("vb_1:high_seqno", "3"),
            s("vb_1:last_persisted_seqno", "3"),
            s("vb_2:high_seqno", "2"),
        ];
        assert_eq!(unpersisted(&stats), 6 + 2);
        assert_eq!(unpersisted(&stats[3..5]), 0);
    }
}
