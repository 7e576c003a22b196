//! Which branch of a failover log (decoded by `sluice_proto::body::failover_log`) a consumer
//! goes back with.

use sluice_types::{FailoverEntry, Seqno, VbUuid};

/// The uuid of the branch that holds `seqno`: the newest entry that began at or below it.
/// Asking with it and `seqno` is a request the producer accepts without another rollback.
/// 0 (no history) when no entry is that old.
pub(crate) fn uuid_covering(log: &[FailoverEntry], seqno: Seqno) -> VbUuid {
    log.iter()
        .find(|e| e.seqno <= seqno)
        .map_or(VbUuid(0), |e| e.uuid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::body::failover_log;

    fn log(entries: &[(u64, u64)]) -> Vec<u8> {
        entries
            .iter()
            .flat_map(|(u, s)| [u.to_be_bytes(), s.to_be_bytes()].concat())
            .collect()
    }

    #[test]
    fn parses_and_picks_the_covering_branch() {
        let entries = failover_log::decode(&log(&[(30, 900), (20, 500), (10, 0)])).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(uuid_covering(&entries, Seqno(1000)), VbUuid(30));
        assert_eq!(uuid_covering(&entries, Seqno(900)), VbUuid(30));
        assert_eq!(uuid_covering(&entries, Seqno(899)), VbUuid(20));
        assert_eq!(uuid_covering(&entries, Seqno(0)), VbUuid(10));
        let no_zero = failover_log::decode(&log(&[(30, 900)])).unwrap();
        assert_eq!(uuid_covering(&no_zero, Seqno(5)), VbUuid(0));
    }
}
