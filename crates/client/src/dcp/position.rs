//! Where a consumer is in each vbucket's history, and saving that to a file.
//!
//! A position is what a stream request needs to continue without gap or duplicate: the
//! branch the client followed (`vb_uuid`), the last seqno it holds (`seqno`) and the snapshot
//! it was in (`snap_start..=snap_end`). [`DcpPosition`] keeps `snap_start <= seqno <=
//! snap_end` at all times, so a saved position is always a valid request (dcp-lessons.md
//! client problem 2: keeping raw marker bounds breaks that rule on resume).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_proto::dcp::{StreamFlags, StreamRequest};
use sluice_types::{Seqno, VbId, VbUuid};

use super::error::DcpError;

/// One vbucket's resume point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcpPosition {
    pub vb: VbId,
    /// The newest failover-log uuid of the producer when the stream was accepted (0 = no
    /// history yet).
    pub vb_uuid: VbUuid,
    /// The last seqno the client holds (0 = nothing).
    pub seqno: Seqno,
    pub snap_start: Seqno,
    pub snap_end: Seqno,
}

impl DcpPosition {
    /// Nothing received yet: stream the vbucket from its beginning.
    pub fn zero(vb: VbId) -> DcpPosition {
        DcpPosition {
            vb,
            vb_uuid: VbUuid(0),
            seqno: Seqno::ZERO,
            snap_start: Seqno::ZERO,
            snap_end: Seqno::ZERO,
        }
    }

    /// Holding everything up to `seqno` of branch `vb_uuid`, as a complete snapshot.
    pub fn at(vb: VbId, vb_uuid: VbUuid, seqno: Seqno) -> DcpPosition {
        DcpPosition {
            vb,
            vb_uuid,
            seqno,
            snap_start: seqno,
            snap_end: seqno,
        }
    }

    /// A snapshot marker was delivered. Until one of its items arrives the client holds
    /// exactly `seqno`, which is why `snap_start` may be lowered to it: a marker's start
    /// can be above the last seqno received (the reference producer starts markers at the
    /// first seqno that follows), and `start == snap_start` tells the producer "none of this
    /// snapshot yet".
    pub(crate) fn on_marker(&mut self, start: Seqno, end: Seqno) {
        self.snap_start = start.min(self.seqno);
        self.snap_end = end.max(self.seqno);
    }

    /// An item (or a seqno advance) was delivered.
    pub(crate) fn on_seqno(&mut self, seqno: Seqno) {
        self.seqno = seqno;
        // A correct producer keeps items inside their marker; if one did not, widening the
        // bounds keeps the saved position a valid request instead of one refused with ERANGE.
        self.snap_end = self.snap_end.max(seqno);
        self.snap_start = self.snap_start.min(seqno);
    }

    /// The request that continues from here, up to `end` (`Seqno::MAX` = follow forever).
    pub fn stream_request(&self, end: Seqno) -> StreamRequest {
        StreamRequest {
            flags: StreamFlags::default(),
            start: self.seqno,
            end,
            vb_uuid: self.vb_uuid,
            snap_start: self.snap_start.min(self.seqno),
            snap_end: self.snap_end.max(self.seqno),
        }
    }
}

/// Positions of every vbucket a stream follows, sorted by vbucket.
///
/// Saved as JSON: `{"format":1,"vbuckets":[{"vb":0,"vb_uuid":..,"seqno":..,"snap_start":..,
/// "snap_end":..},..]}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamPositions {
    positions: Vec<DcpPosition>,
}

/// The file layout; `format` lets a later version change it without misreading old files.
#[derive(Serialize, Deserialize)]
struct PositionsFile {
    format: u32,
    vbuckets: Vec<DcpPosition>,
}

const FORMAT: u32 = 1;

impl StreamPositions {
    /// Every vbucket `0..num_vbuckets` from seqno 0 with no history (uuid 0).
    pub fn from_beginning(num_vbuckets: u16) -> StreamPositions {
        StreamPositions {
            positions: (0..num_vbuckets)
                .map(|vb| DcpPosition::zero(VbId(vb)))
                .collect(),
        }
    }

    /// Positions for some vbuckets; a later position for the same vbucket replaces an
    /// earlier one.
    pub fn from_positions(positions: impl IntoIterator<Item = DcpPosition>) -> StreamPositions {
        let mut p = StreamPositions::default();
        for pos in positions {
            p.insert(pos);
        }
        p
    }

    pub fn get(&self, vb: VbId) -> Option<&DcpPosition> {
        self.index(vb).ok().map(|i| &self.positions[i])
    }

    pub(crate) fn get_mut(&mut self, vb: VbId) -> Option<&mut DcpPosition> {
        self.index(vb).ok().map(|i| &mut self.positions[i])
    }

    /// Adds or replaces the position of `pos.vb`.
    pub fn insert(&mut self, pos: DcpPosition) {
        match self.index(pos.vb) {
            Ok(i) => self.positions[i] = pos,
            Err(i) => self.positions.insert(i, pos),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &DcpPosition> {
        self.positions.iter()
    }

    pub fn len(&self) -> usize {
        self.positions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    fn index(&self, vb: VbId) -> Result<usize, usize> {
        self.positions.binary_search_by_key(&vb, |p| p.vb)
    }

    pub fn to_json(&self) -> String {
        let file = PositionsFile {
            format: FORMAT,
            vbuckets: self.positions.clone(),
        };
        serde_json::to_string_pretty(&file).expect("positions always serialize")
    }

    /// Writes the positions to `path` atomically: a temporary file in the same directory,
    /// fsynced, then renamed over `path`. A crash leaves either the old file or the new one,
    /// never a torn one (which would make the consumer restart from scratch or skip data).
    pub fn save(&self, path: &Path) -> Result<(), DcpError> {
        let file_err = |source| DcpError::PositionsFile {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().ok_or_else(|| {
            file_err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a file name",
            ))
        })?;
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = dir.join(tmp_name);
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(self.to_json().as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            // Make the rename itself durable; not every platform can open a directory.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            file_err(e)
        })
    }

    /// Reads positions saved by [`StreamPositions::save`].
    pub fn load(path: &Path) -> Result<StreamPositions, DcpError> {
        let bytes = std::fs::read(path).map_err(|source| DcpError::PositionsFile {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&bytes).map_err(|e| match e {
            LoadError::Json(source) => DcpError::PositionsFormat {
                path: path.to_path_buf(),
                source,
            },
            LoadError::Invalid(why) => DcpError::PositionsInvalid {
                path: path.to_path_buf(),
                why,
            },
        })
    }

    /// [`StreamPositions::load`], or `None` if the file does not exist.
    pub fn load_if_exists(path: &Path) -> Result<Option<StreamPositions>, DcpError> {
        match std::fs::metadata(path) {
            Ok(_) => Self::load(path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(DcpError::PositionsFile {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    fn from_json(bytes: &[u8]) -> Result<StreamPositions, LoadError> {
        let file: PositionsFile = serde_json::from_slice(bytes).map_err(LoadError::Json)?;
        if file.format != FORMAT {
            return Err(LoadError::Invalid(format!(
                "format {} (this client reads {FORMAT})",
                file.format
            )));
        }
        let mut positions = file.vbuckets;
        positions.sort_by_key(|p| p.vb);
        if let Some(w) = positions.windows(2).find(|w| w[0].vb == w[1].vb) {
            return Err(LoadError::Invalid(format!("{} appears twice", w[0].vb)));
        }
        // A hand-edited file may break the snapshot rule; the request would be refused.
        if let Some(p) = positions
            .iter()
            .find(|p| !(p.snap_start <= p.seqno && p.seqno <= p.snap_end))
        {
            return Err(LoadError::Invalid(format!(
                "{}: snap_start <= seqno <= snap_end does not hold",
                p.vb
            )));
        }
        Ok(StreamPositions { positions })
    }
}

enum LoadError {
    Json(serde_json::Error),
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_without_items_keeps_the_request_valid() {
        let mut p = DcpPosition::at(VbId(1), VbUuid(7), Seqno(100));
        // The reference producer starts the next marker at the first seqno that follows.
        p.on_marker(Seqno(101), Seqno(200));
        let r = p.stream_request(Seqno::MAX);
        assert_eq!(
            (r.start, r.snap_start, r.snap_end),
            (Seqno(100), Seqno(100), Seqno(200))
        );
        p.on_seqno(Seqno(150));
        let r = p.stream_request(Seqno::MAX);
        assert_eq!(
            (r.start, r.snap_start, r.snap_end),
            (Seqno(150), Seqno(100), Seqno(200))
        );
        p.on_marker(Seqno(150), Seqno(300));
        p.on_seqno(Seqno(300));
        assert_eq!((p.snap_start, p.snap_end), (Seqno(150), Seqno(300)));
    }

    #[test]
    fn save_and_load_round_trip_atomically() {
        let dir = std::env::temp_dir().join(format!("sluice-pos-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("positions.json");
        assert!(StreamPositions::load_if_exists(&path).unwrap().is_none());
        let mut p = StreamPositions::from_beginning(4);
        p.insert(DcpPosition {
            vb: VbId(2),
            vb_uuid: VbUuid(u64::MAX - 1),
            seqno: Seqno(10),
            snap_start: Seqno(5),
            snap_end: Seqno(12),
        });
        p.save(&path).unwrap();
        p.save(&path).unwrap(); // over an existing file
        assert_eq!(StreamPositions::load(&path).unwrap(), p);
        let leftovers = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rejects_duplicates_bad_bounds_and_unknown_formats() {
        let pos = r#"{"vb":1,"vb_uuid":0,"seqno":5,"snap_start":5,"snap_end":5}"#;
        let bad = r#"{"vb":2,"vb_uuid":0,"seqno":5,"snap_start":6,"snap_end":9}"#;
        let file =
            |format: u32, list: &str| format!(r#"{{"format":{format},"vbuckets":[{list}]}}"#);
        assert!(StreamPositions::from_json(file(1, pos).as_bytes()).is_ok());
        for bytes in [
            file(1, &format!("{pos},{pos}")),
            file(1, bad),
            file(2, pos),
            "not json".to_string(),
        ] {
            assert!(
                StreamPositions::from_json(bytes.as_bytes()).is_err(),
                "{bytes}"
            );
        }
    }
}
