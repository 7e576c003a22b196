//! Why a stream ended (STREAM_END extras).

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamEndReason {
    /// The requested end seqno was reached.
    Ok,
    /// The client closed the stream.
    Closed,
    /// The vbucket left the state the stream needs (e.g. active → replica).
    StateChanged,
    Disconnected,
    /// The client read too slowly and did not opt in to cursor dropping.
    TooSlow,
    BackfillFailed,
    /// The producer's vbucket rolled back; request the stream again.
    Rollback,
    FilterEmpty,
    LostPrivileges,
}

impl StreamEndReason {
    pub fn code(self) -> u32 {
        match self {
            StreamEndReason::Ok => 0,
            StreamEndReason::Closed => 1,
            StreamEndReason::StateChanged => 2,
            StreamEndReason::Disconnected => 3,
            StreamEndReason::TooSlow => 4,
            StreamEndReason::BackfillFailed => 5,
            StreamEndReason::Rollback => 6,
            StreamEndReason::FilterEmpty => 7,
            StreamEndReason::LostPrivileges => 8,
        }
    }

    pub fn from_code(code: u32) -> Option<StreamEndReason> {
        Some(match code {
            0 => StreamEndReason::Ok,
            1 => StreamEndReason::Closed,
            2 => StreamEndReason::StateChanged,
            3 => StreamEndReason::Disconnected,
            4 => StreamEndReason::TooSlow,
            5 => StreamEndReason::BackfillFailed,
            6 => StreamEndReason::Rollback,
            7 => StreamEndReason::FilterEmpty,
            8 => StreamEndReason::LostPrivileges,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            StreamEndReason::Ok => "ok",
            StreamEndReason::Closed => "closed",
            StreamEndReason::StateChanged => "state_changed",
            StreamEndReason::Disconnected => "disconnected",
            StreamEndReason::TooSlow => "too_slow",
            StreamEndReason::BackfillFailed => "backfill_failed",
            StreamEndReason::Rollback => "rollback",
            StreamEndReason::FilterEmpty => "filter_empty",
            StreamEndReason::LostPrivileges => "lost_privileges",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 0..9 {
            assert_eq!(StreamEndReason::from_code(code).unwrap().code(), code);
        }
        assert_eq!(StreamEndReason::from_code(9), None);
    }
}
