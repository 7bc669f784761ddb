//! The YAML tree as serde sees it: a `Deserializer` over `yaml-rust2`'s values, so the
//! config's types are plain serde-derived structs. It adds two rules of the file to
//! serde's: a known key whose value is null is absent (its default applies), and a
//! problem with a scalar quotes the value as written (`2.5`, `.inf`, `"four"`).

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use yaml_rust2::yaml::Hash;
use yaml_rust2::Yaml;

/// What was wrong with one value; its key's path is added by the caller.
#[derive(Debug)]
pub enum Problem {
    /// A sentence of its own.
    Message(String),
    /// `expected <what>, got <value>`.
    Expected { expected: String, got: String },
}

impl Problem {
    /// The value as the file wrote it, in place of serde's rendering of it.
    fn quoting(self, value: &Yaml) -> Problem {
        match self {
            Problem::Expected { expected, .. } => Problem::Expected {
                expected,
                got: describe(value),
            },
            other => other,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Message(message) => f.write_str(message),
            Problem::Expected { expected, got } => write!(f, "expected {expected}, got {got}"),
        }
    }
}

impl std::error::Error for Problem {}

impl de::Error for Problem {
    fn custom<T: fmt::Display>(message: T) -> Problem {
        Problem::Message(message.to_string())
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Problem {
        Problem::Expected {
            expected: expected.to_string(),
            got: match unexpected {
                Unexpected::Str(s) => format!("{s:?}"),
                Unexpected::Unit => "null".to_owned(),
                Unexpected::Seq => "a list".to_owned(),
                Unexpected::Map => "a mapping".to_owned(),
                other => other.to_string(),
            },
        }
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Problem {
        Problem::invalid_type(unexpected, expected)
    }
}

/// A value as an error message quotes it.
pub fn describe(value: &Yaml) -> String {
    match value {
        Yaml::String(s) => format!("{s:?}"),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".to_owned(),
        Yaml::Array(_) => "a list".to_owned(),
        Yaml::Hash(_) => "a mapping".to_owned(),
        Yaml::Alias(_) | Yaml::BadValue => "an invalid value".to_owned(),
    }
}

/// One value of the tree; `root` marks the document itself, whose error names the
/// sections it may hold.
pub struct Node<'a> {
    pub value: &'a Yaml,
    pub root: bool,
}

impl<'a> Node<'a> {
    fn of(value: &'a Yaml) -> Node<'a> {
        Node { value, root: false }
    }
}

impl<'de> de::Deserializer<'de> for Node<'_> {
    type Error = Problem;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        let value = self.value;
        let visited: Result<V::Value, Problem> = match value {
            Yaml::Array(items) => return visitor.visit_seq(Items(items.iter())),
            Yaml::Hash(hash) => return visitor.visit_map(Entries::new(hash, None)),
            Yaml::String(s) => visitor.visit_str(s),
            Yaml::Integer(n) => visitor.visit_i64(*n),
            Yaml::Real(text) => {
                visitor.visit_f64(value.as_f64().unwrap_or_else(|| text.parse().unwrap_or(f64::NAN)))
            }
            Yaml::Boolean(b) => visitor.visit_bool(*b),
            Yaml::Null | Yaml::Alias(_) | Yaml::BadValue => visitor.visit_unit(),
        };
        visited.map_err(|problem| problem.quoting(value))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.value {
            Yaml::Null | Yaml::BadValue => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    /// A section: a mapping, or null for an empty one.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Problem> {
        static EMPTY: std::sync::OnceLock<Hash> = std::sync::OnceLock::new();
        match self.value {
            Yaml::Hash(hash) => visitor.visit_map(Entries::new(hash, Some(fields))),
            Yaml::Null | Yaml::BadValue => {
                visitor.visit_map(Entries::new(EMPTY.get_or_init(Hash::new), Some(fields)))
            }
            other => Err(Problem::Expected {
                expected: if self.root {
                    format!("a mapping of sections ({})", fields.join(", "))
                } else {
                    "a mapping".to_owned()
                },
                got: describe(other),
            }),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

struct Items<'a>(std::slice::Iter<'a, Yaml>);

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = Problem;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Problem> {
        self.0
            .next()
            .map(|item| seed.deserialize(Node::of(item)))
            .transpose()
    }
}

/// The entries of a mapping in file order. A section's keys reach serde as text (a key
/// that is not a string as its value, `3`, `null`, so its warning can name it).
struct Entries<'a> {
    entries: Box<dyn Iterator<Item = (&'a Yaml, &'a Yaml)> + 'a>,
    fields: Option<&'static [&'static str]>,
    value: Option<&'a Yaml>,
}

impl<'a> Entries<'a> {
    fn new(hash: &'a Hash, fields: Option<&'static [&'static str]>) -> Entries<'a> {
        Entries {
            entries: Box::new(hash.iter()),
            fields,
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Problem;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Problem> {
        for (key, value) in self.entries.by_ref() {
            let Some(fields) = self.fields else {
                self.value = Some(value);
                return seed.deserialize(Node::of(key)).map(Some);
            };
            let name = match key {
                Yaml::String(name) => name.clone(),
                other => describe(other),
            };
            // Null means "the default" for a known key; an unknown one stays, for its warning.
            if matches!(value, Yaml::Null) && fields.contains(&name.as_str()) {
                continue;
            }
            self.value = Some(value);
            return seed.deserialize(name.into_deserializer()).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Problem> {
        let value = self
            .value
            .take()
            .ok_or_else(|| Problem::Message("a value was read before its key".to_owned()))?;
        seed.deserialize(Node::of(value))
    }
}
