//! Samples a process's resident memory every 100 ms while a phase runs, keeping the peak.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

use crate::harness::proc_stats::rss_bytes;

pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// A running sampler; [`RssSampler::finish`] stops it and gives the figures.
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    task: JoinHandle<()>,
    start_bytes: u64,
}

/// Resident memory over a phase.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RssSummary {
    pub start_bytes: u64,
    pub peak_bytes: u64,
    pub end_bytes: u64,
    pub samples: u64,
}

impl RssSampler {
    pub fn start(pid: u32) -> std::io::Result<RssSampler> {
        let start_bytes = rss_bytes(pid)?;
        let peak = Arc::new(AtomicU64::new(start_bytes));
        let samples = Arc::new(AtomicU64::new(1));
        let task = tokio::spawn({
            let (peak, samples) = (peak.clone(), samples.clone());
            async move {
                let mut tick = tokio::time::interval(SAMPLE_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    // The process may be gone at the very end; the phase reports that itself.
                    if let Ok(b) = rss_bytes(pid) {
                        peak.fetch_max(b, Ordering::Relaxed);
                        samples.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        Ok(RssSampler {
            peak,
            samples,
            task,
            start_bytes,
        })
    }

    pub fn finish(self, pid: u32) -> RssSummary {
        self.task.abort();
        let end_bytes = rss_bytes(pid).unwrap_or(0);
        RssSummary {
            start_bytes: self.start_bytes,
            peak_bytes: self.peak.load(Ordering::Relaxed).max(end_bytes),
            end_bytes,
            samples: self.samples.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn samples_this_process() {
        let me = std::process::id();
        let s = RssSampler::start(me).unwrap();
        tokio::time::sleep(SAMPLE_EVERY * 3).await;
        let r = s.finish(me);
        assert!(r.samples >= 2, "{r:?}");
        assert!(r.peak_bytes >= r.start_bytes && r.peak_bytes >= r.end_bytes);
    }
}
