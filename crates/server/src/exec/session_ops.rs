//! Session commands: HELLO, SASL, SELECT_BUCKET, LIST_BUCKETS, GET_ERROR_MAP,
//! GET_CLUSTER_CONFIG, NOOP, VERSION, VERBOSITY, QUIT; STAT is answered by [`super::stats`].

use super::{stats, Next, Responder};
use crate::exec::access::BucketAccess;
use crate::node::Node;
use crate::session::{Port, Session};
use sluice_proto::error_map::error_map_json;
use sluice_proto::request::SessionCommand;
use sluice_proto::{Feature, Status};
use sluice_sasl::{ServerSession, Step};
use sluice_types::Datatype;

/// The server version clients see. DCP clients parse its leading "major.minor.patch".
pub const VERSION: &str = concat!("7.6.0-sluice-", env!("CARGO_PKG_VERSION"));

/// HELLO features this server implements, and so acknowledges. Tracing is not implemented
/// and never acknowledged. Unordered execution reorders only the answers of durable writes
/// and persistence waits (see `connection`). Collections: prefixed keys and the collection
/// commands on the KV port; on DCP, keys with their prefixes and every collection (stream
/// filters, system events and stream ids are not built yet: see the README).
/// Create-as-deleted and replace-body-with-xattr: the sub-document tombstone mutations;
/// sub-document replica read: lookups on a replica vbucket.
/// Xattr: values may carry an xattr section (datatype XATTR), checked whole when stored.
const SUPPORTED: &[Feature] = &[
    Feature::TcpNodelay,
    Feature::MutationSeqno,
    Feature::Xerror,
    Feature::SelectBucket,
    Feature::Snappy,
    Feature::Json,
    Feature::Xattr,
    Feature::AltRequestSupport,
    Feature::SyncReplication,
    Feature::UnorderedExecution,
    Feature::PreserveTtl,
    Feature::Duplex,
    Feature::ClustermapChangeNotification,
    Feature::ClustermapChangeNotificationBrief,
    Feature::DedupeNotMyVbucketClustermap,
    Feature::GetClusterConfigWithKnownVersion,
    Feature::Collections,
    Feature::CreateAsDeleted,
    Feature::ReplaceBodyWithXattr,
    Feature::SubdocReplicaRead,
];

pub fn execute(
    node: &Node,
    session: &mut Session,
    cmd: &SessionCommand<'_>,
    mut r: Responder<'_>,
) -> Next {
    match cmd {
        SessionCommand::Hello { agent, features } => {
            session.features = Default::default();
            session.agent = String::from_utf8_lossy(agent).chars().take(256).collect();
            session.map_sent = None;
            let asked: Vec<Feature> = features
                .iter()
                .filter_map(|c| Feature::from_u16(*c))
                .collect();
            let push = [
                Feature::ClustermapChangeNotification,
                Feature::ClustermapChangeNotificationBrief,
            ];
            if asked.iter().any(|f| push.contains(f)) && !asked.contains(&Feature::Duplex) {
                r.error(Status::Einval, "clustermap notifications need duplex");
                return Next::Continue;
            }
            // Asked for both forms of notification, the client gets the brief one.
            let both = push.iter().all(|f| asked.contains(f));
            let mut acked = Vec::new();
            for f in asked {
                if both && f == Feature::ClustermapChangeNotification {
                    continue;
                }
                if SUPPORTED.contains(&f) && !session.has(f) {
                    session.features.insert(f);
                    acked.extend_from_slice(&(f as u16).to_be_bytes());
                }
            }
            let p = r.packet(Status::Success).value(&acked);
            r.send(p);
        }
        SessionCommand::SaslListMechs => {
            // PLAIN only where the password is not in the clear.
            let list = match session.tls {
                true => sluice_sasl::mechanisms_list(),
                false => sluice_sasl::mechanisms_list_cleartext(),
            };
            let p = r.packet(Status::Success).value(list.as_bytes());
            r.send(p);
        }
        SessionCommand::SaslAuth { mechanism, data } => {
            if session.port == Port::Memcached {
                r.error(
                    Status::NotSupported,
                    "the memcached port needs no authentication",
                );
                return Next::Continue;
            }
            session.user = None;
            let mech = String::from_utf8_lossy(mechanism);
            let (sasl, step) =
                ServerSession::start(&mech, data, &node.credentials, &mut rand::rngs::OsRng);
            session.sasl = Some(sasl);
            sasl_step(session, step, r);
            refresh_access(node, session);
        }
        SessionCommand::SaslStep { data, .. } => {
            if session.port == Port::Memcached {
                r.error(
                    Status::NotSupported,
                    "the memcached port needs no authentication",
                );
                return Next::Continue;
            }
            let Some(mut sasl) = session.sasl.take() else {
                r.error(Status::Einval, "no authentication in progress");
                return Next::Continue;
            };
            let step = sasl.step(data);
            session.sasl = Some(sasl);
            sasl_step(session, step, r);
            refresh_access(node, session);
        }
        SessionCommand::SelectBucket { name } => select_bucket(node, session, name, r),
        SessionCommand::ListBuckets => {
            // The buckets the user has a role on, space-separated, as Couchbase lists them.
            let names: Vec<String> = node
                .buckets
                .names()
                .into_iter()
                .filter(|b| bucket_access(node, session, b).any)
                .collect();
            let names = names.join(" ");
            let p = r.packet(Status::Success).value(names.as_bytes());
            r.send(p);
        }
        SessionCommand::GetErrorMap { version } => {
            let map = error_map_json(*version);
            let p = r.packet(Status::Success).datatype(json_bit(&r)).value(&map);
            r.send(p);
        }
        SessionCommand::GetClusterConfig { known } => {
            let view = match &session.bucket {
                Some(bucket) => bucket.cluster_map(),
                None => node.cluster_map(),
            };
            if known.is_some_and(|k| k >= view.version()) {
                let p = r.packet(Status::Success);
                r.send(p);
            } else if session.bucket.is_some() {
                let dt = json_bit(&r);
                let p = r
                    .packet(Status::Success)
                    .datatype(dt)
                    .value(&view.bucket_json);
                r.send(p);
                session.map_seen(view.version());
            } else {
                let config = &view.global_json;
                let p = r
                    .packet(Status::Success)
                    .datatype(json_bit(&r))
                    .value(config);
                r.send(p);
            }
        }
        SessionCommand::Noop | SessionCommand::Verbosity => {
            let p = r.packet(Status::Success);
            r.send(p);
        }
        SessionCommand::Version => {
            let p = r.packet(Status::Success).value(VERSION.as_bytes());
            r.send(p);
        }
        SessionCommand::Stat { group } => {
            // The selected bucket's; before SELECT_BUCKET, the node's own bucket's.
            let bucket = session
                .bucket
                .clone()
                .unwrap_or_else(|| node.bucket.clone());
            return stats::execute(node, &bucket, group, r);
        }
        SessionCommand::Quit => {
            let p = r.packet(Status::Success);
            r.success(p);
            return Next::Close;
        }
    }
    Next::Continue
}

fn json_bit(r: &Responder<'_>) -> u8 {
    if r.json {
        Datatype::JSON
    } else {
        0
    }
}

/// SELECT_BUCKET: `@no bucket@` deselects; a bucket the user has no role on is refused with
/// EACCESS, one that does not exist with KEY_ENOENT. The memcached port stays bound to its
/// bucket.
fn select_bucket(node: &Node, session: &mut Session, name: &[u8], mut r: Responder<'_>) {
    if session.port == Port::Memcached {
        let bound = session.bucket.as_ref().map(|b| b.name.as_bytes());
        if name == b"@no bucket@" || Some(name) == bound {
            let p = r.packet(Status::Success);
            r.send(p);
        } else {
            r.error(Status::Eaccess, "the memcached port is bound to its bucket");
        }
        return;
    }
    if name == b"@no bucket@" {
        session.bucket = None;
        session.manifest = None;
        recompute_access(node, session);
        let p = r.packet(Status::Success);
        r.send(p);
        return;
    }
    let Some(bucket) = std::str::from_utf8(name)
        .ok()
        .and_then(|n| node.buckets.get(n))
    else {
        r.error(Status::KeyEnoent, "no such bucket");
        return;
    };
    let access = bucket_access(node, session, &bucket.name);
    session.access_generation = node.credentials.generation();
    if access.any {
        session.access = access;
        session.bucket = Some(bucket);
        session.manifest = None;
        let p = r.packet(Status::Success);
        r.send(p);
    } else {
        r.error(Status::Eaccess, "no role on this bucket");
    }
}

/// What the session's user may do with bucket `bucket` (everything on the memcached port).
fn bucket_access(node: &Node, session: &Session, bucket: &str) -> BucketAccess {
    match (&session.port, &session.user) {
        (Port::Memcached, _) => BucketAccess::ALL,
        (Port::Kv, Some(user)) => BucketAccess::of(&node.credentials.roles_of(user), bucket),
        (Port::Kv, None) => BucketAccess::default(),
    }
}

/// The session's access worked out again from the user's roles as they are now (changed,
/// or the user deleted): the bucket stays selected, and what the roles no longer allow is
/// refused with EACCESS from the next command on.
pub(crate) fn recompute_access(node: &Node, session: &mut Session) {
    session.access_generation = node.credentials.generation();
    session.access = match &session.bucket {
        Some(bucket) => bucket_access(node, session, &bucket.name),
        None => BucketAccess::default(),
    };
}

/// After a login (or a failed one): the access to a bucket selected before is the new
/// user's, and a user with none on it has it deselected.
fn refresh_access(node: &Node, session: &mut Session) {
    recompute_access(node, session);
    if session.port == Port::Kv && !session.access.any {
        session.bucket = None;
        session.manifest = None;
    }
}

fn sasl_step(session: &mut Session, step: Step, mut r: Responder<'_>) {
    match step {
        Step::Continue(challenge) => {
            let p = r.packet(Status::AuthContinue).value(&challenge);
            r.send(p);
        }
        Step::Success {
            username,
            final_message,
        } => {
            tracing::debug!(user = %username, agent = %session.agent, "authenticated");
            session.user = Some(username);
            session.sasl = None;
            let p = r.packet(Status::Success).value(&final_message);
            r.send(p);
        }
        Step::Failure(e) => {
            tracing::info!(error = %e, agent = %session.agent, "authentication failed");
            session.sasl = None;
            // Never tell the client which part was wrong.
            r.error(Status::AuthError, "authentication failed");
        }
    }
}
