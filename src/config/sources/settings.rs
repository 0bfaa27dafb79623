//! Reading one kind's settings out of a source's JSON object, with errors that name the setting:
//! serde does the reading; this file only words its errors.

use serde::de::{self, DeserializeOwned, Visitor};

pub(super) use crate::config::typed;

/// The settings every kind reads, beside its own.
pub(super) const COMMON: [&str; 3] = ["max_body_bytes", "long_key_retention", "replay_guard"];

/// `kind`'s settings `T` (a struct that denies unknown fields), read from `object`. A setting
/// `T` does not have is refused by name, with the settings the kind does read.
pub(super) fn kind_settings<T: DeserializeOwned>(
    kind: &str,
    object: serde_json::Map<String, serde_json::Value>,
) -> Result<T, String> {
    let own = field_names::<T>();
    if let Some(unknown) = object.keys().find(|k| !own.contains(&k.as_str())) {
        let reads: Vec<&str> = own.iter().chain(&COMMON).copied().collect();
        return Err(format!(
            "{unknown} does not apply to kind {kind} (it reads {})",
            reads.join(", ")
        ));
    }
    typed(object)
}

/// The field names of the struct `T`, as its derived `Deserialize` declares them.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

/// A deserializer that records the field names a struct asks for, and reads nothing.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
