//! Encoded message + [`Message`] table -> the JSON object the API server's JSON codec would
//! produce for the same Go value.
//!
//! Go's protobuf encoder writes every value (non-pointer) field, zero or not, while its JSON
//! encoder drops zero values tagged `omitempty`; [`Shape::Plain`] fields therefore omit zero
//! scalars. Embedded messages are always kept (`resources: {}`), as Go's JSON encoder keeps
//! empty structs. Recursion depth is bounded by the static tables: unknown fields are skipped
//! without being parsed.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::schema::{Field, Message, Shape, Ty};
use super::wire::{Fields, WireValue};

/// Decodes one encoded message of type `message` into a JSON object.
pub(super) fn message(
    message: &'static Message,
    buf: &[u8],
) -> Result<Map<String, Value>, ProtobufError> {
    let mut out = Map::new();
    let mut fields = Fields::new(buf);
    while let Some((number, wire)) = fields.next_field()? {
        let Some(field) = message.field(number) else {
            tracing::trace!(
                message = message.name,
                number,
                "skipped an unknown protobuf field"
            );
            continue;
        };
        match field.shape {
            Shape::Plain | Shape::Pointer => {
                let value = value(message, field, field.ty, wire)?;
                if (field.shape == Shape::Pointer && !value.is_null()) || !is_zero(&value) {
                    out.insert(field.json.to_string(), value);
                } else {
                    out.remove(field.json);
                }
            }
            Shape::Repeated => {
                let value = value(message, field, field.ty, wire)?;
                let list = out
                    .entry(field.json)
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = list {
                    items.push(value);
                }
            }
            Shape::Map => {
                let (key, value) = map_entry(message, field, wire)?;
                let map = out
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(entries) = map {
                    entries.insert(key, value);
                }
            }
        }
    }
    Ok(out)
}

/// A map entry message `{key = 1, value = 2}`; a missing value is the type's zero value.
fn map_entry(
    message: &'static Message,
    field: &'static Field,
    wire: WireValue<'_>,
) -> Result<(String, Value), ProtobufError> {
    let buf = bytes(message, field, wire)?;
    let mut key = String::new();
    let mut value = None;
    let mut fields = Fields::new(buf);
    while let Some((number, wire)) = fields.next_field()? {
        match number {
            1 => key = string(message, field, bytes(message, field, wire)?)?,
            2 => value = Some(self::value(message, field, field.ty, wire)?),
            _ => {}
        }
    }
    let value = match (value, field.ty) {
        (Some(value), _) => value,
        (None, Ty::Str | Ty::Bytes | Ty::Quantity) => Value::String(String::new()),
        (None, _) => Value::Null,
    };
    Ok((key, value))
}

/// One value of type `ty`.
fn value(
    message: &'static Message,
    field: &'static Field,
    ty: Ty,
    wire: WireValue<'_>,
) -> Result<Value, ProtobufError> {
    Ok(match ty {
        Ty::Str => Value::String(string(message, field, bytes(message, field, wire)?)?),
        Ty::Bytes => Value::String(
            base64::engine::general_purpose::STANDARD.encode(bytes(message, field, wire)?),
        ),
        Ty::Bool => Value::Bool(varint(message, field, wire)? != 0),
        // int32 keeps the low 32 bits of its (sign-extended) varint.
        Ty::Int32 => Value::from(varint(message, field, wire)? as u32 as i32),
        Ty::Int64 => Value::from(varint(message, field, wire)? as i64),
        Ty::Time => time(message, field, bytes(message, field, wire)?)?,
        Ty::Quantity => {
            let mut quantity = String::new();
            let mut fields = Fields::new(bytes(message, field, wire)?);
            while let Some((number, wire)) = fields.next_field()? {
                if number == 1 {
                    quantity = string(message, field, bytes(message, field, wire)?)?;
                }
            }
            Value::String(quantity)
        }
        Ty::IntOrString => int_or_string(message, field, bytes(message, field, wire)?)?,
        Ty::Msg(inner) => Value::Object(self::message(inner, bytes(message, field, wire)?)?),
    })
}

/// `meta.v1.Time`: seconds and nanos since the epoch; the zero time is JSON `null`.
fn time(
    message: &'static Message,
    field: &'static Field,
    buf: &[u8],
) -> Result<Value, ProtobufError> {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    let mut fields = Fields::new(buf);
    while let Some((number, wire)) = fields.next_field()? {
        match number {
            1 => seconds = varint(message, field, wire)? as i64,
            2 => nanos = varint(message, field, wire)? as u32 as i32,
            _ => {}
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    let ts = jiff::Timestamp::new(seconds, nanos).map_err(|_| ProtobufError::Invalid {
        message: message.name,
        field: field.json,
        why: "time out of range",
    })?;
    Ok(Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

/// `intstr.IntOrString`: `type` 0 is `intVal`, 1 is `strVal`.
fn int_or_string(
    message: &'static Message,
    field: &'static Field,
    buf: &[u8],
) -> Result<Value, ProtobufError> {
    let (mut is_string, mut int, mut text) = (false, 0i32, String::new());
    let mut fields = Fields::new(buf);
    while let Some((number, wire)) = fields.next_field()? {
        match number {
            1 => is_string = varint(message, field, wire)? == 1,
            2 => int = varint(message, field, wire)? as u32 as i32,
            3 => text = string(message, field, bytes(message, field, wire)?)?,
            _ => {}
        }
    }
    Ok(if is_string {
        Value::String(text)
    } else {
        Value::from(int)
    })
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Array(_) | Value::Object(_) => false,
    }
}

fn bytes<'a>(
    message: &'static Message,
    field: &'static Field,
    wire: WireValue<'a>,
) -> Result<&'a [u8], ProtobufError> {
    match wire {
        WireValue::Bytes(buf) => Ok(buf),
        other => Err(wrong_type(message, field, other)),
    }
}

fn varint(
    message: &'static Message,
    field: &'static Field,
    wire: WireValue<'_>,
) -> Result<u64, ProtobufError> {
    match wire {
        WireValue::Varint(v) => Ok(v),
        other => Err(wrong_type(message, field, other)),
    }
}

fn string(
    message: &'static Message,
    field: &'static Field,
    buf: &[u8],
) -> Result<String, ProtobufError> {
    std::str::from_utf8(buf)
        .map(str::to_string)
        .map_err(|_| ProtobufError::Invalid {
            message: message.name,
            field: field.json,
            why: "string is not UTF-8",
        })
}

fn wrong_type(
    message: &'static Message,
    field: &'static Field,
    wire: WireValue<'_>,
) -> ProtobufError {
    tracing::debug!(
        message = message.name,
        field = field.json,
        wire = wire.type_name(),
        "unexpected wire type"
    );
    ProtobufError::Invalid {
        message: message.name,
        field: field.json,
        why: "unexpected wire type",
    }
}
