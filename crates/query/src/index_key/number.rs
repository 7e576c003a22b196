//! JSON numbers as exact binary magnitudes, and back (the number rows of the format).

use serde_json::Number;

use super::tag;

/// `e + EXP_BIAS` is stored; the smallest `e` (-1074, the least subnormal) stores as 1.
const EXP_BIAS: i32 = 1075;
const MIN_EXP: i32 = -1074;
const MAX_EXP: i32 = 1023;

/// The bytes after the tag of a nonzero number.
pub(super) const BODY_LEN: usize = 10;

/// A nonzero magnitude `1.frac × 2^exp`, `frac` the bits after the leading one,
/// left-aligned. Ordering (exp, frac) is ordering the magnitudes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Magnitude {
    exp: i32,
    frac: u64,
}

impl Magnitude {
    /// The magnitude `sig × 2^q`, for a nonzero `sig`.
    fn of(sig: u64, q: i32) -> Magnitude {
        let lz = sig.leading_zeros();
        Magnitude {
            exp: q + 63 - lz as i32,
            // Shifting the leading one out; by 64 (for sig = 1) leaves nothing.
            frac: sig.checked_shl(lz + 1).unwrap_or(0),
        }
    }

    fn body(self) -> [u8; BODY_LEN] {
        let mut out = [0; BODY_LEN];
        // exp is within MIN_EXP..=MAX_EXP for every JSON number, so this is 1..=2098.
        let biased = (self.exp + EXP_BIAS) as u16;
        out[..2].copy_from_slice(&biased.to_be_bytes());
        out[2..].copy_from_slice(&self.frac.to_be_bytes());
        out
    }
}

/// Appends the tag and body of a number.
pub(super) fn encode_number(n: &Number, out: &mut Vec<u8>) {
    let (negative, magnitude) = if let Some(u) = n.as_u64() {
        (false, (u != 0).then(|| Magnitude::of(u, 0)))
    } else if let Some(i) = n.as_i64() {
        // Not a u64, so negative.
        (true, Some(Magnitude::of(i.unsigned_abs(), 0)))
    } else {
        // serde_json holds only finite floats; the fallback is unreachable.
        float_magnitude(n.as_f64().unwrap_or(0.0))
    };
    match magnitude {
        None => out.push(tag::ZERO),
        Some(m) if negative => {
            out.push(tag::NEGATIVE);
            out.extend(m.body().iter().map(|b| !b));
        }
        Some(m) => {
            out.push(tag::POSITIVE);
            out.extend_from_slice(&m.body());
        }
    }
}

/// The sign and magnitude of a finite float; no magnitude for ±0.
fn float_magnitude(f: f64) -> (bool, Option<Magnitude>) {
    let bits = f.to_bits();
    let negative = bits >> 63 == 1;
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (sig, q) = if biased == 0 {
        (fraction, MIN_EXP) // subnormal: fraction × 2^-1074
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    (negative, (sig != 0).then(|| Magnitude::of(sig, q)))
}

/// The number a tag and body stand for, in canonical form, or None when the body is no
/// JSON number's (exponent out of range, or bits no i64, u64 or f64 holds).
pub(super) fn decode_number(negative: bool, body: &[u8; BODY_LEN]) -> Option<Number> {
    let mut plain = *body;
    if negative {
        plain.iter_mut().for_each(|b| *b = !*b);
    }
    let exp = i32::from(u16::from_be_bytes([plain[0], plain[1]])) - EXP_BIAS;
    let mut frac_bytes = [0; 8];
    frac_bytes.copy_from_slice(&plain[2..]);
    let frac = u64::from_be_bytes(frac_bytes);
    if !(MIN_EXP..=MAX_EXP).contains(&exp) {
        return None;
    }
    if let Some(n) = whole(negative, exp, frac) {
        return Some(n);
    }
    let magnitude = f64::from_bits(float_bits(exp, frac)?);
    Number::from_f64(if negative { -magnitude } else { magnitude })
}

/// A whole number that fits a u64 (positive) or an i64 (negative), as that integer.
fn whole(negative: bool, exp: i32, frac: u64) -> Option<Number> {
    if !(0..=63).contains(&exp) {
        return None;
    }
    let e = exp as u32;
    if frac.checked_shl(e).unwrap_or(0) != 0 {
        return None; // bits below the binary point
    }
    let magnitude = (1u64 << e) | frac.checked_shr(64 - e).unwrap_or(0);
    if !negative {
        return Some(magnitude.into());
    }
    match magnitude {
        m if m == 1 << 63 => Some(i64::MIN.into()),
        m => i64::try_from(m).ok().map(|m| (-m).into()),
    }
}

/// The f64 bits of `1.frac × 2^exp` if an f64 holds it exactly.
fn float_bits(exp: i32, frac: u64) -> Option<u64> {
    if exp >= -1022 {
        // Normal: 52 fraction bits; the 12 below them must be clear.
        return ((frac & 0xfff) == 0).then(|| (((exp + 1023) as u64) << 52) | (frac >> 12));
    }
    // Subnormal: the value is m × 2^-1074 with m = (2^64 + frac) >> shift.
    let shift = (-1010 - exp) as u32; // 13..=64 for exp in -1074..=-1023
    let full = (1u128 << 64) | u128::from(frac);
    let lost = full & ((1u128 << shift) - 1);
    (lost == 0).then_some((full >> shift) as u64)
}
