//! Flexible framing extras of alt requests (magic 0x08): a sequence of FrameInfo objects.
//!
//! Each object starts with a byte whose high nibble is the id and low nibble the length; a
//! nibble of 15 escapes to "15 + the next byte" (id escape byte first, then length escape).

use crate::status::Status;

pub use sluice_types::DurabilityLevel;

/// The request frame infos this server understands, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameInfos {
    pub barrier: bool,
    /// Level and optional timeout in milliseconds.
    pub durability: Option<(DurabilityLevel, Option<u16>)>,
    pub stream_id: Option<u16>,
    pub preserve_ttl: bool,
}

/// Parses the framing extras of a request. Unknown ids answer `UnknownFrameInfo`; a
/// malformed encoding or a bad value answers `Einval` (or the durability-specific status).
pub fn parse_frame_infos(mut buf: &[u8]) -> Result<FrameInfos, Status> {
    let mut out = FrameInfos::default();
    while let Some((&first, rest)) = buf.split_first() {
        buf = rest;
        let mut id = usize::from(first >> 4);
        let mut len = usize::from(first & 0x0f);
        if id == 15 {
            let (&b, rest) = buf.split_first().ok_or(Status::Einval)?;
            id += usize::from(b);
            buf = rest;
        }
        if len == 15 {
            let (&b, rest) = buf.split_first().ok_or(Status::Einval)?;
            len += usize::from(b);
            buf = rest;
        }
        if buf.len() < len {
            return Err(Status::Einval);
        }
        let (data, rest) = buf.split_at(len);
        buf = rest;
        match id {
            0 if len == 0 => out.barrier = true,
            1 => out.durability = Some(parse_durability(data)?),
            2 if len == 2 => out.stream_id = <[u8; 2]>::try_from(data).ok().map(u16::from_be_bytes),
            5 if len == 0 => out.preserve_ttl = true,
            0 | 2 | 5 => return Err(Status::Einval),
            _ => return Err(Status::UnknownFrameInfo),
        }
    }
    Ok(out)
}

fn parse_durability(data: &[u8]) -> Result<(DurabilityLevel, Option<u16>), Status> {
    let &first = data.first().ok_or(Status::Einval)?;
    let level = DurabilityLevel::from_wire(first).ok_or(Status::DurabilityInvalidLevel)?;
    match data {
        [_] => Ok((level, None)),
        [_, hi, lo] => match u16::from_be_bytes([*hi, *lo]) {
            0 | 0xffff => Err(Status::Einval),
            t => Ok((level, Some(t))),
        },
        _ => Err(Status::Einval),
    }
}

/// Encodes one frame info (client side).
pub fn encode_frame_info(out: &mut Vec<u8>, id: u8, data: &[u8]) {
    assert!(
        id < 15 && data.len() < 15,
        "only short frame infos are sent"
    );
    out.push((id << 4) | data.len() as u8);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durability_with_and_without_timeout() {
        let f = parse_frame_infos(&[0x11, 0x01]).unwrap();
        assert_eq!(f.durability, Some((DurabilityLevel::Majority, None)));
        let f = parse_frame_infos(&[0x13, 0x03, 0x01, 0xf4]).unwrap();
        assert_eq!(
            f.durability,
            Some((DurabilityLevel::PersistToMajority, Some(500)))
        );
        assert_eq!(
            parse_frame_infos(&[0x11, 0x09]),
            Err(Status::DurabilityInvalidLevel)
        );
        assert_eq!(parse_frame_infos(&[0x13, 0x01, 0, 0]), Err(Status::Einval));
    }

    #[test]
    fn handles_escapes_unknown_ids_and_truncation() {
        // id 15+1 = 16 (unknown) with escape byte, len 0
        assert_eq!(
            parse_frame_infos(&[0xf0, 0x01]),
            Err(Status::UnknownFrameInfo)
        );
        // length escape: id 3 (unknown), len 15+0
        let mut p = vec![0x3f, 0x00];
        p.extend_from_slice(&[0; 15]);
        assert_eq!(parse_frame_infos(&p), Err(Status::UnknownFrameInfo));
        assert_eq!(parse_frame_infos(&[0x12, 0x01]), Err(Status::Einval));
        assert_eq!(parse_frame_infos(&[0xf0]), Err(Status::Einval));
        let f = parse_frame_infos(&[0x00, 0x50]).unwrap();
        assert!(f.barrier && f.preserve_ttl);
    }
}
