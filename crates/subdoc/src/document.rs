//! A JSON document that path operations read and change in place.
//!
//! A mutation splices new bytes into the text and leaves every other byte as it was: the
//! rest of the document keeps its key order, whitespace and number spelling, as Couchbase's
//! sub-document engine does. Each mutation either succeeds or changes nothing.

use crate::path::{Component, Index, Path};
use crate::scan::{self, Entry, Kind, Span};
use crate::value;
use crate::SubdocError;

/// A document body known to be valid JSON within the depth limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    text: Vec<u8>,
}

/// A path lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupOp {
    /// The value at the path, as it is in the document.
    Get,
    /// Only whether the path exists.
    Exists,
    /// How many members or elements the object or array at the path holds.
    Count,
}

/// A path mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationOp {
    /// Add a dictionary key that must not exist yet.
    DictAdd,
    /// Set a dictionary key, whether it exists or not.
    DictUpsert,
    /// Remove the value at the path.
    Delete,
    /// Replace the value at the path, which must exist.
    Replace,
    /// Append one or more values to the array at the path.
    ArrayPushLast,
    /// Prepend one or more values to the array at the path.
    ArrayPushFirst,
    /// Insert one or more values at the array position the path ends with.
    ArrayInsert,
    /// Append one primitive value to the array of primitives, unless it is there already.
    ArrayAddUnique,
    /// Add a signed 64-bit delta to the integer at the path (created as the delta if absent).
    Counter,
}

impl MutationOp {
    /// Every mutation, for tests and fuzzing that try them all.
    pub const ALL: [MutationOp; 9] = [
        MutationOp::DictAdd,
        MutationOp::DictUpsert,
        MutationOp::Delete,
        MutationOp::Replace,
        MutationOp::ArrayPushLast,
        MutationOp::ArrayPushFirst,
        MutationOp::ArrayInsert,
        MutationOp::ArrayAddUnique,
        MutationOp::Counter,
    ];
}

/// One mutation of a document.
#[derive(Debug, Clone, Copy)]
pub struct Mutation<'a> {
    pub op: MutationOp,
    pub path: &'a Path,
    pub value: &'a [u8],
    /// Create missing parent dictionaries on the way.
    pub mkdir_p: bool,
}

/// Where a path led.
enum Located {
    /// To a value; `slot` is the container holding it and its position there (None for the
    /// root).
    Found {
        span: Span,
        slot: Option<(Span, usize)>,
    },
    /// Component `at` names nothing in `container`, the deepest value the path reached (an
    /// object for a key, an array for an index).
    Missing { container: Span, at: usize },
}

impl Document {
    /// Checks `text` (JSON, depth) and takes it as a document.
    pub fn parse(text: &[u8]) -> Result<Document, SubdocError> {
        value::check_document(text)?;
        Ok(Document {
            text: text.to_vec(),
        })
    }

    /// A document the caller knows is valid JSON (a stored document whose datatype has the
    /// JSON bit: the engine checked it with a full parser when it was stored), so only its
    /// depth is checked here, with a byte scan instead of a second parse. On text that is
    /// not JSON the operations return meaningless results, never a panic.
    pub fn from_valid_json(text: &[u8]) -> Result<Document, SubdocError> {
        if crate::scan::depth(text) > crate::path::PATH_COMPONENTS_MAX {
            return Err(SubdocError::DocE2deep);
        }
        Ok(Document {
            text: text.to_vec(),
        })
    }

    /// The empty document a mutation creates when the document does not exist yet: an array
    /// if the mutation works on the root as an array or its path starts with an index, an
    /// object otherwise.
    pub fn empty_for(op: MutationOp, path: &Path) -> Document {
        let array = match path.components().first() {
            Some(Component::Index(_)) => true,
            Some(Component::Key(_)) => false,
            None => matches!(
                op,
                MutationOp::ArrayPushLast | MutationOp::ArrayPushFirst | MutationOp::ArrayAddUnique
            ),
        };
        Document {
            text: if array {
                b"[]".to_vec()
            } else {
                b"{}".to_vec()
            },
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.text
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.text
    }

    /// Runs a lookup. `Get` returns the value's bytes, `Count` the count in ASCII, `Exists`
    /// nothing.
    pub fn lookup(&self, op: LookupOp, path: &Path) -> Result<Option<Vec<u8>>, SubdocError> {
        let Located::Found { span, .. } = self.locate(path.components())? else {
            return Err(SubdocError::PathEnoent);
        };
        Ok(match op {
            LookupOp::Get => Some(span.of(&self.text).to_vec()),
            LookupOp::Exists => None,
            LookupOp::Count => match scan::kind(&self.text, span.start) {
                Kind::Object | Kind::Array => Some(
                    scan::entries(&self.text, span)
                        .len()
                        .to_string()
                        .into_bytes(),
                ),
                _ => return Err(SubdocError::PathMismatch),
            },
        })
    }

    /// Applies a mutation. Returns the counter's new value (ASCII) for `Counter`, nothing
    /// otherwise. On error the document is unchanged.
    pub fn apply(&mut self, m: &Mutation<'_>) -> Result<Option<Vec<u8>>, SubdocError> {
        let comps = m.path.components();
        let depth = comps.len();
        match m.op {
            MutationOp::DictAdd | MutationOp::DictUpsert => {
                let Some(Component::Key(_)) = comps.last() else {
                    return Err(SubdocError::PathEinval);
                };
                value::single(m.value, depth)?;
                let v = value::trimmed(m.value);
                match self.locate(comps)? {
                    Located::Found { .. } if m.op == MutationOp::DictAdd => {
                        Err(SubdocError::PathEexists)
                    }
                    Located::Found { span, .. } => self.splice(span, &[v]),
                    Located::Missing { container, at } => {
                        self.create(container, comps, at, v.to_vec(), m.mkdir_p)
                    }
                }
                .map(|()| None)
            }
            MutationOp::Replace => {
                if comps.is_empty() {
                    return Err(SubdocError::PathEinval);
                }
                value::single(m.value, depth)?;
                match self.locate(comps)? {
                    Located::Found { span, .. } => {
                        self.splice(span, &[value::trimmed(m.value)]).map(|()| None)
                    }
                    Located::Missing { .. } => Err(SubdocError::PathEnoent),
                }
            }
            MutationOp::Delete => {
                if comps.is_empty() {
                    return Err(SubdocError::PathEinval);
                }
                match self.locate(comps)? {
                    Located::Found {
                        slot: Some((container, index)),
                        ..
                    } => self.remove(container, index).map(|()| None),
                    Located::Found { slot: None, .. } => Err(SubdocError::PathEinval),
                    Located::Missing { .. } => Err(SubdocError::PathEnoent),
                }
            }
            MutationOp::ArrayPushLast | MutationOp::ArrayPushFirst => {
                value::list(m.value, depth)?;
                let v = value::trimmed(m.value);
                match self.locate(comps)? {
                    Located::Found { span, .. } => {
                        let array = self.array_at(span)?;
                        let at = match m.op {
                            MutationOp::ArrayPushFirst => 0,
                            _ => array.len(),
                        };
                        self.insert_elements(span, &array, at, v)
                    }
                    Located::Missing { container, at } => {
                        self.create(container, comps, at, wrap(v), m.mkdir_p)
                    }
                }
                .map(|()| None)
            }
            MutationOp::ArrayInsert => {
                let Some(Component::Index(index)) = comps.last() else {
                    return Err(SubdocError::PathEinval);
                };
                let Index::At(index) = *index else {
                    return Err(SubdocError::PathEinval);
                };
                value::list(m.value, depth.saturating_sub(1))?;
                let parent = &comps[..comps.len() - 1];
                let Located::Found { span, .. } = self.locate(parent)? else {
                    return Err(SubdocError::PathEnoent);
                };
                let array = self.array_at(span)?;
                if index > array.len() {
                    return Err(SubdocError::PathEnoent);
                }
                self.insert_elements(span, &array, index, value::trimmed(m.value))
                    .map(|()| None)
            }
            MutationOp::ArrayAddUnique => {
                value::primitive(m.value, depth + 1)?;
                let v = value::trimmed(m.value);
                match self.locate(comps)? {
                    Located::Found { span, .. } => {
                        let array = self.array_at(span)?;
                        for e in &array {
                            match scan::kind(&self.text, e.value.start) {
                                Kind::Object | Kind::Array => {
                                    return Err(SubdocError::PathMismatch)
                                }
                                _ if e.value.of(&self.text) == v => {
                                    return Err(SubdocError::PathEexists)
                                }
                                _ => {}
                            }
                        }
                        self.insert_elements(span, &array, array.len(), v)
                    }
                    Located::Missing { container, at } => {
                        self.create(container, comps, at, wrap(v), m.mkdir_p)
                    }
                }
                .map(|()| None)
            }
            MutationOp::Counter => {
                let delta = std::str::from_utf8(m.value)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|d| *d != 0)
                    .ok_or(SubdocError::DeltaEinval)?;
                if comps.is_empty() {
                    return Err(SubdocError::PathMismatch);
                }
                match self.locate(comps)? {
                    Located::Found { span, .. } => {
                        let now = integer(span.of(&self.text))?;
                        let next = now
                            .checked_add(delta)
                            .ok_or(SubdocError::ValueCantInsert)?
                            .to_string()
                            .into_bytes();
                        self.splice(span, &[&next])?;
                        Ok(Some(next))
                    }
                    Located::Missing { container, at } => {
                        let next = delta.to_string().into_bytes();
                        self.create(container, comps, at, next.clone(), m.mkdir_p)?;
                        Ok(Some(next))
                    }
                }
            }
        }
    }

    /// Follows `comps` from the root.
    fn locate(&self, comps: &[Component]) -> Result<Located, SubdocError> {
        let text = &self.text;
        let mut span = scan::root(text);
        let mut slot = None;
        for (at, c) in comps.iter().enumerate() {
            let kind = scan::kind(text, span.start);
            let entries = match (c, kind) {
                (Component::Key(_), Kind::Object) | (Component::Index(_), Kind::Array) => {
                    scan::entries(text, span)
                }
                _ => return Err(SubdocError::PathMismatch),
            };
            let found = match c {
                Component::Key(k) => entries
                    .iter()
                    .position(|e| e.key.is_some_and(|q| scan::key_is(text, q, k))),
                Component::Index(Index::At(i)) => (*i < entries.len()).then_some(*i),
                Component::Index(Index::Last) => entries.len().checked_sub(1),
            };
            match found {
                Some(i) => {
                    slot = Some((span, i));
                    span = entries[i].value;
                }
                None => {
                    return Ok(Located::Missing {
                        container: span,
                        at,
                    })
                }
            }
        }
        Ok(Located::Found { span, slot })
    }

    /// The elements of the array at `span` (PathMismatch if it is not an array).
    fn array_at(&self, span: Span) -> Result<Vec<Entry>, SubdocError> {
        match scan::kind(&self.text, span.start) {
            Kind::Array => Ok(scan::entries(&self.text, span)),
            _ => Err(SubdocError::PathMismatch),
        }
    }

    /// Creates the missing path `comps[at..]` inside `container`, holding `leaf`. Every
    /// missing component must be a key; missing parents need `mkdir_p`.
    fn create(
        &mut self,
        container: Span,
        comps: &[Component],
        at: usize,
        leaf: Vec<u8>,
        mkdir_p: bool,
    ) -> Result<(), SubdocError> {
        if at + 1 < comps.len() && !mkdir_p {
            return Err(SubdocError::PathEnoent);
        }
        let mut keys = Vec::with_capacity(comps.len() - at);
        for c in &comps[at..] {
            match c {
                Component::Key(k) => keys.push(k),
                Component::Index(_) => return Err(SubdocError::PathEnoent),
            }
        }
        // Build inside out: {"k2":{"k3":leaf}} for the parents below the first missing key.
        let mut value = leaf;
        for k in keys[1..].iter().rev() {
            let mut obj = b"{".to_vec();
            obj.extend_from_slice(&member(k, &value));
            obj.push(b'}');
            value = obj;
        }
        let text = member(keys[0], &value);
        let entries = scan::entries(&self.text, container);
        match entries.last() {
            None => self.insert_at(container.start + 1, &[&text]),
            Some(last) => self.insert_at(last.value.end, &[b",", &text]),
        }
    }

    /// Inserts the comma-separated `values` before element `at` of the array (at its end
    /// when `at` is its length).
    fn insert_elements(
        &mut self,
        array: Span,
        elements: &[Entry],
        at: usize,
        values: &[u8],
    ) -> Result<(), SubdocError> {
        match (elements.get(at), elements.last()) {
            (_, None) => self.insert_at(array.start + 1, &[values]),
            (Some(e), _) => self.insert_at(e.start(), &[values, b","]),
            (None, Some(last)) => self.insert_at(last.value.end, &[b",", values]),
        }
    }

    /// Removes entry `index` of `container` with the comma that separates it from a
    /// neighbour.
    fn remove(&mut self, container: Span, index: usize) -> Result<(), SubdocError> {
        let entries = scan::entries(&self.text, container);
        let this = entries[index];
        let cut = match (entries.get(index + 1), index.checked_sub(1)) {
            (Some(next), _) => Span {
                start: this.start(),
                end: next.start(),
            },
            (None, Some(prev)) => Span {
                start: entries[prev].value.end,
                end: this.value.end,
            },
            (None, None) => Span {
                start: this.start(),
                end: this.value.end,
            },
        };
        self.splice(cut, &[])
    }

    fn insert_at(&mut self, at: usize, parts: &[&[u8]]) -> Result<(), SubdocError> {
        self.splice(Span { start: at, end: at }, parts)
    }

    /// Replaces `span` with `parts`, refusing a result nested beyond the limit.
    fn splice(&mut self, span: Span, parts: &[&[u8]]) -> Result<(), SubdocError> {
        let added: usize = parts.iter().map(|p| p.len()).sum();
        let mut text = Vec::with_capacity(self.text.len() - (span.end - span.start) + added);
        text.extend_from_slice(&self.text[..span.start]);
        for p in parts {
            text.extend_from_slice(p);
        }
        text.extend_from_slice(&self.text[span.end..]);
        if scan::depth(&text) > crate::path::PATH_COMPONENTS_MAX {
            return Err(SubdocError::ValueEtoodeep);
        }
        debug_assert!(
            value::check_document(&text).is_ok(),
            "a mutation produced invalid JSON: {}",
            String::from_utf8_lossy(&text)
        );
        self.text = text;
        Ok(())
    }
}

/// `"key":value`.
fn member(key: &str, value: &[u8]) -> Vec<u8> {
    let mut out = serde_json::to_vec(key).expect("a string always serializes");
    out.push(b':');
    out.extend_from_slice(value);
    out
}

/// `[values]`.
fn wrap(values: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() + 2);
    out.push(b'[');
    out.extend_from_slice(values);
    out.push(b']');
    out
}

/// The integer a counter works on: a JSON number without fraction or exponent
/// (PathMismatch otherwise) that fits in i64 (NumErange otherwise).
fn integer(text: &[u8]) -> Result<i64, SubdocError> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(SubdocError::PathMismatch);
    }
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(SubdocError::NumErange)
}
