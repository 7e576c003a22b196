//! vbucket and seqno commands: GET_ALL_VB_SEQNOS, OBSERVE_SEQNO, GET_FAILOVER_LOG,
//! GET_VBUCKET, SEQNO_PERSISTENCE.

use super::kv::engine_error;
use super::{Held, Next, Responder};
use crate::bucket_handle::BucketHandle;
use sluice_proto::body::{failover_log, vb_seqnos};
use sluice_proto::request::VbucketCommand;
use sluice_proto::Status;
use sluice_types::VbId;
use std::time::Duration;

/// How long SEQNO_PERSISTENCE waits before answering a temporary failure.
const PERSISTENCE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Executes `cmd` on `vb`, the request's vbucket. `sync_writes`: the connection negotiated
/// HELLO SyncReplication (it can see prepares and aborts).
pub fn execute(
    handle: &BucketHandle,
    vb: VbId,
    cmd: &VbucketCommand,
    sync_writes: bool,
    mut r: Responder<'_>,
) -> Next {
    let bucket = &handle.engine;
    let result = match cmd {
        VbucketCommand::GetAllVbSeqnos { state } => {
            let filter = *state;
            // As Couchbase answers a client without sync replication (or collections, which
            // Sluice does not have yet): the max visible seqno, which its streams reach; the
            // high seqno may be a prepare or an abort they never see.
            let seqnos = if sync_writes {
                bucket.vb_seqnos(filter)
            } else {
                bucket.vb_visible_seqnos(filter)
            };
            let mut value = Vec::new();
            for (vb, seqno) in seqnos {
                vb_seqnos::encode_entry(vb, seqno, &mut value);
            }
            let p = r.packet(Status::Success).value(&value);
            r.send(p);
            Ok(())
        }
        VbucketCommand::ObserveSeqno { vb_uuid } => bucket.observe_seqno(vb, *vb_uuid).map(|o| {
            let mut v = Vec::with_capacity(43);
            v.push(u8::from(o.failed_over.is_some()));
            v.extend_from_slice(&vb.0.to_be_bytes());
            v.extend_from_slice(&o.vb_uuid.0.to_be_bytes());
            v.extend_from_slice(&o.persisted.0.to_be_bytes());
            v.extend_from_slice(&o.current.0.to_be_bytes());
            if let Some((old_uuid, old_seqno)) = o.failed_over {
                v.extend_from_slice(&old_uuid.0.to_be_bytes());
                v.extend_from_slice(&old_seqno.0.to_be_bytes());
            }
            let p = r.packet(Status::Success).value(&v);
            r.send(p);
        }),
        VbucketCommand::GetFailoverLog => bucket.failover_log(vb).map(|log| {
            let v = failover_log::to_vec(log.entries());
            let p = r.packet(Status::Success).value(&v);
            r.send(p);
        }),
        VbucketCommand::GetVbucket => bucket.vb_state(vb).map(|s| {
            let v = (s as u32).to_be_bytes();
            let p = r.packet(Status::Success).value(&v);
            r.send(p);
        }),
        VbucketCommand::SeqnoPersistence { seqno } => {
            if let Err(e) = bucket.vb_state(vb) {
                engine_error(&mut r, &e, handle);
                return Next::Continue;
            }
            let mut on_success = Vec::new();
            let ok = r.packet(Status::Success);
            r.fork(&mut on_success).send(ok);
            let mut on_timeout = Vec::new();
            r.fork(&mut on_timeout)
                .error(Status::Etmpfail, "not persisted within the wait limit");
            return Next::Hold(Held::Persistence {
                vb,
                seqno: *seqno,
                timeout: PERSISTENCE_WAIT_MAX,
                on_success,
                on_timeout,
            });
        }
    };
    if let Err(e) = result {
        engine_error(&mut r, &e, handle);
    }
    Next::Continue
}
