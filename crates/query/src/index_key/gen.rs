//! A seeded generator of JSON values for the property tests: no dependency, deterministic.
//! It favours collisions and near-collisions (small pools of numbers, strings and names,
//! equal numbers in other JSON forms), because that is where an encoding goes wrong.

use serde_json::{Map, Number, Value as J};

/// xorshift64: tiny, fast, good enough to pick test cases.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(super) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

const TWO_53: i64 = 1 << 53;

const SPECIAL_INTS: [i64; 10] = [
    i64::MIN,
    i64::MIN + 1,
    -TWO_53 - 1,
    -TWO_53,
    -1,
    0,
    TWO_53,
    TWO_53 + 1,
    i64::MAX - 1,
    i64::MAX,
];

const SPECIAL_UINTS: [u64; 5] = [1 << 63, (1 << 63) + 1, u64::MAX - 1, u64::MAX, 1 << 53];

const SPECIAL_FLOATS: [f64; 18] = [
    0.0,
    -0.0,
    0.5,
    -0.5,
    0.1,
    1.5,
    5e-324,
    -5e-324,
    f64::MIN_POSITIVE,
    1e-310,
    9_007_199_254_740_992.0,
    -9_223_372_036_854_775_808.0,
    9_223_372_036_854_775_808.0,
    18_446_744_073_709_551_616.0,
    1e19,
    -1e19,
    f64::MAX,
    f64::MIN,
];

fn float(f: f64) -> J {
    // Non-finite floats are no JSON; the caller's fallback keeps the draw going.
    Number::from_f64(f).map_or(J::Null, J::Number)
}

pub(super) fn number(rng: &mut Rng) -> J {
    match rng.below(9) {
        0 => J::from(rng.below(7) as i64 - 3),
        1 => float(rng.below(7) as f64 - 3.0),
        2 => J::from(rng.pick(&SPECIAL_INTS)),
        3 => J::from(rng.pick(&SPECIAL_UINTS)),
        4 => float(rng.pick(&SPECIAL_FLOATS)),
        5 => {
            // A neighbour of a special float, one or two ulps away.
            let bits = rng.pick(&SPECIAL_FLOATS).to_bits();
            let step = rng.below(2) as u64 + 1;
            let f = if rng.below(2) == 0 {
                f64::from_bits(bits.wrapping_add(step))
            } else {
                f64::from_bits(bits.wrapping_sub(step))
            };
            if f.is_finite() {
                float(f)
            } else {
                float(0.25)
            }
        }
        6 => {
            // Integers of every magnitude, as an i64, a u64 or (rounded) a float.
            let shift = rng.below(64) as u32;
            let raw = rng.next() >> shift;
            match rng.below(3) {
                0 => J::from(raw as i64),
                1 => J::from(raw),
                _ => float(raw as i64 as f64),
            }
        }
        7 => {
            let f = f64::from_bits(rng.next());
            if f.is_finite() {
                float(f)
            } else {
                float(-0.75)
            }
        }
        _ => {
            // Short binary fractions, positive and negative.
            let numerator = rng.below(65) as f64 - 32.0;
            float(numerator / f64::from(1u32 << rng.below(8)))
        }
    }
}

const CHARS: [char; 11] = [
    '\u{0}',
    '\u{1}',
    'a',
    'b',
    'A',
    '\u{7f}',
    'é',
    'ÿ',
    '\u{ffff}',
    '😀',
    '\u{10ffff}',
];

pub(super) fn string(rng: &mut Rng) -> String {
    let len = rng.below(5);
    (0..len).map(|_| rng.pick(&CHARS)).collect()
}

const NAMES: [&str; 6] = ["", "a", "b", "a\u{0}", "ab", "é"];

/// A value, nesting at most `depth` more arrays/objects.
pub(super) fn value(rng: &mut Rng, depth: usize) -> J {
    let kinds = if depth == 0 { 6 } else { 9 };
    match rng.below(kinds) {
        0 => J::Null,
        1 => J::Bool(rng.below(2) == 0),
        2 | 3 => number(rng),
        4 | 5 => J::String(string(rng)),
        6 | 7 => J::Array((0..rng.below(4)).map(|_| value(rng, depth - 1)).collect()),
        _ => {
            let mut fields = Map::new();
            for _ in 0..rng.below(4) {
                fields.insert(rng.pick(&NAMES).to_string(), value(rng, depth - 1));
            }
            J::Object(fields)
        }
    }
}

/// Byte strings for document keys, with the bytes the escaping cares about.
pub(super) fn doc_key(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(5);
    (0..len)
        .map(|_| rng.pick(&[0x00, 0x01, 0x7f, 0xff, b'a']))
        .collect()
}

/// The same value in other JSON forms where one exists: whole numbers as floats or
/// integers, zero as -0.0. Collation calls it equal, so must the encoding.
pub(super) fn twin(j: &J) -> J {
    match j {
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                let f = i as f64;
                // Only when the float is exactly the integer.
                if f as i128 == i128::from(i) && f < 9.3e18 {
                    return if i == 0 { float(-0.0) } else { float(f) };
                }
            } else if let Some(u) = n.as_u64() {
                let f = u as f64;
                if f < 1.8e19 && f as u64 == u {
                    return float(f);
                }
            } else if let Some(f) = n.as_f64() {
                if f == 0.0 {
                    return J::from(0);
                }
                if f.fract() == 0.0 && f.abs() < 9e18 {
                    return J::from(f as i64);
                }
            }
            j.clone()
        }
        J::Array(items) => J::Array(items.iter().map(twin).collect()),
        J::Object(fields) => J::Object(fields.iter().map(|(k, v)| (k.clone(), twin(v))).collect()),
        _ => j.clone(),
    }
}

/// The form decoding gives: whole numbers that fit a u64 (positive) or an i64 (negative)
/// as integers, everything else as it was.
pub(super) fn canonical(j: &J) -> J {
    match j {
        J::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f == 0.0 {
                J::from(0u64)
            } else if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                J::from(f as u64)
            } else if f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..0.0).contains(&f) {
                J::from(f as i64)
            } else {
                j.clone()
            }
        }
        J::Array(items) => J::Array(items.iter().map(canonical).collect()),
        J::Object(fields) => J::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), canonical(v)))
                .collect(),
        ),
        _ => j.clone(),
    }
}
