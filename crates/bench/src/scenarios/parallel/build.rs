//! The work of one `bench parallel` client, shaped like building a source tree the way seed
//! 004's clients built a kernel: unpack (create directories and source files, update each
//! directory's listing), compile (read each source, create its object, update the source's
//! times), link (read every object, create the image), clean (delete everything). Documents
//! are small inode-like JSON records. Pure: it only says which operations, in which order.

/// Source files per directory.
pub const FILES_PER_DIR: u32 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Unpack,
    Compile,
    Link,
    Clean,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Unpack, Stage::Compile, Stage::Link, Stage::Clean];
}

/// One operation of the build. An update is a read followed by a CAS-checked write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildOp {
    Create(String),
    Read(String),
    Update(String),
    Delete(String),
}

/// One client's tree: `files` sources under `prefix`.
#[derive(Debug, Clone)]
pub struct BuildPlan {
    pub prefix: String,
    pub files: u32,
}

impl BuildPlan {
    fn dirs(&self) -> u32 {
        self.files.div_ceil(FILES_PER_DIR)
    }

    fn dir(&self, d: u32) -> String {
        format!("{}dir/d{d:05}", self.prefix)
    }

    fn src(&self, f: u32) -> String {
        format!("{}src/d{:05}/f{f:07}.c", self.prefix, f / FILES_PER_DIR)
    }

    fn obj(&self, f: u32) -> String {
        format!("{}obj/d{:05}/f{f:07}.o", self.prefix, f / FILES_PER_DIR)
    }

    fn image(&self) -> String {
        format!("{}vmlinux", self.prefix)
    }

    fn files_of(&self, d: u32) -> std::ops::Range<u32> {
        d * FILES_PER_DIR..((d + 1) * FILES_PER_DIR).min(self.files)
    }

    /// The operations of one stage, in order.
    pub fn stage(&self, stage: Stage) -> Vec<BuildOp> {
        let mut ops = Vec::new();
        match stage {
            Stage::Unpack => {
                for d in 0..self.dirs() {
                    ops.push(BuildOp::Create(self.dir(d)));
                    ops.extend(self.files_of(d).map(|f| BuildOp::Create(self.src(f))));
                    ops.push(BuildOp::Update(self.dir(d)));
                }
            }
            Stage::Compile => {
                for f in 0..self.files {
                    ops.push(BuildOp::Read(self.src(f)));
                    ops.push(BuildOp::Create(self.obj(f)));
                    ops.push(BuildOp::Update(self.src(f)));
                }
            }
            Stage::Link => {
                ops.extend((0..self.files).map(|f| BuildOp::Read(self.obj(f))));
                ops.push(BuildOp::Create(self.image()));
            }
            Stage::Clean => {
                for f in 0..self.files {
                    ops.push(BuildOp::Delete(self.obj(f)));
                    ops.push(BuildOp::Delete(self.src(f)));
                }
                ops.extend((0..self.dirs()).map(|d| BuildOp::Delete(self.dir(d))));
                ops.push(BuildOp::Delete(self.image()));
            }
        }
        ops
    }

    /// Operations of the whole build.
    pub fn total_ops(&self) -> u64 {
        Stage::ALL.iter().map(|s| self.stage(*s).len() as u64).sum()
    }
}

/// A document for `key` at `version`, padded to `bytes` (longer if the key needs it).
pub fn document(key: &str, version: u64, bytes: usize) -> Vec<u8> {
    let head = format!("{{\"path\":\"{key}\",\"mode\":33188,\"version\":{version},\"pad\":\"");
    let tail = "\"}";
    let pad = bytes.saturating_sub(head.len() + tail.len());
    let mut doc = head.into_bytes();
    doc.resize(doc.len() + pad, b'.');
    doc.extend_from_slice(tail.as_bytes());
    doc
}

/// The version a document of `key` carries, if it is one.
pub fn version_of(key: &str, doc: &[u8]) -> Option<u64> {
    let head = format!("{{\"path\":\"{key}\",\"mode\":33188,\"version\":");
    let rest = doc.strip_prefix(head.as_bytes())?;
    let end = rest.iter().position(|b| *b == b',')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Plays the build against a set of live keys: every read and update finds its
    /// document, every create makes a new one, every delete removes one, nothing is left.
    #[test]
    fn a_build_is_consistent_and_leaves_nothing_behind() {
        for files in [1, 15, 16, 17, 100] {
            let plan = BuildPlan {
                prefix: "r1c3/".into(),
                files,
            };
            let mut live = HashSet::new();
            for stage in Stage::ALL {
                for op in plan.stage(stage) {
                    match op {
                        BuildOp::Create(k) => assert!(live.insert(k.clone()), "{k} created twice"),
                        BuildOp::Read(k) | BuildOp::Update(k) => {
                            assert!(live.contains(&k), "{k} used before it exists")
                        }
                        BuildOp::Delete(k) => assert!(live.remove(&k), "{k} deleted twice"),
                    }
                }
            }
            assert!(live.is_empty(), "left behind: {live:?}");
        }
    }

    #[test]
    fn operation_counts() {
        let plan = BuildPlan {
            prefix: String::new(),
            files: 32,
        };
        // Per file: create, read + create + update, read, delete × 2; per directory: create,
        // update, delete; the image: create, delete.
        assert_eq!(plan.total_ops(), 32 * 7 + 2 * 3 + 2);
        assert_eq!(plan.stage(Stage::Link).len(), 33);
    }

    #[test]
    fn documents_have_the_size_and_carry_their_version() {
        let d = document("a/b.c", 7, 256);
        assert_eq!(d.len(), 256);
        assert!(serde_json::from_slice::<serde_json::Value>(&d).is_ok());
        assert_eq!(version_of("a/b.c", &d), Some(7));
        assert_eq!(version_of("a/x.c", &d), None);
        // A key longer than the size still makes a whole document.
        let long = "k".repeat(300);
        assert_eq!(version_of(&long, &document(&long, 1, 96)), Some(1));
    }
}
