//! A request's body as Go's decoder reads it: its first JSON value, and its object's keys as
//! they came (each key and value in the body's order, a key that comes twice kept twice, where
//! serde_json's own `Value` keeps the last), so that each occurrence can be bound as Go binds it.

use super::fold;
use crate::error::ApiError;
use crate::gotype::json_kind;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// A request's body as Go's decoder binds it: its object (keys folded to the fields they name,
/// [`fold`]; each field's last value, at the place of its first key), and, where some field's
/// key came more than once, every key in the body's order with the value of each but the last
/// ([`Fields::bound`] checks each occurrence as Go decodes each: on Ollama 0.33
/// `{"model": 1, "model": "tiny"}` is refused for the first).
#[derive(Debug, Default)]
pub(crate) struct Body {
    pub(crate) map: Map<String, Value>,
    /// Each key in the body's order, folded, with its value where a later key names the same
    /// field (`None`: its value is the one in `map`); empty where no field came twice.
    pub(super) order: Vec<(String, Option<Value>)>,
    /// The same for each element of `messages` in which a field came twice, by its index (a
    /// message is a Go struct too: on Ollama 0.33 `{"role": 1, "role": "user"}` in a message
    /// is refused for the first).
    pub(super) message_order: Vec<(usize, Vec<(String, Option<Value>)>)>,
}

impl Body {
    /// Whether some field's key came more than once.
    pub(crate) fn repeats(&self) -> bool {
        !self.order.is_empty()
    }

    /// Each key in the body's order with the value it had there (the object's own entries
    /// where no field came twice).
    pub(crate) fn occurrences(&self) -> impl Iterator<Item = (&String, &Value)> {
        places(&self.map, &self.order).filter_map(|(k, earlier)| Some((k, earlier.or_else(|| self.map.get(k))?)))
    }

    fn of(
        entries: Vec<(String, Value)>,
        go_type: &str,
        message_order: Vec<(usize, Vec<(String, Option<Value>)>)>,
    ) -> Body {
        // Each earlier occurrence folded below it as the field's value in the object is.
        let fold_value = |k: &str, v: Value| {
            fold::request(Map::from_iter([(k.to_string(), v)]), go_type).remove(k).unwrap_or(Value::Null)
        };
        let order = repeated(&entries)
            .map(|o| o.into_iter().map(|(k, v)| (k.clone(), v.map(|v| fold_value(&k, v)))).collect())
            .unwrap_or_default();
        Body { map: fold::request(entries.into_iter().collect(), go_type), order, message_order }
    }
}

/// An object's keys in order, folded, each with its value where a later key folds to the same
/// (`None`: the last, whose value the object holds); `None` where no key came twice.
fn repeated(entries: &[(String, Value)]) -> Option<Vec<(String, Option<Value>)>> {
    let keys: Vec<std::borrow::Cow<'_, str>> = entries.iter().map(|(k, _)| crate::gotype::folded(k)).collect();
    let twice = keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k));
    twice.then(|| {
        entries
            .iter()
            .zip(&keys)
            .enumerate()
            .map(|(i, ((_, v), k))| (k.to_string(), keys[i + 1..].contains(k).then(|| v.clone())))
            .collect()
    })
}

/// A body's keys in the body's order (`map`'s own where `order` is empty: no field came
/// twice), each with its value where it is not its field's last key (`None`: `map` holds it).
pub(super) fn places<'a>(
    map: &'a Map<String, Value>,
    order: &'a [(String, Option<Value>)],
) -> impl Iterator<Item = (&'a String, Option<&'a Value>)> {
    let plain = order.is_empty().then(|| map.keys().map(|k| (k, None)));
    plain.into_iter().flatten().chain(order.iter().map(|(k, earlier)| (k, earlier.as_ref())))
}

/// Decodes a body to a JSON object, or the error the real server gives (`go_type` with its
/// package: `api.GenerateRequest`, `openai.EmbedRequest`; `empty`: the text for no body).
pub(crate) fn decode_body(body: &[u8], go_type: &str, empty: &str) -> Result<Body, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(empty));
    }
    let mut stream = serde_json::Deserializer::from_slice(body).into_iter::<Top>();
    match stream.next() {
        None => Err(ApiError::bad_request(empty)),
        Some(Ok(Top::Object(entries, messages))) => Ok(Body::of(entries, go_type, messages)),
        Some(Ok(Top::Other(Value::Null))) => Ok(Body::default()),
        Some(Ok(other)) => Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type {go_type}",
            json_kind(&other.into_value())
        ))),
        // serde_json refuses what Go's scanner accepts only past Go's own limits (nesting).
        Some(Err(e)) => {
            Err(ApiError::bad_request(crate::goscan::syntax_error(body, false).unwrap_or_else(|| e.to_string())))
        }
    }
}

/// Each element of `messages` in which a key came twice, by its index: its keys in order.
type MessageOrders = Vec<(usize, Vec<(String, Option<Value>)>)>;

/// An object's entries in order (and, of its `messages`, each element's keys in order where
/// one came twice: [`Body::message_order`]), an array's elements read so, or any other value.
enum Top {
    Object(Vec<(String, Value)>, MessageOrders),
    Array(Vec<Top>),
    Other(Value),
}

impl Top {
    fn into_value(self) -> Value {
        match self {
            // A key that came twice: the last value, at the first key's place (as `Value`'s own).
            Top::Object(entries, _) => Value::Object(entries.into_iter().collect()),
            Top::Array(items) => Value::Array(items.into_iter().map(Top::into_value).collect()),
            Top::Other(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Top, A::Error> {
        let (mut entries, mut messages) = (Vec::new(), Vec::new());
        while let Some(key) = m.next_key::<String>()? {
            // A message's keys in order: the elements of `messages`, read as `Top`.
            let value = if crate::gotype::folded(&key) == "messages" {
                let read = m.next_value::<Top>()?;
                if let Top::Array(items) = &read {
                    messages = items
                        .iter()
                        .enumerate()
                        .filter_map(|(i, t)| match t {
                            Top::Object(e, _) => repeated(e).map(|o| (i, o)),
                            _ => None,
                        })
                        .collect();
                }
                read.into_value()
            } else {
                m.next_value::<Value>()?
            };
            entries.push((key, value));
        }
        Ok(Top::Object(entries, messages))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Top, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = s.next_element::<Top>()? {
            items.push(item);
        }
        Ok(Top::Array(items))
    }

    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::Other(Value::Null))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Top, E> {
        Ok(Top::Other(Value::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Top, E> {
        Ok(Top::Other(Value::from(n)))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Top, E> {
        Ok(Top::Other(Value::from(n)))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Top, E> {
        Ok(Top::Other(Value::from(n)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Top, E> {
        Ok(Top::Other(Value::String(s.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(r: Result<Body, ApiError>) -> String {
        r.unwrap_err().message
    }

    #[test]
    fn keys_bind_to_fields_ignoring_case_where_go_reads_a_struct_and_maps_keep_theirs() {
        // As on Ollama 0.33: an untagged Go struct's keys reach the fields; the options map's
        // `Num_Predict` is no option; `ſtream` (the long s) folds to `stream`.
        let body = r#"{"Model":"tiny","ſtream":false,"Options":{"Num_Predict":3},"Messages":[{"Role":"user","Content":"hi","Tool_Calls":[{"Function":{"Name":"f","Arguments":{"A":1}}}]}]}"#;
        let m = decode_body(body.as_bytes(), "api.ChatRequest", "missing request body").unwrap().map;
        assert_eq!(
            Value::Object(m),
            json!({"model":"tiny","stream":false,"options":{"Num_Predict":3},"messages":[{"role":"user","content":"hi","tool_calls":[{"function":{"name":"f","arguments":{"A":1}}}]}]})
        );
        // A tool's parameters are a struct, its properties a map of names.
        let body = br#"{"tools":[{"Type":"function","Function":{"Name":"f","Parameters":{"Type":"object","Properties":{"Path":{"type":"string"}}}}}]}"#;
        let m = decode_body(body, "api.ChatRequest", "x").unwrap().map;
        assert_eq!(
            Value::Object(m),
            json!({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"Path":{"type":"string"}}}}}]})
        );
        // An OpenAI message's content parts are an `any` (maps): their keys stay.
        let body = br#"{"Model":"tiny","Messages":[{"Role":"user","Content":[{"Type":"text","Text":"hi"}]}]}"#;
        let m = decode_body(body, "openai.ChatCompletionRequest", "EOF").unwrap().map;
        assert_eq!(
            Value::Object(m),
            json!({"model":"tiny","messages":[{"role":"user","content":[{"Type":"text","Text":"hi"}]}]})
        );
        // Anthropic's content blocks are structs, a tool_use's input a map.
        let body = br#"{"Messages":[{"Content":[{"Type":"tool_use","Input":{"Q":1}}]}]}"#;
        let m = decode_body(body, "anthropic.MessagesRequest", "EOF").unwrap().map;
        assert_eq!(Value::Object(m), json!({"messages":[{"content":[{"type":"tool_use","input":{"Q":1}}]}]}));
        // Two keys naming one field: the last one's value, at the first one's place.
        let m = decode_body(br#"{"MODEL":"a","prompt":"p","model":"b"}"#, "api.GenerateRequest", "x").unwrap().map;
        assert_eq!(m.keys().collect::<Vec<_>>(), ["model", "prompt"]);
        assert_eq!(m["model"], "b");
    }

    #[test]
    fn a_key_twice_in_a_message_is_kept_in_order_and_the_message_holds_the_last() {
        let body = br#"{"messages":[{"role":"user","content":"a"},{"Role":1,"content":"hi","role":"user"}]}"#;
        let b = decode_body(body, "api.ChatRequest", "x").unwrap();
        assert_eq!(b.map["messages"][1], json!({"role":"user","content":"hi"}));
        assert_eq!(
            b.message_order,
            vec![(1, vec![("role".into(), Some(json!(1))), ("content".into(), None), ("role".into(), None)])]
        );
        assert!(b.order.is_empty(), "no top-level field came twice");
        // A body that is an array is still Go's error for one.
        assert_eq!(
            msg(decode_body(br#"[{"a":1,"a":2}]"#, "api.ChatRequest", "x")),
            "json: cannot unmarshal array into Go value of type api.ChatRequest"
        );
    }

    #[test]
    fn body_errors_match_the_real_server() {
        assert_eq!(msg(decode_body(b"", "api.GenerateRequest", "missing request body")), "missing request body");
        assert_eq!(msg(decode_body(b"  \n", "api.GenerateRequest", "missing request body")), "missing request body");
        assert_eq!(
            msg(decode_body(br#"{"model":"tiny","prompt":"#, "api.GenerateRequest", "missing request body")),
            "unexpected EOF"
        );
        assert_eq!(
            msg(decode_body(b"xyz", "api.GenerateRequest", "missing request body")),
            "invalid character 'x' looking for beginning of value"
        );
        assert_eq!(
            msg(decode_body(b"[1]", "api.GenerateRequest", "missing request body")),
            "json: cannot unmarshal array into Go value of type api.GenerateRequest"
        );
        assert!(decode_body(b"null", "api.GenerateRequest", "missing request body").unwrap().map.is_empty());
        // Like Go's decoder, only the first value is read.
        assert!(decode_body(br#"{"model":"a"} trailing"#, "api.GenerateRequest", "missing request body").is_ok());
    }
}
