//! `JsonNode`: a JSON tree that borrows its strings from the request body, for the hot request
//! bodies (`/api/call/start`). Parsing the Python client's call reports into
//! `serde_json::Value` allocates every key, string and map; a `JsonNode` allocates only its arrays,
//! objects and numbers, and the handler copies what it keeps. Objects keep their keys in the
//! order sent; a key sent twice keeps its first place and its last value, as
//! `serde_json::Map` does. Pure: no I/O.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// A JSON value whose strings may borrow from the text it was parsed from.
#[derive(Clone, Debug, PartialEq)]
pub enum JsonNode<'a> {
    Null,
    Bool(bool),
    Num(Number),
    Str(Cow<'a, str>),
    Arr(Vec<JsonNode<'a>>),
    Obj(Vec<(Cow<'a, str>, JsonNode<'a>)>),
}

/// How serde_json hands a number over with its `arbitrary_precision` feature: a one-entry map
/// with this key and the number's text. The key is private to serde_json (`number::TOKEN`,
/// `pub(crate)`), and no public API recognises it: `Number`'s and `Value`'s own visitors
/// compare against it inside the crate, and `Number::from_string_unchecked` is hidden and
/// "not public API". The alternatives cost more than they save: deserializing into `Value`
/// is the allocation this module exists to avoid, and learning the key at run time from
/// `Number`'s `Serialize` relies on the same private encoding. So the key is written here and
/// `serde_jsons_private_number_token_is_still_the_one_node_reads` fails the build's tests if a
/// serde_json release changes it.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Objects with more keys than this find duplicate keys through a hash map.
const LINEAR_KEYS: usize = 16;

/// The strings of a JSON array, in order (other items skipped; no array: none).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl<'a> JsonNode<'a> {
    /// Parses JSON text; strings without escapes borrow from it.
    pub fn parse(text: &'a [u8]) -> Result<JsonNode<'a>, serde_json::Error> {
        serde_json::from_slice(text)
    }

    /// The same value, owning its strings.
    pub fn from_value(v: Value) -> JsonNode<'static> {
        match v {
            Value::Null => JsonNode::Null,
            Value::Bool(b) => JsonNode::Bool(b),
            Value::Number(n) => JsonNode::Num(n),
            Value::String(s) => JsonNode::Str(Cow::Owned(s)),
            Value::Array(a) => JsonNode::Arr(a.into_iter().map(JsonNode::from_value).collect()),
            Value::Object(m) => JsonNode::Obj(
                m.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), JsonNode::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// A field of an object (`None` for other nodes and missing keys).
    pub fn get(&self, key: &str) -> Option<&JsonNode<'a>> {
        match self {
            JsonNode::Obj(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonNode::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, JsonNode::Null)
    }

    /// The same value as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        match self {
            JsonNode::Null => Value::Null,
            JsonNode::Bool(b) => Value::Bool(*b),
            JsonNode::Num(n) => Value::Number(n.clone()),
            JsonNode::Str(s) => Value::String(s.to_string()),
            JsonNode::Arr(a) => Value::Array(a.iter().map(JsonNode::to_value).collect()),
            JsonNode::Obj(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }

    /// Whether this node and a `Value` are the same JSON, keys in the same order.
    pub fn same_as(&self, v: &Value) -> bool {
        match (self, v) {
            (JsonNode::Null, Value::Null) => true,
            (JsonNode::Bool(a), Value::Bool(b)) => a == b,
            (JsonNode::Num(a), Value::Number(b)) => a == b,
            (JsonNode::Str(a), Value::String(b)) => a == b,
            (JsonNode::Arr(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_as(y))
            }
            (JsonNode::Obj(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((ka, va), (kb, vb))| ka == kb && va.same_as(vb))
            }
            _ => false,
        }
    }
}

impl fmt::Display for JsonNode<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_value(), f)
    }
}

/// Written as the JSON it stands for, without building a `Value` first.
impl Serialize for JsonNode<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            JsonNode::Null => s.serialize_unit(),
            JsonNode::Bool(b) => s.serialize_bool(*b),
            JsonNode::Num(n) => n.serialize(s),
            JsonNode::Str(t) => s.serialize_str(t),
            JsonNode::Arr(a) => s.collect_seq(a),
            JsonNode::Obj(entries) => s.collect_map(entries.iter().map(|(k, v)| (&**k, v))),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonNode<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JsonNode<'a>, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

/// A key or string: borrowed when the text has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = JsonNode<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Null)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Num(n.into()))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Num(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<JsonNode<'de>, E> {
        Ok(Number::from_f64(n).map_or(JsonNode::Null, JsonNode::Num))
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<JsonNode<'de>, E> {
        Ok(JsonNode::Str(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonNode<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(x) = seq.next_element()? {
            items.push(x);
        }
        Ok(JsonNode::Arr(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonNode<'de>, A::Error> {
        let mut entries: Vec<(Cow<'de, str>, JsonNode<'de>)> = Vec::new();
        let mut index: Option<HashMap<String, usize>> = None;
        while let Some(Text(key)) = map.next_key()? {
            if entries.is_empty() && key == NUMBER_TOKEN {
                let text: String = map.next_value()?;
                return text.parse().map(JsonNode::Num).map_err(de::Error::custom);
            }
            let value: JsonNode<'de> = map.next_value()?;
            // A repeated key keeps its first place and takes the last value.
            let found = match &mut index {
                Some(ix) => ix.get(&*key).copied(),
                None => entries.iter().position(|(k, _)| *k == key),
            };
            match found {
                Some(i) => entries[i].1 = value,
                None => {
                    if let Some(ix) = &mut index {
                        ix.insert(key.to_string(), entries.len());
                    }
                    entries.push((key, value));
                    if index.is_none() && entries.len() > LINEAR_KEYS {
                        let ix = entries
                            .iter()
                            .enumerate()
                            .map(|(i, (k, _))| (k.to_string(), i))
                            .collect();
                        index = Some(ix);
                    }
                }
            }
        }
        Ok(JsonNode::Obj(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_to_the_same_json_as_value_and_borrows_plain_strings() {
        let text = br#"{"a": [1, -2, 3.5, 1e400, 123456789012345678901234567890, true, null],
            "b": {"c": "plain", "d": "esc\"aped\u00e9"}, "": {}}"#;
        let node = JsonNode::parse(text).unwrap();
        let value: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(node.to_value(), value);
        assert!(node.same_as(&value));
        assert!(matches!(
            node.get("b").and_then(|b| b.get("c")),
            Some(JsonNode::Str(Cow::Borrowed("plain")))
        ));
        assert_eq!(
            node.get("b").unwrap().get("d").unwrap().as_str(),
            Some("esc\"aped\u{e9}")
        );
        assert_eq!(
            node.to_value()["a"][4].to_string(),
            "123456789012345678901234567890"
        );
        assert_eq!(JsonNode::from_value(value.clone()), node);
    }

    #[test]
    fn repeated_keys_keep_their_first_place_and_last_value_like_a_map() {
        for n in [3, LINEAR_KEYS + 5] {
            let mut text = String::from("{");
            for i in 0..n {
                text.push_str(&format!("\"k{i}\": {i}, "));
            }
            text.push_str("\"k1\": \"again\", \"k0\": [0]}");
            let node = JsonNode::parse(text.as_bytes()).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(node.to_value(), value);
            assert!(node.same_as(&value));
            assert_eq!(node.get("k1").and_then(JsonNode::as_str), Some("again"));
        }
    }

    #[test]
    fn serde_jsons_private_number_token_is_still_the_one_node_reads() {
        // If serde_json renamed its number token, numbers would arrive as one-entry objects.
        let wide = "123456789012345678901234567890";
        for text in [
            wide.to_owned(),
            format!("[{wide}]"),
            format!("{{\"n\": {wide}}}"),
        ] {
            let node = JsonNode::parse(text.as_bytes()).unwrap();
            let num = match &node {
                JsonNode::Arr(items) => &items[0],
                JsonNode::Obj(entries) => &entries[0].1,
                n => n,
            };
            assert!(
                matches!(num, JsonNode::Num(n) if n.to_string() == wide),
                "{text}: {num:?}"
            );
        }
        let float = JsonNode::parse(b"-0.5e3").unwrap();
        assert!(matches!(float, JsonNode::Num(_)), "{float:?}");
        assert_eq!(
            float.to_value(),
            serde_json::from_str::<Value>("-0.5e3").unwrap()
        );
    }

    #[test]
    fn order_and_shape_matter_for_sameness() {
        let node = JsonNode::parse(br#"{"a": 1, "b": 2}"#).unwrap();
        assert!(node.same_as(&json!({"a": 1, "b": 2})));
        assert!(!node.same_as(&json!({"b": 2, "a": 1})));
        assert!(!node.same_as(&json!({"a": 1})));
        assert!(!node.same_as(&json!([1, 2])));
        assert!(!JsonNode::parse(b"1").unwrap().same_as(&json!(1.0)));
    }
}
