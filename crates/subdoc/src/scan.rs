//! Finding values in a JSON text by byte position, without building a tree: what lets a
//! mutation splice new bytes in and keep every other byte of the document as it was.
//!
//! Every function here expects text that is already known to be valid JSON (see
//! [`crate::check_document`] and [`crate::value`]); on other input they return positions that
//! stay within the text but mean nothing. They never panic.

/// A byte range `start..end` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn of<'a>(&self, text: &'a [u8]) -> &'a [u8] {
        text.get(self.start..self.end).unwrap_or_default()
    }
}

/// One member of an object or element of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The member's key, quotes included (None for an array element).
    pub key: Option<Span>,
    pub value: Span,
}

impl Entry {
    /// Where the entry starts: its key, or its value for an array element.
    pub fn start(&self) -> usize {
        self.key.map_or(self.value.start, |k| k.start)
    }
}

/// What kind of value starts at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Literal,
}

pub fn kind(text: &[u8], at: usize) -> Kind {
    match text.get(at) {
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::Array,
        Some(b'"') => Kind::String,
        Some(b'-' | b'0'..=b'9') => Kind::Number,
        _ => Kind::Literal,
    }
}

pub fn skip_ws(text: &[u8], mut at: usize) -> usize {
    while matches!(text.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The span of the whole text's value, without surrounding whitespace.
pub fn root(text: &[u8]) -> Span {
    let start = skip_ws(text, 0);
    Span {
        start,
        end: value_end(text, start),
    }
}

/// The end (exclusive) of the value starting at `at`.
pub fn value_end(text: &[u8], at: usize) -> usize {
    match text.get(at) {
        Some(b'"') => string_end(text, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&b) = text.get(i) {
                match b {
                    b'"' => {
                        i = string_end(text, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            text.len()
        }
        Some(_) => {
            let mut i = at;
            while let Some(&b) = text.get(i) {
                if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            i
        }
        None => at,
    }
}

/// The end (exclusive, after the closing quote) of the string starting at `at`.
fn string_end(text: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while let Some(&b) = text.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// The members of the object, or the elements of the array, spanning `container`.
pub fn entries(text: &[u8], container: Span) -> Vec<Entry> {
    let object = kind(text, container.start) == Kind::Object;
    let mut out = Vec::new();
    let mut i = skip_ws(text, container.start + 1);
    while i < container.end.saturating_sub(1) {
        let key = if object {
            let k = Span {
                start: i,
                end: string_end(text, i),
            };
            // `"key"`, whitespace, `:`, whitespace.
            i = skip_ws(text, skip_ws(text, k.end) + 1);
            Some(k)
        } else {
            None
        };
        let value = Span {
            start: i,
            end: value_end(text, i),
        };
        out.push(Entry { key, value });
        i = skip_ws(text, value.end);
        if text.get(i) == Some(&b',') {
            i = skip_ws(text, i + 1);
        } else {
            break;
        }
    }
    out
}

/// Whether the key span (quotes included) spells `key` once JSON escapes are decoded.
pub fn key_is(text: &[u8], quoted: Span, key: &str) -> bool {
    let raw = quoted.of(text);
    let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or_default();
    if !inner.contains(&b'\\') {
        return inner == key.as_bytes();
    }
    serde_json::from_slice::<String>(raw).is_ok_and(|k| k == key)
}

/// How deeply the text nests (0 for a primitive, 1 for `[]` or `{}`), counting brackets
/// outside strings. Meaningful on any bytes, not only valid JSON.
pub fn depth(text: &[u8]) -> usize {
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while let Some(&b) = text.get(i) {
        match b {
            b'"' => {
                i = string_end(text, i);
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &[u8], es: &[Entry]) -> Vec<(Option<String>, String)> {
        es.iter()
            .map(|e| {
                (
                    e.key
                        .map(|k| String::from_utf8_lossy(k.of(text)).into_owned()),
                    String::from_utf8_lossy(e.value.of(text)).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn entries_of_objects_and_arrays() {
        let t = br#" { "a" : 1 , "b\"c":[1, {"x":"]"}] ,"d":"s,}" } "#;
        let r = root(t);
        assert_eq!(r.of(t).first(), Some(&b'{'));
        assert_eq!(r.of(t).last(), Some(&b'}'));
        let es = entries(t, r);
        assert_eq!(
            texts(t, &es),
            vec![
                (Some("\"a\"".into()), "1".into()),
                (Some("\"b\\\"c\"".into()), "[1, {\"x\":\"]\"}]".into()),
                (Some("\"d\"".into()), "\"s,}\"".into()),
            ]
        );
        assert!(key_is(t, es[1].key.unwrap(), "b\"c"));
        assert!(!key_is(t, es[1].key.unwrap(), "b\\\"c"));
        let arr = entries(t, es[1].value);
        assert_eq!(texts(t, &arr).len(), 2);
        assert!(entries(b"[ ]", root(b"[ ]")).is_empty());
        assert!(entries(b"{}", root(b"{}")).is_empty());
        assert_eq!(
            texts(
                b"[true,null , -1.5e3]",
                &entries(b"[true,null , -1.5e3]", root(b"[true,null , -1.5e3]"))
            ),
            vec![
                (None, "true".into()),
                (None, "null".into()),
                (None, "-1.5e3".into())
            ]
        );
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(depth(b"1"), 0);
        assert_eq!(depth(b"{}"), 1);
        assert_eq!(depth(br#"{"a":[{"b":"[[[["}]}"#), 3);
        assert_eq!(depth(br#"["\"[", [[]]]"#), 3);
    }
}
