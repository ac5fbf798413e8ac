//! The wrapped accessors of [`super::Interp`]: lists, mappings (values only: keys are never
//! interpolated), enums, and the value behind an optional field.

use super::{Interp, Mode, Scalar, Wrap};
use crate::config::env::{Plain, Vars};
use serde::de::value::{EnumAccessDeserializer, MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use std::fmt;

/// A seed whose deserializer is wrapped, for a value or (`key`) a mapping key.
struct Seed<'v, S> {
    seed: S,
    vars: &'v Vars<'v>,
    key: bool,
}

impl<'v, S> Seed<'v, S> {
    fn value(seed: S, vars: &'v Vars<'v>) -> Self {
        Seed { seed, vars, key: false }
    }
}

impl<'de, 'v, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<'v, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        let wrapped = if self.key { Interp::key(d, self.vars) } else { Interp::new(d, self.vars) };
        self.seed.deserialize(wrapped)
    }
}

/// A list whose items are wrapped.
pub(super) struct Seq<'v, A> {
    pub(super) seq: A,
    pub(super) vars: &'v Vars<'v>,
}

impl<'de, 'v, A: SeqAccess<'de>> SeqAccess<'de> for Seq<'v, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.seq.next_element_seed(Seed::value(seed, self.vars))
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// A mapping whose values are interpolated; its keys are the operator's text, as written.
pub(super) struct Map<'v, A> {
    pub(super) map: A,
    pub(super) vars: &'v Vars<'v>,
}

impl<'de, 'v, A: MapAccess<'de>> MapAccess<'de> for Map<'v, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.map.next_key_seed(Seed { seed, vars: self.vars, key: true })
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.map.next_value_seed(Seed::value(seed, self.vars))
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// An enum value: its variant name is a value (`provider: ${PROVIDER}`), so it is wrapped too.
pub(super) struct Enum<'v, A> {
    pub(super) data: A,
    pub(super) vars: &'v Vars<'v>,
}

impl<'de, 'v, A: EnumAccess<'de>> EnumAccess<'de> for Enum<'v, A> {
    type Error = A::Error;
    type Variant = Variant<'v, A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.data.variant_seed(Seed::value(seed, self.vars))?;
        Ok((value, Variant { variant, vars: self.vars }))
    }
}

pub(super) struct Variant<'v, A> {
    variant: A,
    vars: &'v Vars<'v>,
}

impl<'de, 'v, A: VariantAccess<'de>> VariantAccess<'de> for Variant<'v, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.variant.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.variant.newtype_variant_seed(Seed::value(seed, self.vars))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.variant.tuple_variant(len, Wrap { visitor, vars: self.vars, mode: Mode::Text })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.variant.struct_variant(fields, Wrap { visitor, vars: self.vars, mode: Mode::Text })
    }
}

/// The value of an optional field the parser found present, read once to decide between
/// `None` (a plain whole reference to a null-like value) and `Some` of what it holds.
pub(super) struct Present<'v, V> {
    pub(super) visitor: V,
    pub(super) vars: &'v Vars<'v>,
}

impl<'v, V> Present<'v, V> {
    fn string<'de, E: de::Error>(self, value: &str, plain: bool) -> Result<V::Value, E>
    where
        V: Visitor<'de>,
    {
        if plain && let Some(text) = self.vars.whole(value) {
            return match Plain::of(&text) {
                Plain::Null => self.visitor.visit_none(),
                typed => self.visitor.visit_some(Scalar::new(text, Some(typed))),
            };
        }
        self.visitor.visit_some(Scalar::new(self.vars.expand(value).into_owned(), None))
    }

    /// A literal the parser typed: its text for a string field, its type for the others.
    fn literal<'de, E: de::Error>(self, text: String, plain: Plain) -> Result<V::Value, E>
    where
        V: Visitor<'de>,
    {
        self.visitor.visit_some(Scalar::new(text, Some(plain)))
    }
}

impl<'de, 'v, V: Visitor<'de>> Visitor<'de> for Present<'v, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.literal(v.to_string(), Plain::Bool(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.literal(v.to_string(), Plain::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.literal(v.to_string(), Plain::Signed(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.literal(v.to_string(), Plain::Float(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<V::Value, E> {
        self.literal(v.to_string(), Plain::Text)
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<V::Value, E> {
        self.literal(v.to_string(), Plain::Text)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.string(v, false)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        let plain = self.vars.is_plain(v);
        self.string(v, plain)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.string(&v, false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Interp::new(d, self.vars))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_some(SeqAccessDeserializer::new(Seq { seq, vars: self.vars }))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_some(MapAccessDeserializer::new(Map { map, vars: self.vars }))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_some(EnumAccessDeserializer::new(Enum { data, vars: self.vars }))
    }
}
