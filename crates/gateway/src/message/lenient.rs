//! The building blocks of the message decoders: field names looked up without allocating,
//! and values that read as absent (instead of failing) when the JSON type is unexpected.
//!
//! [`ignore_others!`] fills in the `visit_*` methods a visitor does not handle: each one
//! consumes its input (draining lists and objects) and returns the visitor's default.
//! Most decoded values are an [`Object`] (some known keys of a JSON object) or a [`List`]
//! (the entries of a JSON array folded into one value); [`deserialize_with!`] gives them
//! their `Deserialize` impl, so each states only what it keeps.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess,
    Visitor,
};

pub(super) use serde::de::IgnoredAny as Ignore;

/// Implements the listed kinds of `visit_*` (`bool num str unit seq map`) as "consume and
/// return `Default::default()`".
macro_rules! ignore_others {
    (@ bool) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
    (@ num) => {
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
    (@ str) => {
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
    (@ unit) => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
    (@ seq) => {
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
    (@ map) => {
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(Default::default())
        }
    };
    ($($kind:ident)*) => {
        $( ignore_others!(@ $kind); )*
    };
}
pub(crate) use ignore_others;

/// Implements `Deserialize` for the listed types with `$with` ([`object`] or [`list`]).
macro_rules! deserialize_with {
    ($with:ident: $($ty:ty),+ $(,)?) => {$(
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $with(deserializer)
            }
        }
    )+};
}
pub(crate) use deserialize_with;

/// A value read from some keys of a JSON object: [`object`] starts from the default, reads
/// each key of [`FIELDS`](Object::FIELDS) with [`read`](Object::read) and skips the other
/// keys without building them. Any JSON value but an object reads as the default.
pub(super) trait Object: Default {
    /// What the value is, for decoding errors.
    const EXPECTING: &'static str;
    /// The keys read, by index.
    const FIELDS: &'static [&'static str];
    /// Reads the value of the key `FIELDS[index]` (with `map.next_value`) into `self`.
    fn read<'de, A: MapAccess<'de>>(&mut self, index: usize, map: &mut A) -> Result<(), A::Error>;
}

/// Decodes an [`Object`].
pub(super) fn object<'de, T: Object, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    struct V<T>(PhantomData<T>);
    impl<'de, T: Object> Visitor<'de> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(T::EXPECTING)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            read_object(map)
        }
        ignore_others!(bool num str unit seq);
    }
    deserializer.deserialize_any(V(PhantomData))
}

/// Reads the keys of an object into an [`Object`], for visitors that accept more than an
/// object. With duplicate keys the last one wins.
pub(super) fn read_object<'de, T: Object, A: MapAccess<'de>>(mut map: A) -> Result<T, A::Error> {
    let mut out = T::default();
    while let Some(field) = map.next_key_seed(FieldSeed(T::FIELDS))? {
        match field {
            Some(index) => out.read(index, &mut map)?,
            None => skip(&mut map)?,
        }
    }
    Ok(out)
}

/// Consumes the value of a key that is not read.
pub(super) fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<Ignore>().map(drop)
}

/// A value folded from the entries of a JSON array: [`list`] starts from the default and
/// [`push`](List::push)es each entry decoded as an [`Item`](List::Item). Any JSON value but
/// an array reads as the default.
pub(super) trait List: Default {
    /// What the value is, for decoding errors.
    const EXPECTING: &'static str;
    /// One entry.
    type Item: DeserializeOwned;
    /// Takes in the next entry.
    fn push(&mut self, item: Self::Item);
}

/// Decodes a [`List`].
pub(super) fn list<'de, T: List, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    Listed::deserialize(deserializer).map(|listed| listed.0.unwrap_or_default())
}

/// A [`List`] when the JSON value is an array, `None` for any other value: tells a list
/// that is absent (or of another type) from an empty one.
pub(super) struct Listed<T>(pub Option<T>);

impl<'de, T: List> Deserialize<'de> for Listed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: List> Visitor<'de> for V<T> {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::EXPECTING)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
                let mut out = T::default();
                while let Some(item) = seq.next_element::<T::Item>()? {
                    out.push(item);
                }
                Ok(Some(out))
            }
            ignore_others!(bool num str unit map);
        }
        deserializer.deserialize_any(V(PhantomData)).map(Listed)
    }
}

/// Reads an object key as its index in a list of known names (`None` = another key).
pub(super) struct FieldSeed(pub &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|name| *name == v))
    }
}

/// A string, or `None` for any other JSON value.
#[derive(Default)]
pub(super) struct LenientStr(pub Option<String>);

impl<'de> Deserialize<'de> for LenientStr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientStr, E> {
                Ok(LenientStr(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<LenientStr, E> {
                Ok(LenientStr(Some(v)))
            }
            ignore_others!(bool num unit seq map);
        }
        deserializer.deserialize_any(V)
    }
}

/// `true` only for JSON `true`.
#[derive(Default)]
pub(super) struct LenientBool(pub bool);

impl<'de> Deserialize<'de> for LenientBool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientBool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LenientBool, E> {
                Ok(LenientBool(v))
            }
            ignore_others!(num str unit seq map);
        }
        deserializer.deserialize_any(V)
    }
}

/// A non-negative integer that fits `u32`, or `None`.
#[derive(Default)]
pub(super) struct LenientU32(pub Option<u32>);

impl<'de> Deserialize<'de> for LenientU32 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientU32;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a count")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientU32, E> {
                Ok(LenientU32(u32::try_from(v).ok()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LenientU32, E> {
                Ok(LenientU32(u32::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<LenientU32, E> {
                Ok(LenientU32(None))
            }
            ignore_others!(bool str unit seq map);
        }
        deserializer.deserialize_any(V)
    }
}

/// The strings of a list (other entries skipped); empty for anything but a list.
#[derive(Default)]
pub(super) struct Strings(pub Vec<String>);

impl List for Strings {
    const EXPECTING: &'static str = "a list of strings";
    type Item = LenientStr;
    fn push(&mut self, item: LenientStr) {
        self.0.extend(item.0);
    }
}

deserialize_with!(list: Strings);
