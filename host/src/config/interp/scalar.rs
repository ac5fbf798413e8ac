//! A scalar the adapter has already read (to decide an optional field), handed on as a
//! deserializer of its own.

use super::visit_plain;
use crate::config::env::Plain;
use serde::de::{self, Deserializer, IntoDeserializer, Visitor};
use std::marker::PhantomData;

/// A scalar already read: its text, and its type when it may be typed (a literal the parser
/// typed, or a plain whole reference). A string field gets the text either way.
pub(super) struct Scalar<E> {
    text: String,
    plain: Option<Plain>,
    error: PhantomData<E>,
}

impl<E> Scalar<E> {
    pub(super) fn new(text: String, plain: Option<Plain>) -> Self {
        Scalar { text, plain, error: PhantomData }
    }
}

impl<'de, E: de::Error> Deserializer<'de> for Scalar<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.plain {
            Some(plain) => visit_plain(visitor, plain, self.text),
            None => visitor.visit_string(self.text),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_string(self.text)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_string(self.text)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_string(self.text)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.plain {
            Some(Plain::Null) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, E> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        visitor.visit_enum(self.text.into_deserializer())
    }

    serde::forward_to_deserialize_any! { bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 bytes byte_buf unit
    unit_struct seq tuple tuple_struct map struct identifier ignored_any }
}
