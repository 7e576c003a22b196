//! An owned response: the frame's parts as cheap slices of one shared buffer.

use bytes::Bytes;
use sluice_proto::Status;

use crate::error::ClientError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub opcode: u8,
    /// The raw status; [`Response::status`] maps it to [`Status`].
    pub status_code: u16,
    pub datatype: u8,
    pub opaque: u32,
    pub cas: u64,
    pub extras: Bytes,
    pub key: Bytes,
    pub value: Bytes,
}

impl Response {
    pub fn status(&self) -> Result<Status, ClientError> {
        Status::from_u16(self.status_code).ok_or(ClientError::UnknownStatus(self.status_code))
    }

    pub fn is_success(&self) -> bool {
        self.status_code == Status::Success.code()
    }

    /// `Ok(self)` on SUCCESS, the status as an error otherwise.
    pub fn into_success(self) -> Result<Response, ClientError> {
        match self.status()? {
            Status::Success => Ok(self),
            other => Err(ClientError::Status(other)),
        }
    }
}
