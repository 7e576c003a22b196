//! `--breakdown`: where a step's replicated writes spent their time, from the nodes' own
//! stage histograms (STAT `replication`, `stage:NAME:hist`; see the server's
//! `dcp/stages.rs`). Each histogram is of the time from a write to its stage; the nodes'
//! are merged, and the snapshot taken when the warm-up ends is subtracted from the one taken
//! when the step ends, so the figures are the measured part of the step only.

use base64::Engine as _;
use hdrhistogram::errors::{AdditionError, SubtractionError};
use hdrhistogram::serialization::{DeserializeError, Deserializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A STAT answer whose histograms cannot be read or combined.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("STAT {key}: not base64")]
    NotBase64 {
        key: String,
        #[source]
        source: base64::DecodeError,
    },
    #[error("STAT {key}: not an HdrHistogram")]
    NotHistogram {
        key: String,
        #[source]
        source: DeserializeError,
    },
    #[error("merging STAT {key}")]
    Merge {
        key: String,
        #[source]
        source: AdditionError,
    },
    #[error("stage {stage} went backwards")]
    Backwards {
        stage: String,
        #[source]
        source: SubtractionError,
    },
}

/// The merged histograms of the nodes at one instant, by stage, in the server's order.
#[derive(Debug, Clone, Default)]
pub struct StageSnapshot {
    pub stages: Vec<(String, Histogram<u64>)>,
}

/// One stage over a step: changes that passed it, and the time since their write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageTiming {
    pub stage: String,
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl StageSnapshot {
    /// Adds one node's STAT `replication` answer.
    pub fn add_node(&mut self, stats: &[(String, String)]) -> Result<(), StageError> {
        for (key, value) in stats {
            let Some(stage) = key
                .strip_prefix("stage:")
                .and_then(|k| k.strip_suffix(":hist"))
            else {
                continue;
            };
            let h = decode_histogram(key, value)?;
            match self.stages.iter_mut().find(|(s, _)| s == stage) {
                Some((_, merged)) => merged.add(&h).map_err(|source| StageError::Merge {
                    key: key.clone(),
                    source,
                })?,
                None => self.stages.push((stage.to_string(), h)),
            }
        }
        Ok(())
    }

    /// What passed each stage between `earlier` and this snapshot.
    pub fn since(&self, earlier: &StageSnapshot) -> Result<Vec<StageTiming>, StageError> {
        let mut out = Vec::with_capacity(self.stages.len());
        for (stage, now) in &self.stages {
            let mut h = now.clone();
            if let Some((_, before)) = earlier.stages.iter().find(|(s, _)| s == stage) {
                h.subtract(before).map_err(|source| StageError::Backwards {
                    stage: stage.clone(),
                    source,
                })?;
            }
            let q = |q: f64| {
                if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(q) as f64
                }
            };
            out.push(StageTiming {
                stage: stage.clone(),
                count: h.len(),
                p50_us: q(0.5),
                p99_us: q(0.99),
            });
        }
        Ok(out)
    }
}

/// A STAT value that is a histogram: HdrHistogram V2, base64 (the server's
/// `encode_histogram`).
pub fn decode_histogram(key: &str, value: &str) -> Result<Histogram<u64>, StageError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|source| StageError::NotBase64 {
            key: key.to_string(),
            source,
        })?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|source| StageError::NotHistogram {
            key: key.to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Serializer, V2Serializer};

    fn stat(stage: &str, values_us: &[u64]) -> (String, String) {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        for v in values_us {
            h.record(*v).unwrap();
        }
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&h, &mut bytes).unwrap();
        (
            format!("stage:{stage}:hist"),
            base64::engine::general_purpose::STANDARD.encode(bytes),
        )
    }

    #[test]
    fn nodes_are_merged_and_the_earlier_snapshot_subtracted() {
        let mut start = StageSnapshot::default();
        start.add_node(&[stat("sent", &[5_000; 10])]).unwrap();
        let mut end = StageSnapshot::default();
        end.add_node(&[stat("sent", &[5_000; 10]), stat("applied", &[300; 4])])
            .unwrap();
        end.add_node(&[stat("sent", &[100; 99]), ("other".into(), "x".into())])
            .unwrap();
        let timings = end.since(&start).unwrap();
        assert_eq!(timings.len(), 2);
        let sent = &timings[0];
        assert_eq!((sent.stage.as_str(), sent.count), ("sent", 99));
        assert!((99.0..=101.0).contains(&sent.p99_us), "{sent:?}");
        let applied = &timings[1];
        assert_eq!((applied.stage.as_str(), applied.count), ("applied", 4));
        assert!((299.0..=301.0).contains(&applied.p50_us), "{applied:?}");
    }

    #[test]
    fn a_stat_that_is_not_a_histogram_is_an_error() {
        let mut s = StageSnapshot::default();
        assert!(s
            .add_node(&[("stage:sent:hist".into(), "!!".into())])
            .is_err());
    }
}
