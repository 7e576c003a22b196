//! DCP_OPEN on an ordinary connection. A producer open is answered here; the connection
//! loop then hands the socket to [`super::producer::run`].

use crate::exec::{Next, Responder};
use sluice_proto::dcp::OpenFlags;
use sluice_proto::Status;

pub fn execute(name: &[u8], flags: OpenFlags, mut r: Responder<'_>) -> Next {
    if flags.unknown_bits() != 0 {
        r.error(Status::Einval, "unknown DCP_OPEN flags");
        return Next::Continue;
    }
    if flags.contains(OpenFlags::NOTIFIER) || flags.contains(OpenFlags::PITR) {
        r.error(
            Status::Einval,
            "notifier and point-in-time connections are not supported",
        );
        return Next::Continue;
    }
    if flags.contains(OpenFlags::NO_VALUE)
        && flags.contains(OpenFlags::NO_VALUE_WITH_UNDERLYING_DATATYPE)
    {
        r.error(
            Status::Einval,
            "NoValue and NoValueWithUnderlyingDatatype exclude each other",
        );
        return Next::Continue;
    }
    if !flags.contains(OpenFlags::PRODUCER) {
        r.error(
            Status::NotSupported,
            "only producer connections can be opened here; replicas open their own consumers",
        );
        return Next::Continue;
    }
    let p = r.packet(Status::Success);
    r.send(p);
    Next::DcpProducer {
        name: String::from_utf8_lossy(name).into_owned(),
        flags,
    }
}
