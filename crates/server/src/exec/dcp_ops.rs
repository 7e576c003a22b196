//! DCP commands on an ordinary connection: DCP_OPEN turns it into a producer connection
//! ([`crate::dcp::open`]); the others are served only there, once it is open
//! (`dcp/producer/requests.rs`).

use super::{Next, Responder};
use sluice_proto::request::DcpCommand;
use sluice_proto::Status;

pub fn execute(cmd: &DcpCommand<'_>, mut r: Responder<'_>) -> Next {
    match cmd {
        DcpCommand::Open { name, flags } => crate::dcp::open::execute(name, *flags, r),
        DcpCommand::Control { .. }
        | DcpCommand::StreamReq { .. }
        | DcpCommand::CloseStream
        | DcpCommand::BufferAck { .. }
        | DcpCommand::SeqnoAck { .. } => {
            r.error(Status::Einval, "not a DCP connection: send DCP_OPEN first");
            Next::Continue
        }
    }
}
