//! The bucket's memory as the node reports it (STAT "" and STAT memory): how full the
//! quota is and how much of the data is resident, to say what a setup really measured.

use serde::Serialize;
use sluice_client::Client;

use crate::error::BenchError;

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct MemoryStats {
    pub mem_used_bytes: Option<u64>,
    pub quota_bytes: Option<u64>,
    pub high_watermark_bytes: Option<u64>,
    pub items: Option<u64>,
    pub non_resident_items: Option<u64>,
    pub resident_pct: Option<u64>,
}

impl MemoryStats {
    pub async fn read(client: &mut Client) -> Result<MemoryStats, BenchError> {
        let mut all = client.stats("").await?;
        all.extend(client.stats("memory").await?);
        Ok(MemoryStats::from_pairs(&all))
    }

    fn from_pairs(pairs: &[(String, String)]) -> MemoryStats {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.parse().ok())
        };
        MemoryStats {
            mem_used_bytes: get("mem_used"),
            quota_bytes: get("ep_max_size"),
            high_watermark_bytes: get("ep_mem_high_wat"),
            items: get("curr_items"),
            non_resident_items: get("ep_num_non_resident"),
            resident_pct: get("vb_active_perc_mem_resident"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_named_stats() {
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        let m = MemoryStats::from_pairs(&[
            p("curr_items", "500000"),
            p("vb_active_perc_mem_resident", "9"),
            p("mem_used", "60000000"),
            p("ep_max_size", "67108864"),
            p("ep_write_failure_reason", ""),
        ]);
        assert_eq!((m.items, m.resident_pct), (Some(500_000), Some(9)));
        assert_eq!(
            (m.mem_used_bytes, m.quota_bytes),
            (Some(60_000_000), Some(67_108_864))
        );
        assert_eq!(m.non_resident_items, None);
    }
}
