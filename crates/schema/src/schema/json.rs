//! A borrowed JSON tree. `serde_json::Value` allocates every string and key and builds a
//! map per object; this keeps strings as slices of the input line (unless they contain
//! escapes) and objects as small vectors, which is what makes per-line decoding cheap.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    /// Any integer that fits in i64.
    Int(i64),
    /// Integers above `i64::MAX`.
    BigUint(u64),
    Float(f64),
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Members in source order; duplicates are kept so the caller can reject them.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl Json<'_> {
    /// Parse one JSON document borrowing from `text`.
    /// A UTF-8 byte-order mark before it (an editor's, at the start of a file) is
    /// skipped.
    pub fn parse(text: &str) -> Result<Json<'_>, serde_json::Error> {
        serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text))
    }

    /// Short description for "found …" messages: kind plus the value when it is short.
    pub fn describe(&self) -> String {
        match self {
            Json::Null => "null".to_owned(),
            Json::Bool(value) => format!("boolean {value}"),
            Json::Int(value) => format!("number {value}"),
            Json::BigUint(value) => format!("number {value}"),
            Json::Float(value) => format!("number {value}"),
            Json::Str(text) => format!("string {}", quote(text)),
            Json::Array(items) if items.len() == 1 => "array of 1 item".to_owned(),
            Json::Array(items) => format!("array of {} items", items.len()),
            Json::Object(_) => "object".to_owned(),
        }
    }
}

/// Quote a user value for a message, cutting long ones so a reject stays one readable line.
/// A name from the input (a type, a key) as every message names things: in backticks,
/// control characters escaped, cut at 60 characters.
pub(crate) fn quote_name(text: &str) -> String {
    const MAX_CHARS: usize = 60;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("`{}`…", text[..cut].escape_debug()),
        None => format!("`{}`", text.escape_debug()),
    }
}

pub(crate) fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 60;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(Json::Int(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(value).map_or(Json::BigUint(value), Json::Int))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        Ok(Json::Float(value))
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Owned(text)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(Key(key)) = map.next_key()? {
            members.push((key, map.next_value()?));
        }
        Ok(Json::Object(members))
    }
}

/// An object key, borrowed when it has no escapes (`Cow<str>`'s own impl always copies).
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(text)))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}
