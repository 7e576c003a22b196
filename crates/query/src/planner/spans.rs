//! Per-key value sets to byte spans: over `encode_key` entries for a secondary index, over
//! raw document keys for a primary one.
//!
//! A composite index `(a, b, c)` is narrowed key by key while the keys are pinned to a
//! finite list of values: one prefix per combination, so `a IN [1, 2] AND b = 3` reads
//! `(1, 3)` and `(2, 3)`. The first key that is a range (or unconstrained, or whose
//! combinations would pass [`MAX_SPANS`]) ends the narrowing: its intervals are bounded
//! after each prefix, and later keys are left to the WHERE. A bound that cannot be
//! encoded (a constant nested too deep) widens to its prefix's edge, never narrows.

use std::ops::Bound;

use super::access::{KeyRange, ScanRange, Span};
use super::atoms::strings;
use super::interval::{Interval, ValueSet};
use super::predicate::Constraint;
use crate::index_key::{encode_values, lower_bound_after, prefix_range, tag, upper_bound_after};
use crate::value::Value;

/// The most spans one scan is split into: past it, a key's values are read as one range
/// from the least to the greatest, which covers them all.
pub const MAX_SPANS: usize = 1_000;

/// Spans for an index whose keys (rendered, in order) are constrained as given.
pub(crate) fn index_spans(keys: &[(&str, Constraint)]) -> (Vec<Span>, Vec<ScanRange>) {
    let mut prefixes: Vec<(Vec<Value>, Vec<KeyRange>)> = vec![(Vec::new(), Vec::new())];
    let mut last: Option<(&str, Vec<Interval>)> = None;
    for (name, set) in keys {
        let Some(set) = set else { break };
        if set.is_empty() {
            return (Vec::new(), Vec::new());
        }
        if let Some(points) = encodable_points(set) {
            if prefixes.len() * points.len() <= MAX_SPANS {
                prefixes = extend(&prefixes, name, &points);
                continue;
            }
        }
        let intervals = if prefixes.len() * set.intervals().len() <= MAX_SPANS {
            set.intervals().to_vec()
        } else {
            set.hull().into_iter().collect()
        };
        last = Some((name, intervals));
        break;
    }
    let (mut spans, mut ranges) = (Vec::new(), Vec::new());
    for (values, described) in &prefixes {
        let Some((name, intervals)) = &last else {
            spans.push(prefix_span(values));
            ranges.push(ScanRange {
                keys: described.clone(),
            });
            continue;
        };
        for iv in intervals {
            spans.push(interval_span(values, iv));
            let mut keys = described.clone();
            keys.push(key_range(name, iv));
            ranges.push(ScanRange { keys });
        }
    }
    (merge(spans), ranges)
}

/// Spans over a primary index's raw document keys, from the set `META().id` is in.
pub(crate) fn primary_spans(key_name: &str, set: &Constraint) -> (Vec<Span>, Vec<ScanRange>) {
    let Some(set) = set else {
        return (vec![everything()], Vec::new());
    };
    let keys = set.intersect(&strings());
    let mut spans = Vec::new();
    let mut ranges = Vec::new();
    for iv in keys.intervals() {
        let start = match &iv.low {
            Bound::Included(Value::Json(serde_json::Value::String(s))) => s.as_bytes().to_vec(),
            // The least key above `s` is `s` followed by a zero byte.
            Bound::Excluded(Value::Json(serde_json::Value::String(s))) => with_zero(s),
            _ => Vec::new(),
        };
        let end = match &iv.high {
            Bound::Included(Value::Json(serde_json::Value::String(s))) => with_zero(s),
            Bound::Excluded(Value::Json(serde_json::Value::String(s))) => s.as_bytes().to_vec(),
            _ => vec![tag::AFTER],
        };
        spans.push(Span { start, end });
        ranges.push(ScanRange {
            keys: vec![key_range(key_name, iv)],
        });
    }
    (merge(spans), ranges)
}

/// Every entry: each starts with a type tag or is a UTF-8 document key, both below 0xFF.
fn everything() -> Span {
    Span {
        start: Vec::new(),
        end: vec![tag::AFTER],
    }
}

fn with_zero(s: &str) -> Vec<u8> {
    let mut out = s.as_bytes().to_vec();
    out.push(0);
    out
}

/// The set's values when it is a finite list of them, each encodable.
fn encodable_points(set: &ValueSet) -> Option<Vec<Value>> {
    let points = set.points()?;
    points
        .into_iter()
        .map(|v| {
            encode_values(std::slice::from_ref(v))
                .ok()
                .map(|_| v.clone())
        })
        .collect()
}

fn extend(
    prefixes: &[(Vec<Value>, Vec<KeyRange>)],
    name: &str,
    points: &[Value],
) -> Vec<(Vec<Value>, Vec<KeyRange>)> {
    let mut out = Vec::with_capacity(prefixes.len() * points.len());
    for (values, described) in prefixes {
        for p in points {
            let (mut values, mut described) = (values.clone(), described.clone());
            values.push(p.clone());
            described.push(key_range(
                name,
                &Interval::new(Bound::Included(p.clone()), Bound::Included(p.clone())),
            ));
            out.push((values, described));
        }
    }
    out
}

fn key_range(name: &str, iv: &Interval) -> KeyRange {
    KeyRange {
        index_key: name.to_owned(),
        low: iv.low.clone(),
        high: iv.high.clone(),
    }
}

/// The entries starting with `prefix` (all of them for an empty prefix).
fn prefix_span(prefix: &[Value]) -> Span {
    match prefix_range(prefix) {
        Ok((start, end)) => Span { start, end },
        Err(_) => everything(),
    }
}

/// The entries starting with `prefix` whose next key lies in `iv`.
fn interval_span(prefix: &[Value], iv: &Interval) -> Span {
    let edges = prefix_span(prefix);
    let start = match &iv.low {
        Bound::Included(v) => lower_bound_after(prefix, v, true).ok(),
        Bound::Excluded(v) => lower_bound_after(prefix, v, false).ok(),
        Bound::Unbounded => None,
    };
    let end = match &iv.high {
        Bound::Included(v) => upper_bound_after(prefix, v, true).ok(),
        Bound::Excluded(v) => upper_bound_after(prefix, v, false).ok(),
        Bound::Unbounded => None,
    };
    Span {
        start: start.unwrap_or(edges.start),
        end: end.unwrap_or(edges.end),
    }
}

/// Sorted, with overlapping or touching spans joined and empty ones dropped.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.retain(|s| s.start < s.end);
    spans.sort();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => {
                if s.end > last.end {
                    last.end = s.end;
                }
            }
            _ => out.push(s),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sp(a: &[u8], b: &[u8]) -> Span {
        Span {
            start: a.to_vec(),
            end: b.to_vec(),
        }
    }

    #[test]
    fn merge_joins_overlaps_and_keeps_the_wider_end() {
        let got = merge(vec![
            sp(b"c", b"d"),
            sp(b"a", b"z"),
            sp(b"b", b"c"),
            sp(b"z", b"zz"),
        ]);
        assert_eq!(got, vec![sp(b"a", b"zz")]);
        let got = merge(vec![sp(b"b", b"c"), sp(b"x", b"x"), sp(b"a", b"b0")]);
        assert_eq!(got, vec![sp(b"a", b"c")]);
        assert_eq!(merge(vec![sp(b"a", b"b"), sp(b"c", b"d")]).len(), 2);
    }

    /// A value nested past `MAX_DEPTH` has no encoding: its bound widens to the prefix.
    #[test]
    fn unencodable_constants_widen_never_narrow() {
        let mut deep = json!(1);
        for _ in 0..crate::index_key::MAX_DEPTH + 1 {
            deep = json!([deep]);
        }
        let deep = Value::Json(deep);
        let keys = vec![("`a`", Some(ValueSet::point(deep.clone())))];
        let (spans, _) = index_spans(&keys);
        assert_eq!(spans, vec![everything()]);

        let one = Value::Json(json!(1));
        let keys = vec![
            ("`a`", Some(ValueSet::point(one.clone()))),
            (
                "`b`",
                Some(ValueSet::range(Bound::Excluded(deep), Bound::Unbounded)),
            ),
        ];
        let (spans, _) = index_spans(&keys);
        assert_eq!(spans, vec![prefix_span(&[one])]);
    }
}
