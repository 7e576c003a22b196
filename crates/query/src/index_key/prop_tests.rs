//! Seeded property tests: byte order is collation order, entries order by tuple then
//! document key, decoding inverts encoding, and each range holds exactly its entries.

use std::cmp::Ordering;

use serde_json::Value as J;

use super::gen::{self, Rng};
use super::*;
use crate::collate::collate;
use crate::value::{Type, Value};

const SEEDS: [u64; 3] = [1, 0x5eed, 0xdead_beef];

fn enc(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    out
}

fn key(values: &[Value], doc: &[u8]) -> Vec<u8> {
    encode_key(values, doc).unwrap_or_else(|e| panic!("{values:?}: {e}"))
}

fn ok<T>(r: Result<T, IndexKeyError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Values with repeats: fresh ones, MISSING, copies and twins of earlier ones.
fn values(rng: &mut Rng, n: usize) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(n);
    while out.len() < n {
        let v = match rng.below(10) {
            0 => Value::Missing,
            1 | 2 if !out.is_empty() => {
                let earlier = out[rng.below(out.len())].clone();
                match earlier {
                    Value::Json(j) => Value::Json(gen::twin(&j)),
                    missing => missing,
                }
            }
            _ => Value::Json(gen::value(rng, 3)),
        };
        out.push(v);
    }
    out
}

#[test]
fn byte_order_is_collation_order() {
    let mut pairs = 0;
    for seed in SEEDS {
        let mut rng = Rng::new(seed);
        let vals = values(&mut rng, 500);
        let encoded: Vec<_> = vals.iter().map(enc).collect();
        for (a, ea) in vals.iter().zip(&encoded) {
            for (b, eb) in vals.iter().zip(&encoded) {
                assert_eq!(ea.cmp(eb), collate(a, b), "{a:?} vs {b:?}");
                pairs += 1;
            }
        }
    }
    assert_eq!(pairs, 3 * 500 * 500);
}

#[test]
fn equal_values_in_other_forms_encode_alike() {
    let mut rng = Rng::new(7);
    let mut changed = 0;
    for _ in 0..5000 {
        let j = gen::value(&mut rng, 3);
        let t = gen::twin(&j);
        changed += usize::from(t != j);
        assert_eq!(
            collate(&Value::Json(j.clone()), &Value::Json(t.clone())),
            Ordering::Equal
        );
        assert_eq!(enc(&Value::Json(j.clone())), enc(&Value::Json(t)), "{j}");
    }
    assert!(
        changed > 500,
        "only {changed} twins differ from their original"
    );
}

#[test]
fn decoding_inverts_encoding() {
    let mut rng = Rng::new(11);
    for _ in 0..20_000 {
        let j = gen::value(&mut rng, 4);
        let bytes = enc(&Value::Json(j.clone()));
        let back = ok(decode_value(&bytes));
        assert_eq!(back, Value::Json(gen::canonical(&j)), "{j}");
        assert_eq!(collate(&back, &Value::Json(j.clone())), Ordering::Equal);
        assert_eq!(enc(&back), bytes);
    }
    assert_eq!(ok(decode_value(&enc(&Value::Missing))), Value::Missing);
}

/// Entries of two values and a document key, and their decoded, canonical parts.
fn entries(rng: &mut Rng, n: usize) -> Vec<(Vec<Value>, Vec<u8>)> {
    let pool = values(rng, n / 2);
    (0..n)
        .map(|_| {
            let first = pool[rng.below(pool.len())].clone();
            let second = pool[rng.below(pool.len())].clone();
            (vec![first, second], gen::doc_key(rng))
        })
        .collect()
}

fn tuple_order(a: &(Vec<Value>, Vec<u8>), b: &(Vec<Value>, Vec<u8>)) -> Ordering {
    a.0.iter()
        .zip(&b.0)
        .map(|(x, y)| collate(x, y))
        .find(|c| *c != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(&b.1))
}

fn canonical(v: &Value) -> Value {
    match v {
        Value::Json(j) => Value::Json(gen::canonical(j)),
        Value::Missing => Value::Missing,
    }
}

#[test]
fn entries_order_by_tuple_then_document_key() {
    for seed in SEEDS {
        let mut rng = Rng::new(seed ^ 0xe);
        let es = entries(&mut rng, 400);
        let keys: Vec<_> = es.iter().map(|(v, d)| key(v, d)).collect();
        for (a, ka) in es.iter().zip(&keys) {
            for (b, kb) in es.iter().zip(&keys) {
                assert_eq!(ka.cmp(kb), tuple_order(a, b), "{a:?} vs {b:?}");
            }
            let (vals, doc) = ok(decode_key(ka));
            assert_eq!(vals, a.0.iter().map(canonical).collect::<Vec<_>>());
            assert_eq!(doc, a.1);
        }
    }
}

fn within(k: &[u8], (start, end): &(Vec<u8>, Vec<u8>)) -> bool {
    start.as_slice() <= k && k < end.as_slice()
}

const TYPES: [Type; 7] = [
    Type::Missing,
    Type::Null,
    Type::Boolean,
    Type::Number,
    Type::String,
    Type::Array,
    Type::Object,
];

#[test]
fn ranges_hold_exactly_their_entries() {
    let mut checks = 0usize;
    for seed in SEEDS {
        let mut rng = Rng::new(seed ^ 0x7a);
        let es = entries(&mut rng, 300);
        let keys: Vec<_> = es.iter().map(|(v, d)| key(v, d)).collect();
        // Probes: the entries' own values (hits) and fresh ones (mostly misses).
        let mut probes: Vec<Value> = es.iter().take(60).map(|e| e.0[0].clone()).collect();
        probes.extend(values(&mut rng, 60));
        let all = (Vec::new(), vec![0xff]);
        for p in &probes {
            let ranges = [
                (ok(lower_bound(p, true)), all.1.clone()),
                (ok(lower_bound(p, false)), all.1.clone()),
                (all.0.clone(), ok(upper_bound(p, true))),
                (all.0.clone(), ok(upper_bound(p, false))),
                ok(prefix_range(std::slice::from_ref(p))),
            ];
            let second = &es[rng.below(es.len())].0[1];
            let pair = [p.clone(), second.clone()];
            let (_, prefix_end) = ok(prefix_range(std::slice::from_ref(p)));
            let after_lo = (
                ok(lower_bound_after(std::slice::from_ref(p), second, false)),
                prefix_end.clone(),
            );
            let after_hi = (
                ok(prefix_range(std::slice::from_ref(p))).0,
                ok(upper_bound_after(std::slice::from_ref(p), second, true)),
            );
            let pair_range = ok(prefix_range(&pair));
            for ((vals, _), k) in es.iter().zip(&keys) {
                let c = collate(&vals[0], p);
                let c2 = collate(&vals[1], second);
                let eq = c == Ordering::Equal;
                let want = [c.is_ge(), c.is_gt(), c.is_le(), c.is_lt(), eq];
                for (range, want) in ranges.iter().zip(want) {
                    assert_eq!(within(k, range), want, "{vals:?} vs {p:?} in {range:02x?}");
                }
                assert_eq!(
                    within(k, &after_lo),
                    eq && c2.is_gt(),
                    "{vals:?} > {second:?}"
                );
                assert_eq!(
                    within(k, &after_hi),
                    eq && c2.is_le(),
                    "{vals:?} <= {second:?}"
                );
                assert_eq!(within(k, &pair_range), eq && c2.is_eq(), "{vals:?}");
                assert!(within(k, &all));
                checks += 10;
            }
            // The element after a prefix, by type.
            for t in TYPES {
                let range = ok(type_range_after(std::slice::from_ref(p), t));
                for ((vals, _), k) in es.iter().zip(&keys) {
                    let want = collate(&vals[0], p).is_eq() && vals[1].kind() == t;
                    assert_eq!(within(k, &range), want, "{vals:?} {t:?}");
                    checks += 1;
                }
            }
        }
        for t in TYPES {
            let range = type_range(t);
            for ((vals, _), k) in es.iter().zip(&keys) {
                assert_eq!(within(k, &range), vals[0].kind() == t, "{vals:?} {t:?}");
            }
        }
    }
    assert!(checks > 500_000, "{checks}");
}

/// Mutated encodings (bytes flipped, dropped, inserted, cut): decoding never panics, and
/// whatever it accepts re-encodes to the same bytes.
#[test]
fn decoding_mutants_is_total_and_canonical() {
    let mut rng = Rng::new(99);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let (vals, doc) = entries(&mut rng, 2).swap_remove(0);
        let mut bytes = key(&vals, &doc);
        for _ in 0..=rng.below(3) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(4) {
                0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, rng.pick(&[0x00, 0x01, 0xff, 0x20, 0x60, 0x70])),
                _ => bytes.truncate(at),
            }
        }
        if let Ok((vals, doc)) = decode_key(&bytes) {
            accepted += 1;
            assert_eq!(key(&vals, &doc), bytes, "{vals:?} {doc:02x?}");
        }
    }
    assert!(accepted > 1000, "only {accepted} mutants decoded");
}

#[test]
fn generated_values_cover_the_tricky_cases() {
    let mut rng = Rng::new(3);
    let nums: Vec<J> = (0..5000).map(|_| gen::number(&mut rng)).collect();
    let has = |f: &dyn Fn(&J) -> bool| nums.iter().any(f);
    assert!(has(&|j| j
        .as_f64()
        .is_some_and(|f| f == 0.0 && f.is_sign_negative())));
    assert!(has(&|j| j.as_u64().is_some_and(|u| u > i64::MAX as u64)));
    assert!(has(&|j| j.as_i64().is_some_and(|i| i < -(1 << 53))));
    assert!(has(
        &|j| j.is_f64() && j.as_f64().is_some_and(|f| f.fract() != 0.0 && f < 0.0)
    ));
    assert!(has(
        &|j| j.is_f64() && j.as_f64().is_some_and(|f| f.abs() > 1e19)
    ));
}
