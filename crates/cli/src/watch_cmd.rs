//! `sluice watch`: follow a bucket's changes (DCP) and print one JSON line per change.
//!
//! Lines on stdout, one per event:
//! - `{"type":"mutation","vb":..,"seqno":..,"key":"..","cas":..,"rev":..,"flags":..,
//!   "expiry":..,"value":<the document>}`; a value that is not JSON goes as a base64 string
//!   under `"value_b64"`, a key that is not UTF-8 under `"key_b64"`; `--no-value` leaves
//!   the value out;
//! - `{"type":"deletion",..}` and `{"type":"expiration",..}`: the same without flags,
//!   expiry and value;
//! - `{"type":"rollback","vb":..,"seqno":..}`: the node no longer has this vbucket's
//!   history above `seqno`; a consumer that keeps the changes must drop those above it.
//!   Not counted by `--limit`.
//!
//! Positions (`--position FILE`) are saved only for lines already written and flushed, so a
//! restart after a crash repeats nothing and misses nothing.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::value::RawValue;
use sluice_client::dcp::{
    DcpError, DcpEvent, DcpItem, DcpOptions, ReconnectingStream, StartFrom, StreamPositions,
};
use sluice_client::ConnectOptions;
use sluice_types::IncludeValue;

/// How often positions are saved while changes flow.
const SAVE_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FromArg {
    /// Only changes made from now on.
    Now,
    /// Every change still held, from each vbucket's first seqno.
    Beginning,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// KV address of the node (host:port).
    #[arg(long, env = "SLUICE_ADDR", default_value = "127.0.0.1:11210")]
    pub addr: String,
    #[command(flatten)]
    pub login: crate::login_args::LoginArgs,
    /// Where to start when there is no position file to resume from.
    #[arg(long, env = "SLUICE_WATCH_FROM", value_enum, default_value = "now")]
    pub from: FromArg,
    /// Resume from this file if it exists; save positions to it every second and on exit.
    #[arg(long, env = "SLUICE_WATCH_POSITION")]
    pub position: Option<PathBuf>,
    /// Exit after this many changes (mutations, deletions, expirations).
    #[arg(long, env = "SLUICE_WATCH_LIMIT")]
    pub limit: Option<u64>,
    /// Print keys and metadata only (the server does not send values).
    #[arg(long, env = "SLUICE_WATCH_NO_VALUE")]
    pub no_value: bool,
}

pub fn run(args: WatchArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(watch(args))
}

async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let mut opts = DcpOptions::new(ConnectOptions::sluice(
        &args.login.user.username,
        &args.login.user.password,
        &args.login.bucket,
    ));
    opts.value = if args.no_value {
        IncludeValue::No
    } else {
        IncludeValue::Yes
    };
    let saved = match &args.position {
        Some(path) => StreamPositions::load_if_exists(path)?,
        None => None,
    };
    let from = match saved {
        Some(p) => StartFrom::Positions(p),
        None => match args.from {
            FromArg::Now => StartFrom::Now,
            FromArg::Beginning => StartFrom::Beginning,
        },
    };
    let mut stream = ReconnectingStream::connect(&args.addr, opts, from)
        .await
        .map_err(|e| explain(e, &args))?;
    let mut saver = Saver::new(args.position.clone());
    // The starting point is worth keeping even if nothing arrives: "from now" means the
    // moment the watch started, not the moment of the first change.
    saver.save(stream.positions())?;

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut changes = 0u64;
    let stop = crate::server_cmd::stop_signal();
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(SAVE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        if args.limit.is_some_and(|limit| changes >= limit) {
            break Ok(());
        }
        tokio::select! {
            _ = &mut stop => break Ok(()),
            _ = tick.tick() => saver.save(stream.positions())?,
            ev = stream.next() => {
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => break Err(explain(e, &args)),
                };
                let Some(line) = render(&ev, args.no_value) else { continue };
                let written = writeln!(out, "{line}").and_then(|_| out.flush());
                if let Err(e) = written {
                    // A reader that went away (`| head`) ends the watch, not as a failure;
                    // the position is not moved past lines that were not written.
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        return Ok(());
                    }
                    break Err(anyhow::Error::new(e).context("writing to stdout"));
                }
                if ev.item().is_some() {
                    changes += 1;
                }
            }
        }
    };
    // Everything delivered has been written and flushed, so the positions are safe to keep.
    saver.save(stream.positions())?;
    result
}

/// Saves positions to the file, only when they moved (an idle watch does not rewrite it).
struct Saver {
    path: Option<PathBuf>,
    last: Option<StreamPositions>,
}

impl Saver {
    fn new(path: Option<PathBuf>) -> Saver {
        Saver { path, last: None }
    }

    fn save(&mut self, positions: &StreamPositions) -> anyhow::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if self.last.as_ref() == Some(positions) {
            return Ok(());
        }
        positions
            .save(path)
            .with_context(|| format!("saving positions to {}", path.display()))?;
        self.last = Some(positions.clone());
        Ok(())
    }
}

/// The errors a user is most likely to meet, in words that say what to fix.
fn explain(e: DcpError, args: &WatchArgs) -> anyhow::Error {
    if e.is_auth_failure() {
        return anyhow::anyhow!(
            "authentication failed for user {:?} on {} (check --username / --password)",
            args.login.user.username,
            args.addr
        );
    }
    match e {
        DcpError::Connect { .. } | DcpError::ConnectTimeout { .. } => anyhow::anyhow!("{e}"),
        DcpError::Client(ref c) if c.is_not_found() => {
            anyhow::anyhow!("bucket {:?} not found on {}", args.login.bucket, args.addr)
        }
        other => anyhow::Error::new(other).context(format!("watching {}", args.addr)),
    }
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    vb: u16,
    seqno: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_b64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cas: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rev: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flags: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expiry: Option<u32>,
    /// The document itself, exactly as stored (key order and number formatting kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_b64: Option<String>,
}

/// The JSON line for an event; `None` for events that are not printed (stream openings,
/// markers, stream ends: the client handles those).
fn render(ev: &DcpEvent, no_value: bool) -> Option<String> {
    let line = match ev {
        DcpEvent::Mutation(i) => {
            let mut line = item_line("mutation", i);
            line.flags = Some(i.flags);
            line.expiry = Some(i.expiry);
            if !no_value {
                let json = if i.datatype.is_json() && !i.datatype.is_snappy() {
                    serde_json::from_slice::<&RawValue>(&i.value).ok()
                } else {
                    None
                };
                match json {
                    Some(v) => line.value = Some(v),
                    None => line.value_b64 = Some(b64(&i.value)),
                }
            }
            line
        }
        DcpEvent::Deletion(i) => item_line("deletion", i),
        DcpEvent::Expiration(i) => item_line("expiration", i),
        DcpEvent::Rollback { vb, to } => Line {
            kind: "rollback",
            vb: vb.0,
            seqno: to.0,
            ..Line::empty()
        },
        // `sluice watch` does not enable sync writes: it sees committed changes only.
        DcpEvent::StreamOpened { .. }
        | DcpEvent::SnapshotMarker { .. }
        | DcpEvent::StreamEnd { .. }
        | DcpEvent::VbucketState { .. }
        | DcpEvent::Prepare { .. }
        | DcpEvent::Commit { .. }
        | DcpEvent::Abort { .. } => return None,
    };
    Some(serde_json::to_string(&line).expect("lines always serialize"))
}

fn item_line<'a>(kind: &'static str, i: &'a DcpItem) -> Line<'a> {
    let (key, key_b64) = match std::str::from_utf8(&i.key) {
        Ok(k) => (Some(Cow::Borrowed(k)), None),
        Err(_) => (None, Some(b64(&i.key))),
    };
    Line {
        kind,
        vb: i.vb.0,
        seqno: i.seqno.0,
        key,
        key_b64,
        cas: Some(i.cas.0),
        rev: Some(i.rev_seqno),
        ..Line::empty()
    }
}

impl Line<'_> {
    fn empty() -> Line<'static> {
        Line {
            kind: "",
            vb: 0,
            seqno: 0,
            key: None,
            key_b64: None,
            cas: None,
            rev: None,
            flags: None,
            expiry: None,
            value: None,
            value_b64: None,
        }
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_types::{Cas, Datatype, Seqno, VbId};

    fn item(key: &[u8], value: &[u8], datatype: u8) -> DcpItem {
        DcpItem {
            vb: VbId(7),
            key: Bytes::copy_from_slice(key),
            value: Bytes::copy_from_slice(value),
            cas: Cas(99),
            seqno: Seqno(12),
            rev_seqno: 3,
            flags: 5,
            expiry: 0,
            datatype: Datatype(datatype),
            delete_time: None,
        }
    }

    #[test]
    fn json_values_are_embedded_as_they_are_and_others_are_base64() {
        let doc = br#"{"z":1,"a":[1.50,"x"]}"#;
        let line = render(&DcpEvent::Mutation(item(b"k", doc, Datatype::JSON)), false).unwrap();
        assert_eq!(
            line,
            r#"{"type":"mutation","vb":7,"seqno":12,"key":"k","cas":99,"rev":3,"flags":5,"expiry":0,"value":{"z":1,"a":[1.50,"x"]}}"#
        );
        let line = render(&DcpEvent::Mutation(item(b"k", b"\x00\xff", 0)), false).unwrap();
        assert!(line.ends_with(r#""value_b64":"AP8="}"#), "{line}");
        let line = render(&DcpEvent::Mutation(item(b"k", doc, Datatype::JSON)), true).unwrap();
        assert!(!line.contains("value"), "{line}");
    }

    #[test]
    fn deletions_carry_no_value_and_binary_keys_are_base64() {
        let line = render(&DcpEvent::Deletion(item(b"\xff", b"", 0)), false).unwrap();
        assert_eq!(
            line,
            r#"{"type":"deletion","vb":7,"seqno":12,"key_b64":"/w==","cas":99,"rev":3}"#
        );
        let marker = DcpEvent::StreamEnd {
            vb: VbId(1),
            reason: sluice_client::dcp::StreamEndReason::Ok,
        };
        assert!(render(&marker, false).is_none());
    }
}
