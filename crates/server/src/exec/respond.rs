//! Writing responses: one place that knows about quiet commands, extended errors and the
//! status remapping for clients without XERROR.

use crate::session::{Port, Session};
use sluice_proto::encode::Packet;
use sluice_proto::{Feature, Status};
use sluice_types::{Datatype, MapVersion};

pub struct Responder<'a> {
    pub out: &'a mut Vec<u8>,
    pub opcode: u8,
    pub opaque: u32,
    /// Quiet commands suppress the uninteresting answer (set by the dispatcher).
    pub quiet: bool,
    pub xerror: bool,
    pub json: bool,
    pub snappy: bool,
    pub mutation_seqno: bool,
    /// A plain memcached client: deletes answer CAS 0, as memcached does.
    pub memcached: bool,
    /// With NMVB dedup negotiated: the map version the client already has, so a
    /// NOT_MY_VBUCKET for that version (or an older one) goes out without the map.
    pub map_known: Option<MapVersion>,
}

impl<'a> Responder<'a> {
    pub fn new(out: &'a mut Vec<u8>, opcode: u8, opaque: u32, session: &Session) -> Responder<'a> {
        Responder {
            out,
            opcode,
            opaque,
            quiet: false,
            xerror: session.has(Feature::Xerror),
            json: session.has(Feature::Json),
            snappy: session.has(Feature::Snappy),
            mutation_seqno: session.has(Feature::MutationSeqno),
            memcached: session.port == Port::Memcached,
            map_known: session
                .has(Feature::DedupeNotMyVbucketClustermap)
                .then_some(session.map_sent)
                .flatten(),
        }
    }

    /// A responder with the same settings writing elsewhere (answers held for later).
    pub fn fork<'b>(&self, out: &'b mut Vec<u8>) -> Responder<'b> {
        Responder {
            out,
            opcode: self.opcode,
            opaque: self.opaque,
            quiet: self.quiet,
            xerror: self.xerror,
            map_known: self.map_known,
            json: self.json,
            snappy: self.snappy,
            mutation_seqno: self.mutation_seqno,
            memcached: self.memcached,
        }
    }

    /// A bare response packet for this request, to fill in.
    pub fn packet(&self, status: Status) -> Packet<'static> {
        Packet::response(self.opcode, status, self.opaque)
    }

    pub fn send(&mut self, p: Packet<'_>) {
        p.encode_into(self.out);
    }

    /// A successful answer; suppressed for quiet commands.
    pub fn success(&mut self, p: Packet<'_>) {
        if !self.quiet {
            p.encode_into(self.out);
        }
    }

    /// An error, with a JSON context when the client understands extended errors.
    pub fn error(&mut self, status: Status, context: &str) {
        let status = if self.xerror { status } else { legacy(status) };
        let body;
        let mut p = self.packet(status);
        if self.xerror && !context.is_empty() {
            body = serde_json::to_vec(&serde_json::json!({"error": {"context": context}}))
                .expect("a JSON value serialises");
            p = p
                .value(&body)
                .datatype(if self.json { Datatype::JSON } else { 0 });
            p.encode_into(self.out);
        } else {
            p.encode_into(self.out);
        }
    }

    /// UNKNOWN_COLLECTION or UNKNOWN_SCOPE, with the uid of the manifest the name was
    /// looked up in: a client whose manifest is older fetches the new one and retries.
    pub fn unknown_collection(&mut self, status: Status, manifest_uid: u64, context: &str) {
        if !self.xerror {
            self.error(status, context);
            return;
        }
        let body = serde_json::to_vec(&serde_json::json!({
            "error": {"context": context},
            "manifest_uid": format!("{manifest_uid:x}"),
        }))
        .expect("a JSON value serialises");
        let p =
            self.packet(status)
                .value(&body)
                .datatype(if self.json { Datatype::JSON } else { 0 });
        p.encode_into(self.out);
    }
}

/// Older clients only know the classic codes: map newer ones onto them.
fn legacy(status: Status) -> Status {
    match status {
        Status::Locked => Status::KeyEexists,
        Status::UnknownCollection | Status::UnknownScope => Status::Einval,
        Status::SyncWriteInProgress | Status::NotLocked => Status::Etmpfail,
        s => s,
    }
}
