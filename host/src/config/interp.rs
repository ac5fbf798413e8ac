//! `${VAR}` interpolation inside deserialization: a deserializer adapter over the YAML parser
//! that expands the string *values* it produces, never keys, never the text.
//!
//! The structure of the config is therefore the operator's text alone; a variable only ever
//! becomes (part of) one scalar. Typing: a value that is exactly one reference, written as a
//! plain (unquoted) scalar, takes the type YAML gives the variable's text as a plain scalar
//! wherever the field allows more than text (`port: ${PORT}` is a number, an optional
//! `base_url: ${UNSET}` is absent, a free-form `skills.config` value may be a number or a bool);
//! a string field gets the text, and a quoted reference (`"${PORT}"`) is always text.

mod access;
mod scalar;

use super::env::{OPEN, Plain, Vars, restore};
use access::{Enum, Map, Present, Seq};
use scalar::Scalar;
use serde::de::{self, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// How a wrapped visitor treats a string.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A value the field wants as text: expanded.
    Text,
    /// A value the field may take as another type: expanded, a plain whole reference typed.
    Typed,
    /// A mapping key: never interpolated, its placeholders back to `${NAME}` as written.
    Key,
}

/// `de` with its string values interpolated.
pub(super) struct Interp<'v, D> {
    de: D,
    vars: &'v Vars<'v>,
    key: bool,
}

impl<'v, D> Interp<'v, D> {
    /// A deserializer of values.
    pub(super) fn new(de: D, vars: &'v Vars<'v>) -> Self {
        Interp { de, vars, key: false }
    }

    /// A deserializer of mapping keys.
    fn key(de: D, vars: &'v Vars<'v>) -> Self {
        Interp { de, vars, key: true }
    }

    fn wrap<V>(&self, visitor: V, mode: Mode) -> Wrap<'v, V> {
        Wrap { visitor, vars: self.vars, mode: if self.key { Mode::Key } else { mode } }
    }
}

/// Typed requests go through `deserialize_any`: the parser itself rejects `${PORT}` for a
/// `u16` before any visitor sees it.
macro_rules! typed {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            let wrapped = self.wrap(visitor, Mode::Typed);
            self.de.deserialize_any(wrapped)
        }
    )*};
}

macro_rules! text {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            let wrapped = self.wrap(visitor, Mode::Text);
            self.de.$method(wrapped)
        }
    )*};
}

impl<'de, 'v, D: Deserializer<'de>> Deserializer<'de> for Interp<'v, D> {
    type Error = D::Error;

    typed! { deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
    deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128 deserialize_f32
    deserialize_f64 }
    text! { deserialize_char deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf deserialize_unit
    deserialize_seq deserialize_map deserialize_identifier deserialize_ignored_any }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_option(Optional { visitor, vars: self.vars })
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        let wrapped = self.wrap(visitor, Mode::Text);
        self.de.deserialize_unit_struct(name, wrapped)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        let wrapped = self.wrap(visitor, Mode::Text);
        self.de.deserialize_newtype_struct(name, wrapped)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        let wrapped = self.wrap(visitor, Mode::Text);
        self.de.deserialize_tuple(len, wrapped)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let wrapped = self.wrap(visitor, Mode::Text);
        self.de.deserialize_tuple_struct(name, len, wrapped)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let wrapped = self.wrap(visitor, Mode::Text);
        self.de.deserialize_struct(name, fields, wrapped)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let wrapped = self.wrap(visitor, Mode::Text);
        self.de.deserialize_enum(name, variants, wrapped)
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A visitor whose strings are expanded and whose nested values stay wrapped.
struct Wrap<'v, V> {
    visitor: V,
    vars: &'v Vars<'v>,
    mode: Mode,
}

impl<'v, V> Wrap<'v, V> {
    fn string<'de, E: de::Error>(self, value: &str, plain: bool) -> Result<V::Value, E>
    where
        V: Visitor<'de>,
    {
        if self.mode == Mode::Key {
            return self.visitor.visit_string(restore(value).into_owned());
        }
        if self.mode == Mode::Typed
            && plain
            && let Some(text) = self.vars.whole(value)
        {
            return visit_plain(self.visitor, Plain::of(&text), text);
        }
        self.visitor.visit_string(self.vars.expand(value).into_owned())
    }
}

/// Forwards the visits that carry no string unchanged.
macro_rules! forward {
    ($($method:ident: $ty:ty)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, 'v, V: Visitor<'de>> Visitor<'de> for Wrap<'v, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward! { visit_bool: bool visit_i64: i64 visit_u64: u64 visit_i128: i128 visit_u128: u128 visit_f64: f64
    visit_char: char visit_bytes: &[u8] visit_borrowed_bytes: &'de [u8] visit_byte_buf: Vec<u8> }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.string(v, false)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        if !v.contains(OPEN) {
            return self.visitor.visit_borrowed_str(v);
        }
        let plain = self.vars.is_plain(v);
        self.string(v, plain)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        if !v.contains(OPEN) {
            return self.visitor.visit_string(v);
        }
        self.string(&v, false)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Interp::new(d, self.vars))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Interp::new(d, self.vars))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(Seq { seq, vars: self.vars })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(Map { map, vars: self.vars })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(Enum { data, vars: self.vars })
    }
}

/// Visits `text` as what YAML made of it (`plain`).
fn visit_plain<'de, V: Visitor<'de>, E: de::Error>(visitor: V, plain: Plain, text: String) -> Result<V::Value, E> {
    match plain {
        Plain::Null => visitor.visit_unit(),
        Plain::Bool(b) => visitor.visit_bool(b),
        Plain::Unsigned(n) => visitor.visit_u64(n),
        Plain::Signed(n) => visitor.visit_i64(n),
        Plain::Float(f) => visitor.visit_f64(f),
        Plain::Text => visitor.visit_string(text),
    }
}

/// An optional field: `None` for what the parser calls null, and for a plain whole reference
/// whose value YAML would call null (empty, `~`, `null`), as that text written there would be.
struct Optional<'v, V> {
    visitor: V,
    vars: &'v Vars<'v>,
}

impl<'de, 'v, V: Visitor<'de>> Visitor<'de> for Optional<'v, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    /// The parser sees a value; read it first (the only way to look at it), then decide.
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        d.deserialize_any(Present { visitor: self.visitor, vars: self.vars })
    }
}
