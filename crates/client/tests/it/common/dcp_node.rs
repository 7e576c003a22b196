//! A real in-process Sluice node for the DCP consumer tests, and what they check streams
//! against: the model of what was written and the replica rebuilt from the events.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use sluice_client::dcp::{DcpEvent, DcpOptions, DcpStream, StreamPositions};
use sluice_client::{Client, ConnectOptions, StoreOptions};
use sluice_types::{Cas, Seqno, VbId};

pub const VBUCKETS: u16 = 64;

/// An in-process node on free ports, its data in a temporary directory.
pub struct Node {
    pub running: sluice_manager::Running,
    _dir: tempfile::TempDir,
    pub addr: String,
}

pub async fn start_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut c = sluice_server::ServerConfig::new(dir.path());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = VBUCKETS;
    c.memory_quota_mb = 128;
    c.connection_threads = 1;
    // Expirations in these tests come from reads of expired documents, not the pager.
    c.expiry_pager_interval_s = 3600;
    let running = sluice_manager::start(c).await.unwrap();
    let addr = running.kv_addr.to_string();
    Node {
        running,
        _dir: dir,
        addr,
    }
}

impl Node {
    pub async fn kv(&self) -> Client {
        Client::connect(&self.addr, connect_options())
            .await
            .unwrap()
    }
}

pub fn connect_options() -> ConnectOptions {
    ConnectOptions::sluice("Administrator", "password", "default")
}

pub fn dcp_options() -> DcpOptions {
    DcpOptions::new(connect_options())
}

/// What the bucket should hold, as the test wrote it: key → value (`None` = deleted).
#[derive(Default)]
pub struct Model {
    pub docs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    pub expired: HashSet<Vec<u8>>,
}

impl Model {
    pub async fn set(&mut self, c: &mut Client, key: &str, value: &[u8]) {
        self.set_with(c, key, value, 0).await;
    }

    pub async fn set_with(&mut self, c: &mut Client, key: &str, value: &[u8], expiry: u32) {
        let opts = StoreOptions {
            expiry,
            ..Default::default()
        };
        c.set(key.as_bytes(), value, opts).await.unwrap();
        self.docs
            .insert(key.as_bytes().to_vec(), Some(value.to_vec()));
    }

    pub async fn delete(&mut self, c: &mut Client, key: &str) {
        c.delete(key.as_bytes(), Cas::ZERO).await.unwrap();
        self.docs.insert(key.as_bytes().to_vec(), None);
    }
}

/// What a consumer rebuilt from the events, checking the stream's invariants as it goes:
/// per vbucket, seqnos strictly increase and each item lies inside its snapshot marker.
#[derive(Default)]
pub struct Replica {
    pub docs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    pub expirations: HashSet<Vec<u8>>,
    pub deletions: HashSet<Vec<u8>>,
    pub last_seqno: HashMap<VbId, Seqno>,
    pub marker: HashMap<VbId, (Seqno, Seqno)>,
    pub items: usize,
    pub rollbacks: Vec<(VbId, Seqno)>,
    pub stream_ends: usize,
    pub json_values: usize,
}

impl Replica {
    /// Continues from saved positions: anything at or below them would be a duplicate.
    pub fn resuming_from(mut self, positions: &StreamPositions) -> Replica {
        for p in positions.iter() {
            self.last_seqno.insert(p.vb, p.seqno);
        }
        self.marker.clear();
        self
    }

    pub fn apply(&mut self, ev: &DcpEvent) {
        match ev {
            DcpEvent::SnapshotMarker { vb, start, end, .. } => {
                assert!(start <= end, "{vb}: marker {start}..{end}");
                self.marker.insert(*vb, (*start, *end));
            }
            DcpEvent::Rollback { vb, to } => {
                self.rollbacks.push((*vb, *to));
                self.last_seqno.insert(*vb, *to);
                self.marker.remove(vb);
            }
            DcpEvent::StreamOpened { .. } => {}
            DcpEvent::StreamEnd { .. } => self.stream_ends += 1,
            DcpEvent::VbucketState { vb, state } => panic!("{vb}: no takeover asked ({state:?})"),
            DcpEvent::Prepare { .. } | DcpEvent::Commit { .. } | DcpEvent::Abort { .. } => {
                panic!("{:?}: no sync writes asked", ev.vb())
            }
            DcpEvent::Mutation(i) | DcpEvent::Deletion(i) | DcpEvent::Expiration(i) => {
                let vb = i.vb;
                let last = self.last_seqno.get(&vb).copied().unwrap_or(Seqno::ZERO);
                assert!(
                    i.seqno > last,
                    "{vb}: seqno {} after {last} (duplicate or out of order)",
                    i.seqno
                );
                let (start, end) = *self
                    .marker
                    .get(&vb)
                    .unwrap_or_else(|| panic!("{vb}: item {} before any marker", i.seqno));
                assert!(
                    start <= i.seqno && i.seqno <= end,
                    "{vb}: item {} outside its marker {start}..{end}",
                    i.seqno
                );
                self.last_seqno.insert(vb, i.seqno);
                self.items += 1;
                let key = i.key.to_vec();
                match ev {
                    DcpEvent::Mutation(_) => {
                        if i.datatype.is_json() {
                            self.json_values += 1;
                        }
                        self.docs.insert(key, Some(i.value.to_vec()));
                    }
                    DcpEvent::Deletion(_) => {
                        assert!(i.value.is_empty());
                        self.deletions.insert(key.clone());
                        self.docs.insert(key, None);
                    }
                    _ => {
                        self.expirations.insert(key.clone());
                        self.docs.insert(key, None);
                    }
                }
            }
        }
    }

    /// The live documents (deleted ones dropped) must equal the model's.
    pub fn assert_matches(&self, model: &Model) {
        let live = |m: &BTreeMap<Vec<u8>, Option<Vec<u8>>>| -> BTreeMap<Vec<u8>, Vec<u8>> {
            m.iter()
                .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                .collect()
        };
        let want = live(&model.docs);
        let got = live(&self.docs);
        assert_eq!(got.len(), want.len(), "number of live documents");
        for (k, v) in &want {
            assert_eq!(
                got.get(k),
                Some(v),
                "document {}",
                String::from_utf8_lossy(k)
            );
        }
        for (k, v) in &model.docs {
            if v.is_none() && !model.expired.contains(k) {
                assert!(
                    self.docs.get(k) == Some(&None),
                    "deleted {} must arrive as a deletion",
                    String::from_utf8_lossy(k)
                );
            }
        }
        for k in &model.expired {
            assert!(
                self.expirations.contains(k),
                "{} must arrive as an expiration",
                String::from_utf8_lossy(k)
            );
        }
    }
}

/// Each vbucket's high seqno now.
pub async fn high_seqnos(node: &Node) -> HashMap<VbId, Seqno> {
    node.kv()
        .await
        .get_all_vb_seqnos()
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Delivers events into `replica` until every vbucket's position reaches `highs`.
pub async fn stream_until(
    stream: &mut DcpStream,
    replica: &mut Replica,
    highs: &HashMap<VbId, Seqno>,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let behind = highs
            .iter()
            .filter(|(vb, high)| {
                stream
                    .positions()
                    .get(**vb)
                    .is_none_or(|p| p.seqno < **high)
            })
            .count();
        if behind == 0 {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.next())
            .await
            .unwrap_or_else(|_| panic!("{behind} vbuckets still behind after 60 s"))
            .unwrap();
        replica.apply(&ev);
    }
}

/// One number from `STAT dcp` for the connection named `name` (refreshed every second).
pub async fn dcp_stat(kv: &mut Client, name: &str, stat: &str) -> u64 {
    let key = format!("eq_dcpq:{name}:{stat}");
    let stats = kv.stats("dcp").await.unwrap();
    let (_, v) = stats
        .iter()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("no {key} in {stats:?}"));
    v.parse().unwrap()
}

/// Nothing more arrives for a while (used after a stream has caught up).
pub async fn assert_quiet(stream: &mut DcpStream, replica: &mut Replica, for_: Duration) {
    if let Ok(ev) = tokio::time::timeout(for_, stream.next()).await {
        let ev = ev.unwrap();
        replica.apply(&ev);
        assert!(
            ev.item().is_none(),
            "no further change was written, yet got {ev:?}"
        );
    }
}

pub fn json_doc(i: usize) -> Vec<u8> {
    format!(r#"{{"i":{i},"name":"doc {i}","tags":["a","b"]}}"#).into_bytes()
}

pub fn binary_doc(i: usize) -> Vec<u8> {
    let mut v = vec![0u8, 0xff, 0x10];
    v.extend_from_slice(format!("bin-{i}").as_bytes());
    v
}
