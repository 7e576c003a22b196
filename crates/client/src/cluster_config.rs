//! The one thing the client reads from the cluster map: how many vbuckets a key hashes over.

use crate::error::ClientError;
use sluice_types::cccp::TerseConfig;

/// `vBucketServerMap.vBucketMap`'s length defines N for `vbucket_of(key, N)`.
pub(crate) fn num_vbuckets(config_json: &[u8]) -> Result<u16, ClientError> {
    let config: TerseConfig = serde_json::from_slice(config_json)?;
    let n = config
        .vbucket_server_map
        .and_then(|m| m.vbucket_map)
        .map(|rows| rows.len())
        .ok_or(ClientError::NoVbucketMap)?;
    match u16::try_from(n) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ClientError::NoVbucketMap),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_vbucket_map() {
        let json = br#"{"rev":1,"vBucketServerMap":{"numReplicas":0,"vBucketMap":[[0],[0],[0]]}}"#;
        assert_eq!(num_vbuckets(json).unwrap(), 3);
    }

    #[test]
    fn rejects_missing_or_empty_maps_and_bad_json() {
        assert!(matches!(
            num_vbuckets(br#"{"rev":1}"#),
            Err(ClientError::NoVbucketMap)
        ));
        assert!(matches!(
            num_vbuckets(br#"{"vBucketServerMap":{"vBucketMap":[]}}"#),
            Err(ClientError::NoVbucketMap)
        ));
        assert!(matches!(
            num_vbuckets(b"not json"),
            Err(ClientError::ConfigJson(_))
        ));
    }
}
