//! Session commands: what a connection negotiates and asks about itself and the server —
//! HELLO, SASL, SELECT_BUCKET, LIST_BUCKETS, GET_ERROR_MAP, GET_CLUSTER_CONFIG, NOOP,
//! VERSION, VERBOSITY, STAT, QUIT.

use super::shape::{be64, check, Part, Shape, EMPTY};
use super::ValidateCtx;
use crate::frame::Frame;
use crate::opcode::Opcode;
use crate::status::Status;
use sluice_types::MapVersion;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCommand<'a> {
    /// HELLO: the client's name and the feature codes it asks for.
    Hello {
        agent: &'a [u8],
        features: Vec<u16>,
    },
    SaslListMechs,
    SaslAuth {
        mechanism: &'a [u8],
        data: &'a [u8],
    },
    SaslStep {
        mechanism: &'a [u8],
        data: &'a [u8],
    },
    SelectBucket {
        name: &'a [u8],
    },
    ListBuckets,
    GetErrorMap {
        version: u16,
    },
    /// Optional (epoch, revision) the client already has.
    GetClusterConfig {
        known: Option<MapVersion>,
    },
    Noop,
    Version,
    Verbosity,
    /// STAT of a group (empty: the default group).
    Stat {
        group: &'a [u8],
    },
    /// QUIT / QUITQ.
    Quit,
}

/// Validates a session opcode; `Ok(None)` for an opcode of another family.
pub(super) fn validate<'a>(
    op: Opcode,
    f: &Frame<'a>,
    ctx: &ValidateCtx,
) -> Result<Option<SessionCommand<'a>>, Status> {
    use Opcode::*;
    let shaped = |shape: Shape| check(f, shape, ctx);
    Ok(Some(match op {
        Hello => {
            shaped(Shape {
                extras: &[0],
                key: Part::Optional,
                value: Part::Optional,
            })?;
            if !f.value.len().is_multiple_of(2) {
                return Err(Status::Einval);
            }
            let features = f
                .value
                .chunks_exact(2)
                .filter_map(|c| c.try_into().ok().map(u16::from_be_bytes))
                .collect();
            SessionCommand::Hello {
                agent: f.key,
                features,
            }
        }
        SaslListMechs => {
            shaped(EMPTY)?;
            SessionCommand::SaslListMechs
        }
        SaslAuth | SaslStep => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::Optional,
            })?;
            let (mechanism, data) = (f.key, f.value);
            if op == SaslAuth {
                SessionCommand::SaslAuth { mechanism, data }
            } else {
                SessionCommand::SaslStep { mechanism, data }
            }
        }
        SelectBucket => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::None,
            })?;
            SessionCommand::SelectBucket { name: f.key }
        }
        ListBuckets => {
            shaped(EMPTY)?;
            SessionCommand::ListBuckets
        }
        GetErrorMap => {
            shaped(Shape {
                extras: &[0],
                key: Part::None,
                value: Part::Required,
            })?;
            let Ok(version) = <[u8; 2]>::try_from(f.value).map(u16::from_be_bytes) else {
                return Err(Status::Einval);
            };
            if version == 0 {
                return Err(Status::Einval);
            }
            SessionCommand::GetErrorMap { version }
        }
        GetClusterConfig => {
            shaped(Shape {
                extras: &[0, 16],
                key: Part::None,
                value: Part::None,
            })?;
            let known = (f.extras.len() == 16).then(|| MapVersion {
                epoch: be64(f.extras, 0) as i64,
                rev: be64(f.extras, 8) as i64,
            });
            SessionCommand::GetClusterConfig { known }
        }
        Noop => {
            shaped(EMPTY)?;
            SessionCommand::Noop
        }
        Version => {
            shaped(EMPTY)?;
            SessionCommand::Version
        }
        Verbosity => {
            shaped(Shape {
                extras: &[4],
                key: Part::None,
                value: Part::None,
            })?;
            SessionCommand::Verbosity
        }
        Stat => {
            shaped(Shape {
                extras: &[0],
                key: Part::Optional,
                value: Part::Optional,
            })?;
            SessionCommand::Stat { group: f.key }
        }
        Quit | QuitQ => {
            shaped(EMPTY)?;
            SessionCommand::Quit
        }
        _ => return Ok(None),
    }))
}
