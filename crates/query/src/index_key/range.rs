//! Byte ranges of index entries, for a planner turning predicates into scans.
//!
//! Every range here is half-open, `start <= key < end`, on the entry bytes
//! [`super::encode_key`] writes (document key included), so it can be handed to a
//! byte-ordered store's range scan as is. Starts come from [`lower_bound`]/[`prefix_range`]/
//! [`type_range`], ends from [`upper_bound`]/[`prefix_range`]/[`type_range`]; intersecting
//! two ranges is taking the larger start and the smaller end.
//!
//! Why the bounds are right: encodings are prefix-free and equal values encode alike, so
//! the entries whose first element collates equal to `v` are exactly those starting with
//! `encode(v)`, and the byte after it is a tag, `0x00` or `0x01`, never `0xFF`. Hence
//! `encode(v)` is at or below all of them, `encode(v) ++ [0xFF]` above all of them, and any
//! entry whose first element differs from `v` lies on the same side of both.
//!
//! Comparisons here collate across types, as this crate's evaluator does (`"x" > 5` is
//! TRUE: strings sort after numbers), so `a > 5` is `lower_bound(5, false)` to the end of
//! the index, not to the end of the numbers; [`type_range`] is for predicates that do name
//! a type (`IS NULL`, `IS NOT NULL`).

use super::encode::{encode_value, encode_values};
use super::{tag, IndexKeyError};
use crate::value::{Type, Value};

/// The entries whose leading elements collate equal to `prefix`, element by element.
/// An empty prefix gives every entry.
pub fn prefix_range(prefix: &[Value]) -> Result<(Vec<u8>, Vec<u8>), IndexKeyError> {
    let start = encode_values(prefix)?;
    let mut end = start.clone();
    end.push(tag::AFTER);
    Ok((start, end))
}

/// A range start: entries whose first element is `>= v` (inclusive) or `> v`, by
/// collation (so across types, too; see [`type_range`]).
pub fn lower_bound(v: &Value, inclusive: bool) -> Result<Vec<u8>, IndexKeyError> {
    lower_bound_after(&[], v, inclusive)
}

/// A range end: entries whose first element is `<= v` (inclusive) or `< v`.
pub fn upper_bound(v: &Value, inclusive: bool) -> Result<Vec<u8>, IndexKeyError> {
    upper_bound_after(&[], v, inclusive)
}

/// [`lower_bound`] for the element after `prefix`, among the entries of
/// `prefix_range(prefix)` (as for `a = 1 AND b > 2` on an index on `(a, b)`).
pub fn lower_bound_after(
    prefix: &[Value],
    v: &Value,
    inclusive: bool,
) -> Result<Vec<u8>, IndexKeyError> {
    bound(prefix, v, !inclusive)
}

/// [`upper_bound`] for the element after `prefix`.
pub fn upper_bound_after(
    prefix: &[Value],
    v: &Value,
    inclusive: bool,
) -> Result<Vec<u8>, IndexKeyError> {
    bound(prefix, v, inclusive)
}

/// `encode(prefix ++ [v])`, followed by `0xFF` to step past the entries that start with it.
fn bound(prefix: &[Value], v: &Value, past_equal: bool) -> Result<Vec<u8>, IndexKeyError> {
    let mut out = encode_values(prefix)?;
    encode_value(v, &mut out)?;
    if past_equal {
        out.push(tag::AFTER);
    }
    Ok(out)
}

/// The entries whose first element has type `t` ("all numbers", "all strings", …).
pub fn type_range(t: Type) -> (Vec<u8>, Vec<u8>) {
    let (first, last) = tags(t);
    (vec![first], vec![last + 1])
}

/// [`type_range`] for the element after `prefix`.
pub fn type_range_after(prefix: &[Value], t: Type) -> Result<(Vec<u8>, Vec<u8>), IndexKeyError> {
    let mut start = encode_values(prefix)?;
    let mut end = start.clone();
    let (first, last) = tags(t);
    start.push(first);
    end.push(last + 1);
    Ok((start, end))
}

/// The first and last tag a type's values start with; the next tag is free (none is 0xFF).
fn tags(t: Type) -> (u8, u8) {
    match t {
        Type::Missing => (tag::MISSING, tag::MISSING),
        Type::Null => (tag::NULL, tag::NULL),
        Type::Boolean => (tag::FALSE, tag::TRUE),
        Type::Number => (tag::NEGATIVE, tag::POSITIVE),
        Type::String => (tag::STRING, tag::STRING),
        Type::Array => (tag::ARRAY, tag::ARRAY),
        Type::Object => (tag::OBJECT, tag::OBJECT),
    }
}
