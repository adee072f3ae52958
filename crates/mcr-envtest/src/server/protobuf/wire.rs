//! The protobuf wire format, read-only: tags, varints, fixed-width and length-delimited values.
//!
//! Every read is bounds-checked: truncated or oversized input becomes a [`ProtobufError`], never
//! a panic, and a length prefix never causes an allocation (values borrow from the input).

use super::ProtobufError;

/// One field value as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WireValue<'a> {
    /// Wire type 0: `int32`, `int64`, `uint*`, `bool`, enums.
    Varint(u64),
    /// Wire type 1: `fixed64`, `sfixed64`, `double`.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, embedded messages, packed repeated fields.
    Bytes(&'a [u8]),
    /// Wire type 5: `fixed32`, `sfixed32`, `float`.
    Fixed32(u32),
}

impl WireValue<'_> {
    /// A short name of the wire type, for error messages.
    pub(super) fn type_name(&self) -> &'static str {
        match self {
            WireValue::Varint(_) => "varint",
            WireValue::Fixed64(_) => "64-bit",
            WireValue::Bytes(_) => "length-delimited",
            WireValue::Fixed32(_) => "32-bit",
        }
    }
}

/// A cursor over the fields of one encoded message.
///
/// ```ignore
/// let mut fields = Fields::new(&[0x08, 0x96, 0x01]);
/// assert_eq!(fields.next_field()?, Some((1, WireValue::Varint(150))));
/// assert_eq!(fields.next_field()?, None);
/// ```
pub(super) struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    /// Reads the fields of `buf`, which holds exactly one message.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// The next `(field number, value)`, or `None` at the end of the message.
    pub(super) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, ProtobufError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3)
            .ok()
            .filter(|n| (1..=MAX_FIELD_NUMBER).contains(n))
            .ok_or(ProtobufError::Malformed("invalid field number"))?;
        let value = match tag & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.array()?)),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| ProtobufError::Malformed("length out of range"))?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.array()?)),
            3 | 4 => return Err(ProtobufError::Malformed("groups are not supported")),
            _ => return Err(ProtobufError::Malformed("invalid wire type")),
        };
        Ok(Some((number, value)))
    }

    /// A base-128 varint of at most 10 bytes.
    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for (i, byte) in self.buf.iter().enumerate() {
            let bits = u64::from(byte & 0x7f);
            let shift = 7 * i;
            if shift >= 64 || (shift == 63 && bits > 1) {
                return Err(ProtobufError::Malformed("varint overflows 64 bits"));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed("truncated varint"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], ProtobufError> {
        if len > self.buf.len() {
            return Err(ProtobufError::Malformed("truncated field"));
        }
        let (head, tail) = self.buf.split_at(len);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtobufError> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

/// The largest field number protobuf allows (2^29 - 1).
const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

#[cfg(test)]
mod tests {
    use super::*;

    fn all(buf: &[u8]) -> Result<Vec<(u32, WireValue<'_>)>, ProtobufError> {
        let mut fields = Fields::new(buf);
        let mut out = Vec::new();
        while let Some(field) = fields.next_field()? {
            out.push(field);
        }
        Ok(out)
    }

    #[test]
    fn reads_every_wire_type() {
        let buf = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 0x02, b'h', b'i', // 3: "hi"
            0x25, 2, 0, 0, 0, // 4: fixed32 2
        ];
        assert_eq!(
            all(&buf).unwrap(),
            vec![
                (1, WireValue::Varint(150)),
                (2, WireValue::Fixed64(1)),
                (3, WireValue::Bytes(b"hi")),
                (4, WireValue::Fixed32(2)),
            ]
        );
        let max = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(all(&max).unwrap(), vec![(1, WireValue::Varint(u64::MAX))]);
    }

    #[test]
    fn rejects_malformed_input() {
        let bad: &[&[u8]] = &[
            &[0x08],             // value missing
            &[0x08, 0x80],       // truncated varint
            &[0x0a, 0x05, b'a'], // length beyond the end
            &[
                0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // huge length
            &[0x11, 0, 0],       // truncated fixed64
            &[0x0b],             // group start
            &[0x0e, 0],          // wire type 6
            &[0x00, 0],          // field number 0
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
            ], // > 64 bits
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // 11 bytes
        ];
        for buf in bad {
            assert!(
                matches!(all(buf), Err(ProtobufError::Malformed(_))),
                "{buf:?} was accepted"
            );
        }
    }
}
