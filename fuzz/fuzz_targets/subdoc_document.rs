//! Sub-document operations (`sluice_subdoc::Document`) on arbitrary documents, paths and
//! values. Input: `op, mkdir_p, path_len, value_len`, then the path, the value, and the rest
//! as the document. Checks: never a panic; a successful mutation leaves valid JSON within
//! the depth limit; a failed one leaves the document unchanged; lookups never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_subdoc::{check_document, Document, LookupOp, Mutation, MutationOp, Path};


fuzz_target!(|data: &[u8]| {
    let Some((&[op, mkdir_p, path_len, value_len], rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let Some((path, rest)) = rest.split_at_checked(usize::from(path_len)) else {
        return;
    };
    let Some((value, doc)) = rest.split_at_checked(usize::from(value_len)) else {
        return;
    };
    let (Ok(path), Ok(mut doc)) = (Path::parse(path), Document::parse(doc)) else {
        return;
    };
    for look in [LookupOp::Get, LookupOp::Exists, LookupOp::Count] {
        let _ = doc.lookup(look, &path);
    }
    let before = doc.clone();
    let m = Mutation {
        op: MutationOp::ALL[usize::from(op) % MutationOp::ALL.len()],
        path: &path,
        value,
        mkdir_p: mkdir_p & 1 == 1,
    };
    match doc.apply(&m) {
        Ok(_) => assert!(
            check_document(doc.as_bytes()).is_ok(),
            "{:?} at {path} made {}",
            m.op,
            String::from_utf8_lossy(doc.as_bytes())
        ),
        Err(_) => assert_eq!(doc, before, "a failed mutation changed the document"),
    }
});
