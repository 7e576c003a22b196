//! What every family's validation shares: the parts a request may or must carry (its
//! [`Shape`]), the document-key rule, and reading fixed-width fields out of extras.

use super::ValidateCtx;
use crate::frame::Frame;
use crate::status::Status;
use sluice_types::collection::QUALIFIED_KEY_BYTES_MAX;

/// Whether a request may or must carry a part (extras aside: their lengths are listed).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    None,
    Optional,
    Required,
}

/// The parts one opcode accepts: the extras lengths allowed, and whether a key and a value
/// may or must be there.
pub(super) struct Shape {
    pub extras: &'static [usize],
    pub key: Part,
    pub value: Part,
}

/// A document key and nothing else.
pub(super) const KEY_ONLY: Shape = Shape {
    extras: &[0],
    key: Part::Required,
    value: Part::None,
};

/// No extras, no key, no value.
pub(super) const EMPTY: Shape = Shape {
    extras: &[0],
    key: Part::None,
    value: Part::None,
};

/// Checks `frame` against `shape`: EINVAL for a part out of place, E2BIG for a value above
/// the session's limit.
pub(super) fn check(frame: &Frame<'_>, shape: Shape, ctx: &ValidateCtx) -> Result<(), Status> {
    if !shape.extras.contains(&frame.extras.len()) {
        return Err(Status::Einval);
    }
    match (shape.key, frame.key.len()) {
        (Part::None, n) if n > 0 => return Err(Status::Einval),
        (Part::Required, 0) => return Err(Status::Einval),
        _ => {}
    }
    match (shape.value, frame.value.len()) {
        (Part::None, n) if n > 0 => return Err(Status::Einval),
        (Part::Required, 0) => return Err(Status::Einval),
        _ => {}
    }
    if shape.value != Part::None && frame.value.len() > ctx.value_bytes_max {
        return Err(Status::E2big);
    }
    Ok(())
}

/// The frame's key as a document key: 1 to [`QUALIFIED_KEY_BYTES_MAX`] bytes. Whether it
/// is a logical key (at most 250 bytes) or one with a collection prefix depends on what the
/// session negotiated; the server checks that when it qualifies the key.
pub(super) fn doc_key<'a>(frame: &Frame<'a>) -> Result<&'a [u8], Status> {
    if frame.key.is_empty() || frame.key.len() > QUALIFIED_KEY_BYTES_MAX {
        return Err(Status::Einval);
    }
    Ok(frame.key)
}

/// The big-endian `u32` at `at` of extras whose length was validated for the opcode.
pub(super) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(array_at(b, at))
}

/// The big-endian `u16` at `at` of bytes whose length was validated for the opcode.
pub(super) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(array_at(b, at))
}

/// The byte at `at` of bytes whose length was validated for the opcode.
pub(super) fn byte(b: &[u8], at: usize) -> u8 {
    let [x] = array_at(b, at);
    x
}

/// The big-endian `u64` at `at` of extras whose length was validated for the opcode.
pub(super) fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(array_at(b, at))
}

fn array_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..)
        .and_then(|rest| rest.first_chunk::<N>())
        .copied()
        .expect("extras length validated before reading fields")
}
