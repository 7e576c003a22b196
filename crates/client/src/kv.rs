//! Document operations: get, set / add / replace, delete, incr / decr.

use sluice_proto::encode::Packet;
use sluice_proto::{Feature, Opcode};
use sluice_types::{Cas, Seqno, VbId, VbUuid};

use crate::client::Client;
use crate::error::ClientError;
use crate::response::Response;
use crate::results::{DocMeta, GetResult, MutationResult, MutationToken, StoreOptions};

/// INCR/DECR expiry meaning "do not create a missing counter".
const EXPIRY_NO_CREATE: u32 = 0xffff_ffff;

impl Client {
    /// Reads a document; a miss is `Err(ClientError::Status(Status::KeyEnoent))`
    /// (see [`ClientError::is_not_found`]).
    pub async fn get(&mut self, key: &[u8]) -> Result<GetResult, ClientError> {
        let vb = self.vbucket_of(key);
        let req = Packet::request(Opcode::Get.byte(), vb.0, 0).key(key);
        let resp = self.call(req).await?.into_success()?;
        get_result(resp)
    }

    /// Reads this node's replica copy of a document (GET_REPLICA): connect to the node that
    /// holds the replica. NOT_MY_VBUCKET if it holds none.
    pub async fn get_replica(&mut self, key: &[u8]) -> Result<GetResult, ClientError> {
        let vb = self.vbucket_of(key);
        let req = Packet::request(Opcode::GetReplica.byte(), vb.0, 0).key(key);
        let resp = self.call(req).await?.into_success()?;
        get_result(resp)
    }

    pub async fn set(
        &mut self,
        key: &[u8],
        value: &[u8],
        opts: StoreOptions,
    ) -> Result<MutationResult, ClientError> {
        self.store(Opcode::Set, key, value, opts).await
    }

    /// Fails with KEY_EEXISTS if the key exists.
    pub async fn add(
        &mut self,
        key: &[u8],
        value: &[u8],
        opts: StoreOptions,
    ) -> Result<MutationResult, ClientError> {
        self.store(Opcode::Add, key, value, opts).await
    }

    /// Fails with KEY_ENOENT if the key is missing.
    pub async fn replace(
        &mut self,
        key: &[u8],
        value: &[u8],
        opts: StoreOptions,
    ) -> Result<MutationResult, ClientError> {
        self.store(Opcode::Replace, key, value, opts).await
    }

    /// Deletes a document; a non-zero `cas` must match the current one.
    pub async fn delete(&mut self, key: &[u8], cas: Cas) -> Result<MutationResult, ClientError> {
        let vb = self.vbucket_of(key);
        let req = Packet::request(Opcode::Delete.byte(), vb.0, 0)
            .key(key)
            .cas(cas.0);
        let resp = self.call(req).await?.into_success()?;
        Ok(self.mutation(vb, &resp))
    }

    /// Adds `delta`; a missing counter is created with `initial`, or the call fails with
    /// KEY_ENOENT when `initial` is `None`. Returns the new value.
    pub async fn incr(
        &mut self,
        key: &[u8],
        delta: u64,
        initial: Option<u64>,
        expiry: u32,
    ) -> Result<(u64, MutationResult), ClientError> {
        self.arithmetic(Opcode::Increment, key, delta, initial, expiry)
            .await
    }

    /// Subtracts `delta`, stopping at 0; otherwise as [`Client::incr`].
    pub async fn decr(
        &mut self,
        key: &[u8],
        delta: u64,
        initial: Option<u64>,
        expiry: u32,
    ) -> Result<(u64, MutationResult), ClientError> {
        self.arithmetic(Opcode::Decrement, key, delta, initial, expiry)
            .await
    }

    async fn store(
        &mut self,
        op: Opcode,
        key: &[u8],
        value: &[u8],
        opts: StoreOptions,
    ) -> Result<MutationResult, ClientError> {
        let vb = self.vbucket_of(key);
        let extras = store_extras(&opts);
        let framing = opts.durability.map(|d| d.framing_extras());
        let mut req = Packet::request(op.byte(), vb.0, 0)
            .extras(&extras)
            .key(key)
            .value(value)
            .cas(opts.cas.0);
        if let Some(f) = &framing {
            req = req.framing_extras(f);
        }
        let resp = self.call(req).await?.into_success()?;
        Ok(self.mutation(vb, &resp))
    }

    async fn arithmetic(
        &mut self,
        op: Opcode,
        key: &[u8],
        delta: u64,
        initial: Option<u64>,
        expiry: u32,
    ) -> Result<(u64, MutationResult), ClientError> {
        let vb = self.vbucket_of(key);
        let mut extras = [0u8; 20];
        extras[..8].copy_from_slice(&delta.to_be_bytes());
        extras[8..16].copy_from_slice(&initial.unwrap_or(0).to_be_bytes());
        let expiry = if initial.is_some() {
            expiry
        } else {
            EXPIRY_NO_CREATE
        };
        extras[16..].copy_from_slice(&expiry.to_be_bytes());
        let req = Packet::request(op.byte(), vb.0, 0).extras(&extras).key(key);
        let resp = self.call(req).await?.into_success()?;
        let value = be_u64(&resp.value).ok_or(ClientError::Unexpected(
            "counter answer is not an 8-byte value",
        ))?;
        Ok((value, self.mutation(vb, &resp)))
    }

    fn mutation(&self, vb: VbId, resp: &Response) -> MutationResult {
        mutation_result(vb, resp, self.has_feature(Feature::MutationSeqno))
    }
}

/// A successful GET (or GET_REPLICA) answer: 4 bytes of flags, then the value.
pub(crate) fn get_result(resp: Response) -> Result<GetResult, ClientError> {
    let flags = match resp.extras.as_ref() {
        [a, b, c, d] => u32::from_be_bytes([*a, *b, *c, *d]),
        _ => {
            return Err(ClientError::Unexpected(
                "GET answer without 4 bytes of flags",
            ))
        }
    };
    Ok(GetResult {
        value: resp.value,
        flags,
        cas: Cas(resp.cas),
        datatype: resp.datatype,
    })
}

/// GET_META's answer (extras version 2): deleted, flags, expiry, rev seqno, datatype.
pub(crate) fn meta_result(resp: &Response) -> Result<DocMeta, ClientError> {
    let e = resp.extras.as_ref();
    if e.len() != 21 {
        return Err(ClientError::Unexpected(
            "GET_META answer without its 21 bytes of extras",
        ));
    }
    let u32_at = |i: usize| u32::from_be_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
    let mut rev = [0u8; 8];
    rev.copy_from_slice(&e[12..20]);
    Ok(DocMeta {
        deleted: u32_at(0) != 0,
        flags: u32_at(4),
        expiry: u32_at(8),
        rev_seqno: u64::from_be_bytes(rev),
        cas: Cas(resp.cas),
        datatype: e[20],
    })
}

/// SET / ADD / REPLACE extras: flags, then expiry.
pub(crate) fn store_extras(opts: &StoreOptions) -> [u8; 8] {
    let mut extras = [0u8; 8];
    extras[..4].copy_from_slice(&opts.flags.to_be_bytes());
    extras[4..].copy_from_slice(&opts.expiry.to_be_bytes());
    extras
}

/// The CAS, plus the mutation token when MutationSeqno was negotiated (`seqnos`).
pub(crate) fn mutation_result(vb: VbId, resp: &Response, seqnos: bool) -> MutationResult {
    let token = if seqnos && resp.extras.len() == 16 {
        Some(MutationToken {
            vb,
            vb_uuid: VbUuid(be_u64(&resp.extras[..8]).unwrap_or(0)),
            seqno: Seqno(be_u64(&resp.extras[8..]).unwrap_or(0)),
        })
    } else {
        None
    };
    MutationResult {
        cas: Cas(resp.cas),
        token,
    }
}

pub(crate) fn be_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.try_into().ok()?))
}
