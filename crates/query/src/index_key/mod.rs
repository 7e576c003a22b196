//! An order-preserving binary encoding of SQL++ values, for the keys of a secondary index
//! kept in a byte-ordered store: `encode(a).cmp(&encode(b)) == collate(a, b)` for any two
//! values, and values that collate Equal (`1`, `1.0`, `-0.0 = 0`) encode to the same bytes.
//! This is an on-disk format: changing any byte below means rebuilding every index.
//!
//! # Values
//!
//! Every value starts with a type tag; the tags are ordered as collation orders types.
//!
//! | tag    | value     | followed by                                                  |
//! |--------|-----------|--------------------------------------------------------------|
//! | `0x10` | MISSING   | nothing (only as a tuple element, never inside JSON)         |
//! | `0x20` | `null`    | nothing                                                      |
//! | `0x30` | `false`   | nothing                                                      |
//! | `0x31` | `true`    | nothing                                                      |
//! | `0x40` | number < 0| 10 bytes: exponent and fraction of the magnitude, all inverted|
//! | `0x41` | zero      | nothing (`0`, `0.0` and `-0.0` alike)                        |
//! | `0x42` | number > 0| 10 bytes: exponent and fraction of the magnitude             |
//! | `0x50` | string    | its UTF-8 bytes, escaped, then the terminator `00 01`        |
//! | `0x60` | array     | each element's encoding, then `0x00`                         |
//! | `0x70` | object    | field count (u32 big-endian), then per field in ascending    |
//! |        |           | name-byte order: the name escaped and terminated like a      |
//! |        |           | string (no tag), then the value's encoding                   |
//!
//! Numbers: a nonzero magnitude is `1.f × 2^e` exactly (every i64, u64 and finite f64 is).
//! The 10 bytes are `e + 1075` as a big-endian u16 (`e` spans -1074 for the smallest
//! subnormal to 1023 for `f64::MAX`, so 1..=2098), then the bits of `f` after the leading
//! one, left-aligned in a big-endian u64 (u64s need 63 of them, floats 52). For magnitudes,
//! (exponent, fraction) order is numeric order; negative numbers invert all 10 bytes so a
//! larger magnitude sorts first. The value alone decides the bytes, never its JSON form,
//! which is why equal numbers encode alike; decoding gives the canonical form: a whole
//! number that fits a u64 (positive) or an i64 (negative) as that integer, else the f64.
//!
//! Escaping (strings, object names): `0x00` becomes `00 FF`; the terminator is `00 01`.
//! A terminator sorts below any continuation (`00 FF` or a byte ≥ `01`), so a string sorts
//! before its extensions, as collation wants.
//!
//! Arrays end with `0x00`, below every tag: a shorter array sorts before its extensions.
//! Object fields are counted up front because collation puts fewer fields first; with the
//! count equal, names and values compare pairwise in name order, as collation does.
//!
//! # Index entries
//!
//! `encode_key(values, doc_key)` is the values' encodings, the marker `0x01`, then the
//! document key's raw bytes to the end (it is last, so it needs no escaping). Every
//! encoding is self-delimiting and prefix-free, so entries order by the tuple element by
//! element, then by document key bytes, and the entries whose tuple starts with some values
//! are one contiguous range. What follows a tuple element is the next element's tag or the
//! marker `0x01`, never `0xFF`, so appending `0xFF` to an encoded prefix gives a bound just
//! past every entry that starts with it; see [`range`].
//!
//! Limits: values nest at most [`MAX_DEPTH`] arrays/objects deep and an entry is at most
//! [`MAX_KEY_BYTES`] long; encoding refuses more and decoding refuses it too, so anything
//! `encode_key` produces decodes. Decoding accepts only canonical bytes (sorted unique
//! names, exact numbers in their one encoding), so whatever decodes re-encodes identically.

mod decode;
mod encode;
mod number;
pub mod range;

#[cfg(test)]
mod gen;
#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

pub use decode::{decode_key, decode_value};
pub use encode::{encode_key, encode_value, encode_values};
pub use range::{
    lower_bound, lower_bound_after, prefix_range, type_range, type_range_after, upper_bound,
    upper_bound_after,
};

/// How many arrays/objects may nest in one value: what serde_json's parser accepts (its
/// recursion limit is 128) fits.
pub const MAX_DEPTH: usize = 128;

/// The longest index entry, values and document key together (what a u16 length holds,
/// as the store's keys are limited to).
pub const MAX_KEY_BYTES: usize = u16::MAX as usize;

pub(crate) mod tag {
    /// Ends an array's elements.
    pub const ARRAY_END: u8 = 0x00;
    /// Ends an entry's values; the document key follows.
    pub const DOC_KEY: u8 = 0x01;
    pub const MISSING: u8 = 0x10;
    pub const NULL: u8 = 0x20;
    pub const FALSE: u8 = 0x30;
    pub const TRUE: u8 = 0x31;
    pub const NEGATIVE: u8 = 0x40;
    pub const ZERO: u8 = 0x41;
    pub const POSITIVE: u8 = 0x42;
    pub const STRING: u8 = 0x50;
    pub const ARRAY: u8 = 0x60;
    pub const OBJECT: u8 = 0x70;
    /// Never follows a complete value: appended to a prefix, it bounds its entries above.
    pub const AFTER: u8 = 0xFF;

    /// Inside escaped bytes: `00 FF` is a 0x00 byte, `00 01` the end.
    pub const ESCAPE: u8 = 0x00;
    pub const ESCAPED_ZERO: u8 = 0xFF;
    pub const TERMINATOR: u8 = 0x01;
}

/// Why bytes are not an index key, or a value cannot become one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexKeyError {
    #[error("index key of {len} bytes is over the limit of {max}", max = MAX_KEY_BYTES)]
    TooLong { len: usize },
    #[error("value nests arrays/objects deeper than {max}", max = MAX_DEPTH)]
    TooDeep,
    #[error("index key ends inside a value at byte {at}")]
    Truncated { at: usize },
    #[error("byte {at}: {tag:#04x} does not start a value here")]
    BadTag { tag: u8, at: usize },
    #[error("byte {at}: 0x00 followed by {byte:#04x}, neither an escaped zero nor the end")]
    BadEscape { byte: u8, at: usize },
    #[error("string or name ending at byte {at} is not UTF-8")]
    NotUtf8 { at: usize },
    #[error("number at byte {at} is not the encoding of a JSON number")]
    BadNumber { at: usize },
    #[error("object name at byte {at} is not after the previous one")]
    UnsortedNames { at: usize },
    #[error("{extra} bytes follow the value")]
    TrailingBytes { extra: usize },
}
