//! DCP_CONTROL on a producer connection: a key and an ASCII value → a typed setting, or the
//! status to refuse it with (protocol.md §4.2). Applying a setting is the producer's job;
//! checks that need the connection (e.g. `force_value_compression` needs SNAPPY negotiated)
//! are the caller's too.

use sluice_proto::Status;
use std::time::Duration;

/// How many messages a connection may send per scheduling pass (protocol.md §4.8). Only
/// fairness between connections depends on it, never the wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Priority {
    High,
    /// The DCP default.
    #[default]
    Medium,
    Low,
}

impl Priority {
    /// Messages per pass: the reference server's 50 / 5 / 1 (a plain KV connection gets
    /// about 20, so a consumer left at medium gets less than ordinary clients).
    pub fn batch(self) -> usize {
        match self {
            Priority::High => 50,
            Priority::Medium => 5,
            Priority::Low => 1,
        }
    }
}

/// A DCP_CONTROL the producer accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlSetting {
    /// Flow-control window in bytes; 0 disables flow control.
    ConnectionBufferSize(u32),
    EnableNoop(bool),
    /// Within [`NOOP_INTERVAL_MIN`]..=[`NOOP_INTERVAL_MAX`].
    NoopInterval(Duration),
    Priority(Priority),
    /// `supports_cursor_dropping` or its older alias `supports_cursor_dropping_vulcan`.
    SupportsCursorDropping(bool),
    SendStreamEndOnClientClose(bool),
    EnableExpiryOpcode(bool),
    ForceValueCompression(bool),
    /// `enable_sync_writes`: send prepares, commits and aborts (and v2.0 markers) instead of
    /// committed documents only.
    EnableSyncWrites(bool),
    /// `enable_stream_id`: several streams per vbucket, each named by the consumer's id
    /// (see `stream_key`). One way: once on, it stays on.
    EnableStreamId(bool),
    /// `consumer_name`: who the consumer is, for durability. A replica names its node, and
    /// its DCP_SEQNO_ACKNOWLEDGED messages count for that node's copy.
    ConsumerName(String),
    /// A key that is safe to accept and ignore (see [`parse`]).
    Accepted,
}

/// Why a DCP_CONTROL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// An unknown key or a bad value: EINVAL.
    #[error("invalid DCP control: {0}")]
    Invalid(String),
    /// A real key this server does not implement yet: NOT_SUPPORTED, so the client can tell
    /// "not here" from "malformed" and fall back.
    #[error("DCP control not supported: {0}")]
    NotSupported(String),
}

impl ControlError {
    /// The status of the DCP_CONTROL response.
    pub fn status(&self) -> Status {
        match self {
            ControlError::Invalid(_) => Status::Einval,
            ControlError::NotSupported(_) => Status::NotSupported,
        }
    }
}

/// Shortest accepted noop interval. The producer checks its noop timers on a one-second
/// tick, so a shorter interval could not be honoured; and a consumer is declared dead after
/// two intervals of silence, so sub-second intervals would cut healthy consumers off during
/// an ordinary pause (GC, a long disk write).
pub const NOOP_INTERVAL_MIN: Duration = Duration::from_secs(1);
/// Longest accepted noop interval: 3 hours, the documented maximum. Longer would mean no
/// dead-connection detection at all, which a client asks for with `enable_noop=false`.
pub const NOOP_INTERVAL_MAX: Duration = Duration::from_secs(10_800);

/// Longest `consumer_name` accepted (as long as a DCP connection name).
pub const CONSUMER_NAME_BYTES_MAX: usize = 200;

/// Keys the protocol defines that this server does not implement yet.
const NOT_SUPPORTED: &[&str] = &[
    "stream_buffer_size",
    "enable_out_of_order_snapshots",
    "change_streams",
    "max_marker_version",
    "flatbuffers_system_events",
];

/// Parses one DCP_CONTROL. Keys and values are case-sensitive, as in the reference server.
///
/// Accepted and ignored: `backfill_order` (`round-robin` | `sequential`: backfills are
/// always interleaved here), and the boolean keys `include_deleted_user_xattrs` (the open
/// flag 0x100 is what counts), `supports_hifi_MFU`, `cache_transfer` and
/// `v7_dcp_status_codes` (this producer only ever answers with the older codes).
pub fn parse(key: &[u8], value: &[u8]) -> Result<ControlSetting, ControlError> {
    let Ok(key) = std::str::from_utf8(key) else {
        return Err(invalid(&String::from_utf8_lossy(key), "unknown key"));
    };
    if NOT_SUPPORTED.contains(&key) {
        // Refused whatever the value, so a client learns that the feature is missing rather
        // than that its value was wrong.
        return Err(ControlError::NotSupported(key.to_owned()));
    }
    let value = match std::str::from_utf8(value) {
        Ok(v) if v.is_ascii() => v,
        _ => return Err(invalid(key, "the value is not ASCII")),
    };
    let bool_value = || parse_bool(key, value);
    Ok(match key {
        "connection_buffer_size" => ControlSetting::ConnectionBufferSize(parse_u32(key, value)?),
        "enable_noop" => ControlSetting::EnableNoop(bool_value()?),
        "set_noop_interval" => ControlSetting::NoopInterval(parse_noop_interval(key, value)?),
        "set_priority" => ControlSetting::Priority(match value {
            "high" => Priority::High,
            "medium" => Priority::Medium,
            "low" => Priority::Low,
            _ => return Err(invalid(key, "expected high, medium or low")),
        }),
        "supports_cursor_dropping" | "supports_cursor_dropping_vulcan" => {
            ControlSetting::SupportsCursorDropping(bool_value()?)
        }
        "send_stream_end_on_client_close_stream" => {
            ControlSetting::SendStreamEndOnClientClose(bool_value()?)
        }
        "enable_expiry_opcode" => ControlSetting::EnableExpiryOpcode(bool_value()?),
        "enable_sync_writes" => ControlSetting::EnableSyncWrites(bool_value()?),
        "enable_stream_id" => ControlSetting::EnableStreamId(bool_value()?),
        "force_value_compression" => ControlSetting::ForceValueCompression(bool_value()?),
        "consumer_name" => {
            if value.is_empty() || value.len() > CONSUMER_NAME_BYTES_MAX {
                return Err(invalid(key, "expected 1 to 200 printable characters"));
            }
            if !value.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(invalid(key, "expected printable characters without spaces"));
            }
            ControlSetting::ConsumerName(value.to_owned())
        }
        "backfill_order" => match value {
            "round-robin" | "sequential" => ControlSetting::Accepted,
            _ => return Err(invalid(key, "expected round-robin or sequential")),
        },
        "include_deleted_user_xattrs"
        | "supports_hifi_MFU"
        | "cache_transfer"
        | "v7_dcp_status_codes" => {
            bool_value()?;
            ControlSetting::Accepted
        }
        _ => return Err(invalid(key, "unknown key")),
    })
}

fn invalid(key: &str, why: &str) -> ControlError {
    ControlError::Invalid(format!("{key}: {why}"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ControlError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, "expected true or false")),
    }
}

/// Plain decimal digits only: no sign, no whitespace, no hex, so that the one spelling a
/// client means is the one accepted.
fn parse_u32(key: &str, value: &str) -> Result<u32, ControlError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(key, "expected a decimal number"));
    }
    value
        .parse()
        .map_err(|_| invalid(key, "larger than 4294967295"))
}

/// Seconds as `digits` or `digits.digits` ("120", "0.5", "1.25"). The spec calls the value
/// a float; this accepts exactly the decimal spellings of one, without exponents, signs,
/// `inf` or `nan`. Digits past nanoseconds are ignored.
fn parse_noop_interval(key: &str, value: &str) -> Result<Duration, ControlError> {
    let (whole, fraction) = value.split_once('.').unwrap_or((value, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return Err(invalid(key, "expected seconds, e.g. 120 or 0.5"));
    }
    let range_error = || {
        invalid(
            key,
            &format!(
                "must be {}..={} seconds",
                NOOP_INTERVAL_MIN.as_secs(),
                NOOP_INTERVAL_MAX.as_secs()
            ),
        )
    };
    let secs: u64 = whole.parse().map_err(|_| range_error())?;
    let nanos = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    let interval = Duration::new(secs, nanos);
    if (NOOP_INTERVAL_MIN..=NOOP_INTERVAL_MAX).contains(&interval) {
        Ok(interval)
    } else {
        Err(range_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(key: &str, value: &str) -> ControlSetting {
        parse(key.as_bytes(), value.as_bytes()).unwrap_or_else(|e| panic!("{key}={value}: {e}"))
    }

    fn einval(key: &str, value: &str) {
        match parse(key.as_bytes(), value.as_bytes()) {
            Err(e @ ControlError::Invalid(_)) => assert_eq!(e.status(), Status::Einval),
            other => panic!("{key}={value}: {other:?}"),
        }
    }

    const NOT_BOOLS: &[&str] = &["", "True", "TRUE", "1", "0", "yes", "true ", " false"];

    #[test]
    fn connection_buffer_size() {
        use ControlSetting::ConnectionBufferSize as Size;
        assert_eq!(ok("connection_buffer_size", "0"), Size(0));
        assert_eq!(ok("connection_buffer_size", "10485760"), Size(10_485_760));
        assert_eq!(ok("connection_buffer_size", "4294967295"), Size(u32::MAX));
        assert_eq!(ok("connection_buffer_size", "007"), Size(7));
        for bad in [
            "",
            "-1",
            "+5",
            " 5",
            "5 ",
            "1e6",
            "0x10",
            "4294967296",
            "1.5",
            "ten",
        ] {
            einval("connection_buffer_size", bad);
        }
    }

    #[test]
    fn enable_noop() {
        assert_eq!(ok("enable_noop", "true"), ControlSetting::EnableNoop(true));
        assert_eq!(
            ok("enable_noop", "false"),
            ControlSetting::EnableNoop(false)
        );
        for bad in NOT_BOOLS {
            einval("enable_noop", bad);
        }
    }

    #[test]
    fn set_noop_interval() {
        let secs = |s: f64| ControlSetting::NoopInterval(Duration::from_secs_f64(s));
        assert_eq!(ok("set_noop_interval", "120"), secs(120.0));
        assert_eq!(ok("set_noop_interval", "1"), secs(1.0));
        assert_eq!(ok("set_noop_interval", "10800"), secs(10_800.0));
        assert_eq!(ok("set_noop_interval", "1.5"), secs(1.5));
        assert_eq!(ok("set_noop_interval", "20.0"), secs(20.0));
        assert_eq!(ok("set_noop_interval", "10800.000"), secs(10_800.0));
        assert_eq!(
            ok("set_noop_interval", "2.1234567891"),
            ControlSetting::NoopInterval(Duration::new(2, 123_456_789))
        );
        for bad in [
            "0",
            "0.5",
            "0.999999999",
            "10800.5",
            "10801",
            "99999999999999999999999",
            "",
            ".",
            "5.",
            ".5",
            "-1",
            "+5",
            "1e2",
            "inf",
            "nan",
            "12 ",
            "1.2.3",
            "0x10",
        ] {
            einval("set_noop_interval", bad);
        }
    }

    #[test]
    fn set_priority() {
        let p = ControlSetting::Priority;
        assert_eq!(ok("set_priority", "high"), p(Priority::High));
        assert_eq!(ok("set_priority", "medium"), p(Priority::Medium));
        assert_eq!(ok("set_priority", "low"), p(Priority::Low));
        for bad in ["", "High", "urgent", "1", "high "] {
            einval("set_priority", bad);
        }
        let batches = [Priority::High, Priority::Medium, Priority::Low].map(Priority::batch);
        assert_eq!(batches, [50, 5, 1]);
        assert_eq!(Priority::default(), Priority::Medium);
    }

    #[test]
    fn boolean_settings() {
        type BoolSetting = fn(bool) -> ControlSetting;
        let keys: &[(&str, BoolSetting)] = &[
            (
                "supports_cursor_dropping",
                ControlSetting::SupportsCursorDropping,
            ),
            (
                "supports_cursor_dropping_vulcan",
                ControlSetting::SupportsCursorDropping,
            ),
            (
                "send_stream_end_on_client_close_stream",
                ControlSetting::SendStreamEndOnClientClose,
            ),
            ("enable_expiry_opcode", ControlSetting::EnableExpiryOpcode),
            ("enable_sync_writes", ControlSetting::EnableSyncWrites),
            ("enable_stream_id", ControlSetting::EnableStreamId),
            (
                "force_value_compression",
                ControlSetting::ForceValueCompression,
            ),
        ];
        for &(key, setting) in keys {
            assert_eq!(ok(key, "true"), setting(true), "{key}");
            assert_eq!(ok(key, "false"), setting(false), "{key}");
            for bad in NOT_BOOLS {
                einval(key, bad);
            }
        }
    }

    #[test]
    fn accepted_and_ignored() {
        assert_eq!(
            ok("backfill_order", "round-robin"),
            ControlSetting::Accepted
        );
        assert_eq!(ok("backfill_order", "sequential"), ControlSetting::Accepted);
        for bad in ["", "random", "round_robin", "Sequential"] {
            einval("backfill_order", bad);
        }
        for key in [
            "include_deleted_user_xattrs",
            "supports_hifi_MFU",
            "cache_transfer",
            "v7_dcp_status_codes",
        ] {
            assert_eq!(ok(key, "true"), ControlSetting::Accepted, "{key}");
            assert_eq!(ok(key, "false"), ControlSetting::Accepted, "{key}");
            for bad in NOT_BOOLS {
                einval(key, bad);
            }
        }
    }

    #[test]
    fn unimplemented_keys_are_not_supported_whatever_the_value() {
        for key in NOT_SUPPORTED {
            for value in ["true", "false", "2.2", "name", "", "\u{e9}"] {
                let err = parse(key.as_bytes(), value.as_bytes()).unwrap_err();
                assert_eq!(err, ControlError::NotSupported(key.to_string()));
                assert_eq!(err.status(), Status::NotSupported);
            }
        }
    }

    #[test]
    fn consumer_name_is_a_printable_word() {
        assert_eq!(
            ok("consumer_name", "n1"),
            ControlSetting::ConsumerName("n1".into())
        );
        let longest = "x".repeat(CONSUMER_NAME_BYTES_MAX);
        assert_eq!(
            ok("consumer_name", &longest),
            ControlSetting::ConsumerName(longest.clone())
        );
        for bad in ["", "a b", "tab\t", &format!("{longest}x")] {
            einval("consumer_name", bad);
        }
    }

    #[test]
    fn unknown_keys_and_non_ascii_are_invalid() {
        for key in [
            "",
            "enable_noops",
            "ENABLE_NOOP",
            "enable_noop ",
            "set_noop_interval\0",
        ] {
            einval(key, "true");
        }
        assert!(matches!(
            parse(b"\xff\xfe", b"true"),
            Err(ControlError::Invalid(_))
        ));
        assert!(matches!(
            parse(b"enable_noop", b"\xfftrue"),
            Err(ControlError::Invalid(_))
        ));
        einval("set_priority", "h\u{ed}gh");
        einval("backfill_order", "s\u{e9}quential");
    }
}
