//! The operations' rules as tables: document, operation, path, value → result.

use crate::{Document, LookupOp, Mutation, MutationOp, Path, SubdocError};

const DOC: &str = r#"{"name": "ada", "tags": ["a", "b"], "n": 41, "deep": {"x": {"y": 1}}, "f": 1.5, "objs": [{"k": 1}], "e": {}, "ea": []}"#;

/// A lookup's result as text.
type Looked = Result<Option<String>, SubdocError>;
/// A mutation's result: the document and the returned value, as text.
type Applied = Result<(String, Option<String>), SubdocError>;

fn look(doc: &str, op: LookupOp, path: &str) -> Looked {
    let d = Document::parse(doc.as_bytes())?;
    let p = Path::parse(path.as_bytes())?;
    d.lookup(op, &p)
        .map(|v| v.map(|b| String::from_utf8(b).unwrap()))
}

fn apply(doc: &str, op: MutationOp, path: &str, value: &str, mkdir_p: bool) -> Applied {
    let mut d = Document::parse(doc.as_bytes())?;
    let p = Path::parse(path.as_bytes())?;
    let before = d.clone();
    let r = d.apply(&Mutation {
        op,
        path: &p,
        value: value.as_bytes(),
        mkdir_p,
    });
    if r.is_err() {
        assert_eq!(d, before, "a failed mutation changed the document");
    }
    let out = String::from_utf8(d.into_bytes()).unwrap();
    r.map(|v| (out, v.map(|b| String::from_utf8(b).unwrap())))
}

#[test]
fn lookups() {
    use LookupOp::*;
    let ok = |s: &str| Ok(Some(s.to_string()));
    let table: &[(LookupOp, &str, Looked)] = &[
        (Get, "name", ok("\"ada\"")),
        (Get, "tags", ok("[\"a\", \"b\"]")),
        (Get, "tags[1]", ok("\"b\"")),
        (Get, "tags[-1]", ok("\"b\"")),
        (Get, "deep.x.y", ok("1")),
        (Get, "objs[0].k", ok("1")),
        (Get, "", ok(DOC)),
        (Get, "missing", Err(SubdocError::PathEnoent)),
        (Get, "tags[2]", Err(SubdocError::PathEnoent)),
        (Get, "ea[-1]", Err(SubdocError::PathEnoent)),
        (Get, "deep.x.z", Err(SubdocError::PathEnoent)),
        (Get, "name.first", Err(SubdocError::PathMismatch)),
        (Get, "tags.a", Err(SubdocError::PathMismatch)),
        (Get, "deep[0]", Err(SubdocError::PathMismatch)),
        (Get, "a..b", Err(SubdocError::PathEinval)),
        (Exists, "n", Ok(None)),
        (Exists, "nope", Err(SubdocError::PathEnoent)),
        (Count, "tags", ok("2")),
        (Count, "deep", ok("1")),
        (Count, "e", ok("0")),
        (Count, "", ok("8")),
        (Count, "n", Err(SubdocError::PathMismatch)),
    ];
    for (op, path, want) in table {
        assert_eq!(&look(DOC, *op, path), want, "{op:?} {path:?}");
    }
    assert_eq!(look(r#"{"a\"b": 1}"#, Get, "a\"b"), Ok(Some("1".into())));
    assert_eq!(look(r#"{"a.b": 2}"#, Get, "`a.b`"), Ok(Some("2".into())));
    assert_eq!(look("not json", Get, "a"), Err(SubdocError::DocNotJson));
}

#[test]
fn mutations() {
    use MutationOp::*;
    let doc = r#"{"a": 1, "l": [1, 2], "o": {"x": true}}"#;
    let ok = |s: &str| Ok((s.to_string(), None));
    let table: &[(MutationOp, &str, &str, bool, Applied)] = &[
        (
            DictUpsert,
            "a",
            "2",
            false,
            ok(r#"{"a": 2, "l": [1, 2], "o": {"x": true}}"#),
        ),
        (
            DictUpsert,
            "b",
            " \"s\" ",
            false,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true},"b":"s"}"#),
        ),
        (
            DictUpsert,
            "o.y",
            "null",
            false,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true,"y":null}}"#),
        ),
        (
            DictUpsert,
            "p.q.r",
            "1",
            false,
            Err(SubdocError::PathEnoent),
        ),
        (
            DictUpsert,
            "p.q.r",
            "1",
            true,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true},"p":{"q":{"r":1}}}"#),
        ),
        (DictUpsert, "l[0]", "1", false, Err(SubdocError::PathEinval)),
        (DictUpsert, "", "1", false, Err(SubdocError::PathEinval)),
        (
            DictUpsert,
            "l.x",
            "1",
            false,
            Err(SubdocError::PathMismatch),
        ),
        (
            DictUpsert,
            "b",
            "{",
            false,
            Err(SubdocError::ValueCantInsert),
        ),
        (
            DictUpsert,
            "b",
            "1,2",
            false,
            Err(SubdocError::ValueCantInsert),
        ),
        (DictAdd, "a", "2", false, Err(SubdocError::PathEexists)),
        (
            DictAdd,
            "new",
            "[]",
            false,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true},"new":[]}"#),
        ),
        (
            Replace,
            "l[1]",
            "\"two\"",
            false,
            ok(r#"{"a": 1, "l": [1, "two"], "o": {"x": true}}"#),
        ),
        (Replace, "zz", "1", false, Err(SubdocError::PathEnoent)),
        (Replace, "", "1", false, Err(SubdocError::PathEinval)),
        (
            Delete,
            "a",
            "",
            false,
            ok(r#"{"l": [1, 2], "o": {"x": true}}"#),
        ),
        (Delete, "o", "", false, ok(r#"{"a": 1, "l": [1, 2]}"#)),
        (
            Delete,
            "o.x",
            "",
            false,
            ok(r#"{"a": 1, "l": [1, 2], "o": {}}"#),
        ),
        (
            Delete,
            "l[-1]",
            "",
            false,
            ok(r#"{"a": 1, "l": [1], "o": {"x": true}}"#),
        ),
        (
            Delete,
            "l[0]",
            "",
            false,
            ok(r#"{"a": 1, "l": [2], "o": {"x": true}}"#),
        ),
        (Delete, "zz", "", false, Err(SubdocError::PathEnoent)),
        (Delete, "", "", false, Err(SubdocError::PathEinval)),
        (
            ArrayPushLast,
            "l",
            "3",
            false,
            ok(r#"{"a": 1, "l": [1, 2,3], "o": {"x": true}}"#),
        ),
        (
            ArrayPushLast,
            "l",
            "3, 4",
            false,
            ok(r#"{"a": 1, "l": [1, 2,3, 4], "o": {"x": true}}"#),
        ),
        (
            ArrayPushFirst,
            "l",
            "0",
            false,
            ok(r#"{"a": 1, "l": [0,1, 2], "o": {"x": true}}"#),
        ),
        (
            ArrayPushLast,
            "o",
            "1",
            false,
            Err(SubdocError::PathMismatch),
        ),
        (
            ArrayPushLast,
            "m",
            "1",
            false,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true},"m":[1]}"#),
        ),
        (
            ArrayPushLast,
            "m.n",
            "1",
            false,
            Err(SubdocError::PathEnoent),
        ),
        (
            ArrayPushLast,
            "m.n",
            "1",
            true,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true},"m":{"n":[1]}}"#),
        ),
        (
            ArrayPushLast,
            "l",
            "",
            false,
            Err(SubdocError::ValueCantInsert),
        ),
        (
            ArrayInsert,
            "l[1]",
            "9",
            false,
            ok(r#"{"a": 1, "l": [1, 9,2], "o": {"x": true}}"#),
        ),
        (
            ArrayInsert,
            "l[2]",
            "9",
            false,
            ok(r#"{"a": 1, "l": [1, 2,9], "o": {"x": true}}"#),
        ),
        (
            ArrayInsert,
            "l[0]",
            "8,9",
            false,
            ok(r#"{"a": 1, "l": [8,9,1, 2], "o": {"x": true}}"#),
        ),
        (
            ArrayInsert,
            "l[3]",
            "9",
            false,
            Err(SubdocError::PathEnoent),
        ),
        (
            ArrayInsert,
            "l[-1]",
            "9",
            false,
            Err(SubdocError::PathEinval),
        ),
        (ArrayInsert, "l", "9", false, Err(SubdocError::PathEinval)),
        (
            ArrayInsert,
            "o[0]",
            "9",
            false,
            Err(SubdocError::PathMismatch),
        ),
        (
            ArrayInsert,
            "q[0]",
            "9",
            false,
            Err(SubdocError::PathEnoent),
        ),
        (
            ArrayAddUnique,
            "l",
            "2",
            false,
            Err(SubdocError::PathEexists),
        ),
        (
            ArrayAddUnique,
            "l",
            "3",
            false,
            ok(r#"{"a": 1, "l": [1, 2,3], "o": {"x": true}}"#),
        ),
        (
            ArrayAddUnique,
            "l",
            "[3]",
            false,
            Err(SubdocError::ValueCantInsert),
        ),
        (
            ArrayAddUnique,
            "u",
            "\"x\"",
            false,
            ok(r#"{"a": 1, "l": [1, 2], "o": {"x": true},"u":["x"]}"#),
        ),
        (
            Counter,
            "a",
            "5",
            false,
            Ok((
                r#"{"a": 6, "l": [1, 2], "o": {"x": true}}"#.into(),
                Some("6".into()),
            )),
        ),
        (
            Counter,
            "a",
            "-3",
            false,
            Ok((
                r#"{"a": -2, "l": [1, 2], "o": {"x": true}}"#.into(),
                Some("-2".into()),
            )),
        ),
        (
            Counter,
            "c",
            "7",
            false,
            Ok((
                r#"{"a": 1, "l": [1, 2], "o": {"x": true},"c":7}"#.into(),
                Some("7".into()),
            )),
        ),
        (Counter, "p.c", "7", false, Err(SubdocError::PathEnoent)),
        (
            Counter,
            "p.c",
            "7",
            true,
            Ok((
                r#"{"a": 1, "l": [1, 2], "o": {"x": true},"p":{"c":7}}"#.into(),
                Some("7".into()),
            )),
        ),
        (Counter, "a", "0", false, Err(SubdocError::DeltaEinval)),
        (Counter, "a", "x", false, Err(SubdocError::DeltaEinval)),
        (Counter, "a", " 1", false, Err(SubdocError::DeltaEinval)),
        (
            Counter,
            "a",
            "99999999999999999999",
            false,
            Err(SubdocError::DeltaEinval),
        ),
        (Counter, "o", "1", false, Err(SubdocError::PathMismatch)),
        (Counter, "", "1", false, Err(SubdocError::PathMismatch)),
    ];
    for (op, path, value, mkdir_p, want) in table {
        assert_eq!(
            &apply(doc, *op, path, value, *mkdir_p),
            want,
            "{op:?} {path:?} {value:?}"
        );
    }
}

#[test]
fn counters_at_the_edges_of_64_bits() {
    use MutationOp::Counter;
    let max = format!("{{\"n\":{}}}", i64::MAX);
    assert_eq!(
        apply(&max, Counter, "n", "1", false),
        Err(SubdocError::ValueCantInsert)
    );
    assert_eq!(
        apply(&max, Counter, "n", "-1", false).map(|r| r.1),
        Ok(Some((i64::MAX - 1).to_string()))
    );
    assert_eq!(
        apply(r#"{"n":99999999999999999999}"#, Counter, "n", "1", false),
        Err(SubdocError::NumErange)
    );
    assert_eq!(
        apply(r#"{"n":1.5}"#, Counter, "n", "1", false),
        Err(SubdocError::PathMismatch)
    );
    assert_eq!(
        apply(r#"{"n":1e3}"#, Counter, "n", "1", false),
        Err(SubdocError::PathMismatch)
    );
    assert_eq!(
        apply(r#"{"n":"1"}"#, Counter, "n", "1", false),
        Err(SubdocError::PathMismatch)
    );
}

#[test]
fn untouched_bytes_stay_as_they_were() {
    let doc = "{ \"keep\" : [ 1.50 ,\n 2e1 ] ,\t\"x\":1 }";
    let (out, _) = apply(doc, MutationOp::Replace, "x", "2", false).unwrap();
    assert_eq!(out, "{ \"keep\" : [ 1.50 ,\n 2e1 ] ,\t\"x\":2 }");
    let (out, _) = apply(doc, MutationOp::Delete, "keep", "", false).unwrap();
    assert_eq!(out, "{ \"x\":1 }");
    let (out, _) = apply("[ ]", MutationOp::ArrayPushLast, "", "1", false).unwrap();
    assert_eq!(out, "[1 ]");
}

#[test]
fn depth_limits() {
    let path31 = vec!["a"; 31].join(".");
    // 31 keys deep, a scalar: fine. An object there nests 32 levels: still fine; an array
    // with an array in it is 33: too deep.
    assert!(apply("{}", MutationOp::DictUpsert, &path31, "1", true).is_ok());
    assert!(apply("{}", MutationOp::DictUpsert, &path31, "[]", true).is_ok());
    assert_eq!(
        apply("{}", MutationOp::DictUpsert, &path31, "[[]]", true),
        Err(SubdocError::ValueEtoodeep)
    );
}

#[test]
fn stored_documents_skip_the_parse_but_not_the_depth_limit() {
    let d = Document::from_valid_json(br#"{"a":[1]}"#).unwrap();
    assert_eq!(
        d.lookup(LookupOp::Count, &Path::parse(b"a").unwrap()),
        Ok(Some(b"1".to_vec()))
    );
    let deep = format!("{}{}", "[".repeat(33), "]".repeat(33));
    assert_eq!(
        Document::from_valid_json(deep.as_bytes()),
        Err(SubdocError::DocE2deep)
    );
}

#[test]
fn empty_documents_for_new_docs() {
    let p = Path::parse(b"").unwrap();
    assert_eq!(
        Document::empty_for(MutationOp::ArrayPushLast, &p).as_bytes(),
        b"[]"
    );
    let p = Path::parse(b"a").unwrap();
    assert_eq!(
        Document::empty_for(MutationOp::ArrayPushLast, &p).as_bytes(),
        b"{}"
    );
    let p = Path::parse(b"[0]").unwrap();
    assert_eq!(
        Document::empty_for(MutationOp::DictUpsert, &p).as_bytes(),
        b"[]"
    );
}

/// A small deterministic generator: random documents and mutations never panic, and a
/// successful mutation always leaves valid JSON (the property the fuzz target checks at
/// scale).
#[test]
fn random_mutations_keep_the_document_valid() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let values = [
        "1",
        "\"s\"",
        "[1,2]",
        "{\"k\":[]}",
        "null",
        "-5",
        "1,2",
        "",
        "{",
        "3",
    ];
    let paths = [
        "", "a", "a.b", "a[0]", "a[-1]", "l", "l[1]", "l[9]", "o.x.y", "[0]", "`a`.b",
    ];
    let ops = MutationOp::ALL;
    for _ in 0..200 {
        let mut d = Document::parse(br#"{"a":[{"b":1}],"l":[1,2,3],"o":{}}"#).unwrap();
        for _ in 0..30 {
            let p = Path::parse(paths[next(paths.len())].as_bytes()).unwrap();
            let m = Mutation {
                op: ops[next(ops.len())],
                path: &p,
                value: values[next(values.len())].as_bytes(),
                mkdir_p: next(2) == 0,
            };
            if d.apply(&m).is_ok() {
                crate::check_document(d.as_bytes()).unwrap();
            }
        }
    }
}
