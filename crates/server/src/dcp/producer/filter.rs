//! The filter a stream request asks for, checked against the bucket's collections manifest
//! as the connection sees it.

use super::Conn;
use sluice_dcp::filter::{FilterError, KeyMode, StreamFilter, StreamValue, Wanted};
use sluice_proto::Status;
use sluice_types::CollectionId;

impl Conn {
    /// The stream filter a request's value names (`None`: every collection), its ids
    /// checked against the bucket's manifest; syntax errors are `decide_stream_request`'s.
    pub(super) fn stream_filter(
        &self,
        parsed: &Result<StreamValue, FilterError>,
    ) -> Result<Option<StreamFilter>, (Status, &'static str)> {
        let Ok(StreamValue {
            wanted: Some(wanted),
            ..
        }) = parsed
        else {
            return Ok(None);
        };
        if self.producer.collections != KeyMode::Aware {
            return Err((
                Status::Einval,
                "a stream filter needs collections (HELLO) on the connection",
            ));
        }
        let manifest = self.bucket.manifest();
        match *wanted {
            Wanted::Collections(ref ids) => {
                if let Some(_unknown) = ids
                    .iter()
                    .find(|c| c.0 != 0 && !manifest.has_collection(c.0))
                {
                    return Err((
                        Status::UnknownCollection,
                        "the filter names a collection that is not in the manifest",
                    ));
                }
                Ok(Some(StreamFilter::collections(ids.iter().copied())))
            }
            Wanted::Scope(sid) => {
                let known = sid == 0 || manifest.scopes().iter().any(|s| s.id == sid);
                if !known {
                    return Err((
                        Status::UnknownScope,
                        "the filter names a scope that is not in the manifest",
                    ));
                }
                let ids = manifest
                    .collection_ids_of_scope(sid)
                    .into_iter()
                    .map(CollectionId);
                Ok(Some(StreamFilter::scope(sid, ids)))
            }
        }
    }
}
