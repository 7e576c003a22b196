//! Turning a bootstrapped connection into a DCP consumer: DCP_OPEN, then the controls.
//! Both run on the ordinary request/response path, before the producer can send anything
//! of its own (noops start only after `enable_noop` and one idle interval).

use sluice_proto::dcp::OpenFlags;
use sluice_proto::encode::Packet;
use sluice_proto::{Opcode, Status};
use sluice_types::IncludeValue;

use super::error::DcpError;
use super::options::DcpOptions;
use crate::client::Client;
use crate::error::ClientError;

/// The open flags: producer, v2 deletions (delete times; the expiry opcode needs them),
/// and no values or xattrs when asked.
pub(crate) fn open_flags(opts: &DcpOptions) -> OpenFlags {
    let mut flags = OpenFlags::PRODUCER.with(OpenFlags::INCLUDE_DELETE_TIMES);
    if opts.value == IncludeValue::No {
        flags = flags.with(OpenFlags::NO_VALUE);
    }
    if opts.xattrs {
        flags = flags.with(OpenFlags::INCLUDE_XATTRS);
    }
    flags
}

/// The controls, in the order they are sent. Every one is required: without noops a dead
/// connection goes unnoticed, without the window memory is unbounded, without the
/// stream-end on close a closed vbucket would look like a stalled one.
fn controls(opts: &DcpOptions) -> Vec<(&'static str, String)> {
    let noop = opts.noop_interval;
    let mut c = vec![
        ("enable_noop", "true".into()),
        (
            "set_noop_interval",
            format!("{}.{:03}", noop.as_secs(), noop.subsec_millis()),
        ),
        ("connection_buffer_size", opts.window_bytes.to_string()),
        ("send_stream_end_on_client_close_stream", "true".into()),
        ("enable_expiry_opcode", "true".into()),
    ];
    if let Some(p) = opts.priority {
        c.push(("set_priority", p.into()));
    }
    if let Some(name) = &opts.consumer_name {
        c.push(("consumer_name", name.clone()));
    }
    if opts.sync_writes {
        c.push(("enable_sync_writes", "true".into()));
    }
    c
}

pub(crate) async fn run(client: &mut Client, opts: &DcpOptions) -> Result<(), DcpError> {
    let mut extras = [0u8; 8];
    extras[4..].copy_from_slice(&open_flags(opts).0.to_be_bytes());
    let open = Packet::request(Opcode::DcpOpen.byte(), 0, 0)
        .extras(&extras)
        .key(opts.name.as_bytes());
    match client.call(open).await?.into_success() {
        Ok(_) => {}
        Err(ClientError::Status(status)) => return Err(DcpError::Open { status }),
        Err(e) => return Err(e.into()),
    }
    for (key, value) in controls(opts) {
        let req = Packet::request(Opcode::DcpControl.byte(), 0, 0)
            .key(key.as_bytes())
            .value(value.as_bytes());
        let resp = client.call(req).await?;
        if !resp.is_success() {
            let status = resp.status()?;
            debug_assert_ne!(status, Status::Success);
            return Err(DcpError::Control { key, value, status });
        }
    }
    Ok(())
}
