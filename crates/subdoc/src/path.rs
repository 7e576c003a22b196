//! The sub-document path syntax.
//!
//! A path is a sequence of components: dictionary keys separated by `.`, and array indexes in
//! brackets after a key, after another index, or at the start. The empty path names the whole
//! document.
//!
//! | path | components |
//! |---|---|
//! | `` (empty) | the root |
//! | `a.b` | key `a`, key `b` |
//! | `a[0][-1]` | key `a`, index 0, the last element |
//! | `[2].x` | index 2 (of a root array), key `x` |
//! | `` `a.b`.c `` | key `a.b`, key `c` (backticks quote a key; two backticks are one) |
//!
//! Rules (each failure is [`SubdocError::PathEinval`] unless said otherwise):
//! - a key is not empty; outside backticks it holds no `.`, `[`, `]` or `` ` ``;
//! - an index is decimal digits, or exactly `-1` (the last element); nothing else negative;
//! - at most [`PATH_BYTES_MAX`] bytes and [`PATH_COMPONENTS_MAX`] components
//!   ([`SubdocError::PathE2big`]);
//! - the path is UTF-8.

use crate::SubdocError;

/// The longest path, in bytes (Couchbase's limit).
pub const PATH_BYTES_MAX: usize = 1024;
/// The most components a path may have; also the deepest a document may nest.
pub const PATH_COMPONENTS_MAX: usize = 32;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Component {
    /// A dictionary key, unquoted (backticks removed, doubled backticks made single).
    Key(String),
    /// An array index; `Last` is `[-1]`.
    Index(Index),
}

/// An array position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    At(usize),
    Last,
}

/// A parsed path: the components in order; empty for the root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path {
    components: Vec<Component>,
}

impl Path {
    /// Parses `raw` under the rules in the module comment.
    pub fn parse(raw: &[u8]) -> Result<Path, SubdocError> {
        if raw.len() > PATH_BYTES_MAX {
            return Err(SubdocError::PathE2big);
        }
        let text = std::str::from_utf8(raw).map_err(|_| SubdocError::PathEinval)?;
        let mut components = Vec::new();
        let mut rest = text;
        // After a component, what may follow: `.`, `[`, or the end. At the start, a key or
        // `[`. The empty path is the root.
        let mut first = true;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('[') {
                let close = after.find(']').ok_or(SubdocError::PathEinval)?;
                components.push(Component::Index(parse_index(&after[..close])?));
                rest = &after[close + 1..];
            } else {
                if !first {
                    rest = rest.strip_prefix('.').ok_or(SubdocError::PathEinval)?;
                }
                let (key, after) = parse_key(rest)?;
                components.push(Component::Key(key));
                rest = after;
            }
            first = false;
            if components.len() > PATH_COMPONENTS_MAX {
                return Err(SubdocError::PathE2big);
            }
        }
        Ok(Path { components })
    }

    /// A path of the given components (for callers that build paths, and tests).
    pub fn of(components: Vec<Component>) -> Path {
        Path { components }
    }

    pub fn components(&self) -> &[Component] {
        &self.components
    }

    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The last component, or None for the root.
    pub fn last(&self) -> Option<&Component> {
        self.components.last()
    }

    /// The path without its last component (the root's parent is the root).
    pub fn parent(&self) -> Path {
        let n = self.components.len().saturating_sub(1);
        Path {
            components: self.components[..n].to_vec(),
        }
    }
}

/// The path in the syntax above: parsing it again gives the same path. Keys that could be
/// read otherwise are quoted in backticks.
impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, c) in self.components.iter().enumerate() {
            match c {
                Component::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if k.contains(['.', '[', ']', '`']) {
                        write!(f, "`{}`", k.replace('`', "``"))?;
                    } else {
                        f.write_str(k)?;
                    }
                }
                Component::Index(Index::At(n)) => write!(f, "[{n}]")?,
                Component::Index(Index::Last) => f.write_str("[-1]")?,
            }
        }
        Ok(())
    }
}

/// An index between the brackets: digits, or `-1`.
fn parse_index(s: &str) -> Result<Index, SubdocError> {
    if s == "-1" {
        return Ok(Index::Last);
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SubdocError::PathEinval);
    }
    s.parse::<usize>()
        .map(Index::At)
        .map_err(|_| SubdocError::PathEinval)
}

/// A key at the start of `s` (quoted or not); returns it and what follows.
fn parse_key(s: &str) -> Result<(String, &str), SubdocError> {
    if let Some(quoted) = s.strip_prefix('`') {
        let mut key = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '`' {
                key.push(c);
                continue;
            }
            // A doubled backtick is a literal one; a single one closes the quote.
            if quoted[i + 1..].starts_with('`') {
                key.push('`');
                chars.next();
                continue;
            }
            if key.is_empty() {
                return Err(SubdocError::PathEinval);
            }
            return Ok((key, &quoted[i + 1..]));
        }
        return Err(SubdocError::PathEinval); // unterminated quote
    }
    let end = s.find(['.', '[']).unwrap_or(s.len());
    let key = &s[..end];
    if key.is_empty() || key.contains([']', '`']) {
        return Err(SubdocError::PathEinval);
    }
    Ok((key.to_string(), &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Component {
        Component::Key(s.to_string())
    }
    fn i(n: usize) -> Component {
        Component::Index(Index::At(n))
    }
    const LAST: Component = Component::Index(Index::Last);

    #[test]
    fn the_syntax_table() {
        let ok: &[(&str, Vec<Component>)] = &[
            ("", vec![]),
            ("a", vec![k("a")]),
            ("a.b", vec![k("a"), k("b")]),
            ("a[0]", vec![k("a"), i(0)]),
            ("a[0][-1]", vec![k("a"), i(0), LAST]),
            ("[2].x", vec![i(2), k("x")]),
            ("[0][1]", vec![i(0), i(1)]),
            ("`a.b`.c", vec![k("a.b"), k("c")]),
            ("`a``b`", vec![k("a`b")]),
            ("`[x]`[3]", vec![k("[x]"), i(3)]),
            ("a.`b`", vec![k("a"), k("b")]),
            ("héllo.wörld", vec![k("héllo"), k("wörld")]),
            ("a b", vec![k("a b")]),
            ("a[007]", vec![k("a"), i(7)]),
        ];
        for (raw, want) in ok {
            assert_eq!(
                Path::parse(raw.as_bytes()),
                Ok(Path::of(want.clone())),
                "{raw:?}"
            );
        }
        let bad: &[(&[u8], SubdocError)] = &[
            (b".a", SubdocError::PathEinval),
            (b"a.", SubdocError::PathEinval),
            (b"a..b", SubdocError::PathEinval),
            (b"a[", SubdocError::PathEinval),
            (b"a[]", SubdocError::PathEinval),
            (b"a[x]", SubdocError::PathEinval),
            (b"a[-2]", SubdocError::PathEinval),
            (b"a[1]b", SubdocError::PathEinval),
            (b"a]", SubdocError::PathEinval),
            (b"`a", SubdocError::PathEinval),
            (b"``", SubdocError::PathEinval),
            (b"a`b", SubdocError::PathEinval),
            (b"a[99999999999999999999999]", SubdocError::PathEinval),
            (b"\xff", SubdocError::PathEinval),
        ];
        for (raw, want) in bad {
            assert_eq!(
                Path::parse(raw),
                Err(*want),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn display_parses_back() {
        for raw in [
            "",
            "a",
            "a.b[0][-1]",
            "[2].x",
            "`a.b`.c",
            "`a``b`",
            "`[x]`[3]",
            "a b",
        ] {
            let p = Path::parse(raw.as_bytes()).unwrap();
            assert_eq!(
                Path::parse(p.to_string().as_bytes()),
                Ok(p.clone()),
                "{raw:?}"
            );
        }
        assert_eq!(Path::of(vec![k("a.b"), k("c`")]).to_string(), "`a.b`.`c```");
    }

    #[test]
    fn limits() {
        let deep = vec!["a"; PATH_COMPONENTS_MAX].join(".");
        assert_eq!(
            Path::parse(deep.as_bytes()).map(|p| p.components().len()),
            Ok(32)
        );
        let deeper = vec!["a"; PATH_COMPONENTS_MAX + 1].join(".");
        assert_eq!(Path::parse(deeper.as_bytes()), Err(SubdocError::PathE2big));
        let long = "x".repeat(PATH_BYTES_MAX);
        assert!(Path::parse(long.as_bytes()).is_ok());
        let longer = "x".repeat(PATH_BYTES_MAX + 1);
        assert_eq!(Path::parse(longer.as_bytes()), Err(SubdocError::PathE2big));
    }

    #[test]
    fn parent_and_last() {
        let p = Path::parse(b"a.b[1]").unwrap();
        assert_eq!(p.last(), Some(&i(1)));
        assert_eq!(p.parent(), Path::of(vec![k("a"), k("b")]));
        assert_eq!(Path::default().parent(), Path::default());
    }
}
