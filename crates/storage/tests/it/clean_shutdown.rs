//! The clean-shutdown flag: set by mark_clean_shutdown, consumed by take_clean_shutdown_flag,
//! and both durable across reopen.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FjallStore, Store};
use std::path::Path;

fn reopen(dir: &Path) -> FjallStore {
    FjallStore::open(dir).expect("open")
}

#[test]
fn fresh_store_counts_as_clean() {
    let (_dir, store) = temp_store();
    assert!(store.take_clean_shutdown_flag().expect("take"));
}

#[test]
fn clean_stop_is_seen_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = reopen(dir.path());
        assert!(store.take_clean_shutdown_flag().expect("take"));
        commit_items(&store, vec![item(0, "a", 1, "v")]);
        store.mark_clean_shutdown().expect("mark");
    }
    {
        let store = reopen(dir.path());
        assert!(
            store.take_clean_shutdown_flag().expect("take"),
            "clean stop"
        );
        // Taking marks the store as running: a crash from here on is unclean.
        assert!(!store.take_clean_shutdown_flag().expect("take again"));
        // Crash: dropped without mark_clean_shutdown.
    }
    let store = reopen(dir.path());
    assert!(
        !store.take_clean_shutdown_flag().expect("take"),
        "unclean stop"
    );
}

#[test]
fn data_without_flag_counts_as_unclean() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = reopen(dir.path());
        commit_items(&store, vec![item(0, "a", 1, "v")]);
    }
    assert!(!reopen(dir.path()).take_clean_shutdown_flag().expect("take"));
}
