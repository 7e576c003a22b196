//! Table tests: type order, tricky numbers, the exact bytes (the format is on disk), and
//! the decoder's refusals.

use serde_json::{json, Value as J};

use super::*;
use crate::collate::collate;
use crate::value::Value;

fn enc(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    out
}

fn j(j: J) -> Value {
    Value::Json(j)
}

fn float(f: f64) -> Value {
    j(J::Number(
        serde_json::Number::from_f64(f).unwrap_or_else(|| panic!("{f}")),
    ))
}

/// Groups in ascending order; the members of a group collate (and must encode) equal.
fn assert_groups(groups: &[Vec<Value>]) {
    for (gi, ga) in groups.iter().enumerate() {
        for (gj, gb) in groups.iter().enumerate() {
            for a in ga {
                for b in gb {
                    assert_eq!(collate(a, b), gi.cmp(&gj), "collate {a:?} vs {b:?}");
                    assert_eq!(enc(a).cmp(&enc(b)), gi.cmp(&gj), "bytes {a:?} vs {b:?}");
                }
            }
        }
    }
}

#[test]
fn types_order_as_collation() {
    let groups = [
        vec![Value::Missing],
        vec![j(json!(null))],
        vec![j(json!(false))],
        vec![j(json!(true))],
        vec![j(json!(-1))],
        vec![j(json!(0))],
        vec![j(json!(1e300))],
        vec![j(json!(""))],
        vec![j(json!("\u{0}"))],
        vec![j(json!("\u{0}\u{0}"))],
        vec![j(json!("\u{0}a"))],
        vec![j(json!("B"))],
        vec![j(json!("a"))],
        vec![j(json!("a\u{0}"))],
        vec![j(json!("ab"))],
        vec![j(json!("é"))],
        vec![j(json!("\u{ffff}"))],
        vec![j(json!("😀"))],
        vec![j(json!([]))],
        vec![j(json!([null]))],
        vec![j(json!([1]))],
        vec![j(json!([1, null]))],
        vec![j(json!([1, 2])), j(json!([1.0, 2.0]))],
        vec![j(json!([2]))],
        vec![j(json!(["a"]))],
        vec![j(json!([[]]))],
        vec![j(json!([{}]))],
        vec![j(json!({}))],
        vec![j(json!({"b": 1}))],
        vec![j(json!({"b\u{0}": 0}))],
        vec![j(json!({"c": null}))],
        vec![j(json!({"a": 1, "b": 2}))],
        vec![j(json!({"a": 1, "b": 3})), j(json!({"b": 3.0, "a": 1.0}))],
        vec![j(json!({"a": 1, "c": 0}))],
        vec![j(json!({"a": 2, "b": 0}))],
        vec![j(json!({"a": 1, "b": 2, "c": 3}))],
    ];
    assert_groups(&groups);
}

#[test]
fn numbers_order_by_exact_value() {
    let two_53: i64 = 1 << 53;
    let groups = vec![
        vec![float(f64::MIN)],
        vec![float(-1e300)],
        vec![float(-18_446_744_073_709_551_616.0)],
        vec![float(-9_223_372_036_854_777_856.0)], // the float just below -2^63
        vec![j(json!(i64::MIN)), float(-9_223_372_036_854_775_808.0)],
        vec![j(json!(i64::MIN + 1))],
        vec![j(json!(-two_53 - 1))],
        vec![j(json!(-two_53)), float(-two_53 as f64)],
        vec![float(-1.5)],
        vec![j(json!(-1)), float(-1.0)],
        vec![float(-f64::MIN_POSITIVE)],
        vec![float(-5e-324)],
        vec![j(json!(0)), j(json!(0u64)), float(0.0), float(-0.0)],
        vec![float(5e-324)],
        vec![float(1e-310)],
        vec![float(f64::MIN_POSITIVE)],
        vec![float(0.1)],
        vec![float(0.5)],
        vec![j(json!(1)), float(1.0)],
        vec![float(1.000_000_000_000_000_2)],
        vec![float(1.5)],
        vec![j(json!(two_53)), float(two_53 as f64)],
        vec![j(json!(two_53 + 1))],
        vec![j(json!(two_53 + 2)), float((two_53 + 2) as f64)],
        vec![j(json!(i64::MAX - 1))],
        vec![j(json!(i64::MAX))],
        vec![j(json!(1u64 << 63)), float(9_223_372_036_854_775_808.0)],
        vec![j(json!((1u64 << 63) + 1))],
        vec![j(json!(u64::MAX - 1))],
        vec![j(json!(u64::MAX))],
        vec![float(18_446_744_073_709_551_616.0)],
        vec![float(1e300)],
        vec![float(f64::MAX)],
    ];
    assert_groups(&groups);
}

#[test]
fn bytes_are_the_documented_format() {
    let zeros = [0u8; 8];
    let one = [&[0x42, 0x04, 0x33][..], &zeros].concat(); // e = 0, biased 1075 = 0x0433
    assert_eq!(enc(&j(json!(1))), one);
    assert_eq!(
        enc(&j(json!(-1))),
        [&[0x40, 0xfb, 0xcc][..], &[0xff; 8]].concat()
    );
    // 3 = 1.1b × 2^1: biased 1076, fraction 0b1 then zeros.
    let three = [&[0x42, 0x04, 0x34, 0x80][..], &[0; 7]].concat();
    assert_eq!(enc(&j(json!(3))), three);
    assert_eq!(enc(&float(-0.0)), [0x41]);
    let tiny = [&[0x42, 0x00, 0x01][..], &zeros].concat(); // 2^-1074
    assert_eq!(enc(&float(5e-324)), tiny);
    assert_eq!(enc(&Value::Missing), [0x10]);
    assert_eq!(enc(&j(json!(null))), [0x20]);
    assert_eq!(enc(&j(json!([false, true]))), [0x60, 0x30, 0x31, 0x00]);
    assert_eq!(
        enc(&j(json!("a\u{0}b"))),
        [0x50, b'a', 0x00, 0xff, b'b', 0x00, 0x01]
    );
    assert_eq!(
        enc(&j(json!({"k": null}))),
        [0x70, 0, 0, 0, 1, b'k', 0x00, 0x01, 0x20]
    );
    assert_eq!(
        encode_key(&[j(json!(true)), Value::Missing], b"doc\x00\xff"),
        Ok(vec![0x31, 0x10, 0x01, b'd', b'o', b'c', 0x00, 0xff])
    );
    assert_eq!(encode_key(&[], b""), Ok(vec![0x01]));
}

#[test]
fn decoding_gives_canonical_numbers() {
    let cases = [
        (float(3.0), json!(3)),
        (float(-0.0), json!(0)),
        (float(-9_223_372_036_854_775_808.0), json!(i64::MIN)),
        (float(9_223_372_036_854_775_808.0), json!(1u64 << 63)),
        (float(1e19), json!(10_000_000_000_000_000_000u64)),
        (float(-1e19), json!(-1e19)),
        (float(1e20), json!(1e20)),
        (float(2.5), json!(2.5)),
    ];
    for (v, want) in cases {
        assert_eq!(decode_value(&enc(&v)), Ok(j(want)), "{v:?}");
    }
}

#[test]
fn decoder_refuses_malformed_bytes() {
    use IndexKeyError as E;
    let one = enc(&j(json!(1)));
    let refused: Vec<(Vec<u8>, IndexKeyError)> = vec![
        (vec![], E::Truncated { at: 0 }),
        (vec![0x20], E::Truncated { at: 1 }), // no document key marker
        (vec![0x02, 0x01], E::BadTag { tag: 0x02, at: 0 }),
        (vec![0xff, 0x01], E::BadTag { tag: 0xff, at: 0 }),
        (vec![0x60, 0x10, 0x00, 0x01], E::BadTag { tag: 0x10, at: 1 }),
        (vec![0x00, 0x01], E::BadTag { tag: 0x00, at: 0 }),
        (one[..5].to_vec(), E::Truncated { at: 5 }),
        (
            vec![0x50, b'a', 0x00, 0x02, 0x01],
            E::BadEscape { byte: 2, at: 3 },
        ),
        (vec![0x50, 0xc3, 0x00, 0x01, 0x01], E::NotUtf8 { at: 4 }),
        (vec![0x50, b'a', 0x00], E::Truncated { at: 3 }),
        (vec![0x60, 0x20], E::Truncated { at: 2 }),
        (
            vec![0x70, 0xff, 0xff, 0xff, 0xff, 0x01],
            E::Truncated { at: 6 },
        ),
        (vec![0x70, 0, 0, 0], E::Truncated { at: 4 }),
        (
            vec![0x70, 0, 0, 0, 2, b'b', 0, 1, 0x20, b'a', 0, 1, 0x20, 0x01],
            E::UnsortedNames { at: 9 },
        ),
        (
            vec![0x70, 0, 0, 0, 2, b'a', 0, 1, 0x20, b'a', 0, 1, 0x20, 0x01],
            E::UnsortedNames { at: 9 },
        ),
        // Exponent 0 (below the smallest subnormal) and 2099 (beyond f64::MAX).
        (
            [&[0x42, 0, 0][..], &[0; 8], &[0x01]].concat(),
            E::BadNumber { at: 0 },
        ),
        (
            [&[0x42, 0x08, 0x33][..], &[0; 8], &[0x01]].concat(),
            E::BadNumber { at: 0 },
        ),
        // 1 + 2^-64: more bits than any u64 or f64 holds.
        (
            [&[0x42, 0x04, 0x33][..], &[0, 0, 0, 0, 0, 0, 0, 1], &[0x01]].concat(),
            E::BadNumber { at: 0 },
        ),
        // 1.5 × 2^-1074: a subnormal with a bit below 2^-1074.
        (
            [&[0x42, 0x00, 0x01, 0x80][..], &[0; 7], &[0x01]].concat(),
            E::BadNumber { at: 0 },
        ),
    ];
    for (bytes, want) in refused {
        assert_eq!(decode_key(&bytes), Err(want), "{bytes:02x?}");
    }
    assert_eq!(
        decode_value(&[0x20, 0x20]),
        Err(E::TrailingBytes { extra: 1 })
    );
    let long = vec![0x01; MAX_KEY_BYTES + 1];
    assert_eq!(
        decode_key(&long),
        Err(E::TooLong {
            len: MAX_KEY_BYTES + 1
        })
    );
}

fn nested(depth: usize) -> J {
    (0..depth).fold(json!(1), |inner, _| J::Array(vec![inner]))
}

#[test]
fn depth_is_bounded_both_ways() {
    let deepest = j(nested(MAX_DEPTH));
    let bytes = enc(&deepest);
    assert_eq!(decode_value(&bytes), Ok(deepest));

    let mut out = vec![0xaa];
    assert_eq!(
        encode_value(&j(nested(MAX_DEPTH + 1)), &mut out),
        Err(IndexKeyError::TooDeep)
    );
    assert_eq!(out, [0xaa], "nothing appended on error");
    let deep_object = (0..=MAX_DEPTH).fold(json!(1), |inner, _| json!({ "a": inner }));
    assert_eq!(
        encode_value(&j(deep_object), &mut out),
        Err(IndexKeyError::TooDeep)
    );

    // The same depth by hand (the encoder will not write it), and far deeper.
    for depth in [MAX_DEPTH + 1, 30_000] {
        let bytes = [vec![0x60; depth], vec![0x20], vec![0x00; depth], vec![0x01]].concat();
        assert_eq!(decode_key(&bytes), Err(IndexKeyError::TooDeep));
    }
}

#[test]
fn oversized_entries_are_refused() {
    let big = j(J::String("x".repeat(MAX_KEY_BYTES)));
    assert!(matches!(
        encode_key(&[big], b"k"),
        Err(IndexKeyError::TooLong { .. })
    ));
    let fits = j(J::String("x".repeat(MAX_KEY_BYTES - 5)));
    let key = encode_key(std::slice::from_ref(&fits), b"k").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(key.len(), MAX_KEY_BYTES);
    assert_eq!(decode_key(&key), Ok((vec![fits], b"k".to_vec())));
}

#[test]
fn ranges_for_a_planner() {
    let key = |v: J| encode_key(&[j(v)], b"doc").unwrap_or_else(|e| panic!("{e}"));
    let five = j(json!(5));
    let (num_start, num_end) = type_range(crate::value::Type::Number);
    // `a > 5`: past 5, and still a number.
    let gt5 = (
        lower_bound(&five, false).unwrap_or_else(|e| panic!("{e}")),
        num_end,
    );
    let inside = |k: &[u8]| gt5.0.as_slice() <= k && k < gt5.1.as_slice();
    assert!(inside(&key(json!(5.5))));
    assert!(inside(&key(json!(1e300))));
    assert!(!inside(&key(json!(5))));
    assert!(!inside(&key(json!(5.0))));
    assert!(!inside(&key(json!("6"))));
    assert!(!inside(&key(json!(-6))));
    assert!(num_start.as_slice() <= key(json!(-1e300)).as_slice());
    assert_eq!(key(json!(5)), key(json!(5.0)));
}
