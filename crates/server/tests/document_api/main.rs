//! The document API over a real socket, byte by byte: sub-document commands and xattrs
//! (`subdoc`), locks (`locks`), GET_RANDOM_KEY (`random_key`) and OBSERVE (`observe`). One
//! test binary for all of them: each binary links a whole node, and CI builds them all.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

#[path = "../common/mod.rs"]
mod common;

mod collections;
mod dcp_streams;
mod locks;
mod observe;
mod random_key;
mod subdoc;
mod tombstones;
mod with_meta;
mod xattr_values;
