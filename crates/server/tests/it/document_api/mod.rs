//! The document API over a real socket, byte by byte: sub-document commands and xattrs
//! (`subdoc`), locks (`locks`), GET_RANDOM_KEY (`random_key`) and OBSERVE (`observe`).

mod collections;
mod dcp_streams;
mod locks;
mod observe;
mod random_key;
mod subdoc;
mod tombstones;
mod with_meta;
mod xattr_values;
