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
    /// Where a key came twice in a struct below the top and its messages (a tool call's
    /// `function`, `stream_options`): for each of its earlier occurrences, the top-level field
    /// it is in (folded) with that occurrence in the key's place, so that it can be bound as
    /// Go binds each occurrence (on Ollama 0.33 `{"name": 1, "name": "x"}` in a tool call's
    /// function is refused for the first).
    pub(super) nested: Vec<(String, Value)>,
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

    fn of(entries: Vec<(String, Top)>, go_type: &str) -> Body {
        // Each earlier occurrence folded below it as the field's value in the object is.
        let fold_value = |k: &str, v: Value| {
            fold::request(Map::from_iter([(k.to_string(), v)]), go_type).remove(k).unwrap_or(Value::Null)
        };
        let nested = nested(&entries)
            .into_iter()
            .map(|(k, v)| {
                let folded = crate::gotype::folded(&k).into_owned();
                (folded.clone(), fold_value(&folded, v))
            })
            .collect();
        let message_order = entries
            .iter()
            .filter(|(k, _)| crate::gotype::folded(k) == "messages")
            .next_back()
            .map(|(_, t)| match t {
                Top::Array(items) => items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| match t {
                        Top::Object(e) => repeated(e, Top::to_value).map(|o| (i, o)),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .unwrap_or_default();
        // The body's own values, taken (the earlier occurrences and the messages' read above).
        let entries: Vec<(String, Value)> = entries.into_iter().map(|(k, t)| (k, t.into_value())).collect();
        let order = repeated(&entries, Value::clone)
            .map(|o| o.into_iter().map(|(k, v)| (k.clone(), v.map(|v| fold_value(&k, v)))).collect())
            .unwrap_or_default();
        Body { map: fold::request(entries.into_iter().collect(), go_type), order, message_order, nested }
    }
}

/// An object's keys in order, folded, each with its value (`value` of it) where a later key
/// folds to the same (`None`: the last, whose value the object holds); `None` where no key came
/// twice (and no value is read).
fn repeated<V>(entries: &[(String, V)], value: impl Fn(&V) -> Value) -> Option<Vec<(String, Option<Value>)>> {
    let keys: Vec<std::borrow::Cow<'_, str>> = entries.iter().map(|(k, _)| crate::gotype::folded(k)).collect();
    let twice = keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k));
    twice.then(|| {
        entries
            .iter()
            .zip(&keys)
            .enumerate()
            .map(|(i, ((_, v), k))| (k.to_string(), keys[i + 1..].contains(k).then(|| value(v))))
            .collect()
    })
}

/// Each earlier occurrence of a key that came twice in an object below the top level (and
/// below each message, whose own keys `message_order` keeps), as its top-level field: the key
/// as sent, with that occurrence in its place and every other value the last.
fn nested(entries: &[(String, Top)]) -> Vec<(String, Value)> {
    let last = last_of_each(entries);
    entries
        .iter()
        .zip(last)
        .filter(|(_, last)| *last)
        .flat_map(|((k, t), _)| {
            // A message's own keys are bound in turn already; below them, each struct's.
            let own = crate::gotype::folded(k) != "messages";
            variants(t, own).into_iter().map(move |v| (k.clone(), v))
        })
        .collect()
}

/// Whether each of an object's keys is the last of those that fold to the same field: the one
/// whose value Go's value holds.
fn last_of_each(entries: &[(String, Top)]) -> Vec<bool> {
    let folded: Vec<_> = entries.iter().map(|(k, _)| crate::gotype::folded(k)).collect();
    (0..entries.len()).map(|i| !folded[i + 1..].contains(&folded[i])).collect()
}

/// `t`'s value once for each earlier occurrence of a key that came twice in an object in it:
/// that occurrence in its key's place (`own`: `t`'s own keys too, else only those below them;
/// an array passes it on to its elements).
fn variants(t: &Top, own: bool) -> Vec<Value> {
    match t {
        Top::Object(entries) => {
            let base = || match t.to_value() {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            let with = |k: &str, v: Value| {
                let mut m = base();
                let f = crate::gotype::folded(k);
                m.retain(|key, _| crate::gotype::folded(key) != f);
                m.insert(k.to_string(), v);
                Value::Object(m)
            };
            let mut out = Vec::new();
            for ((k, child), last) in entries.iter().zip(last_of_each(entries)) {
                if !last && own {
                    out.push(with(k, child.to_value()));
                } else if last {
                    out.extend(variants(child, true).into_iter().map(|v| with(k, v)));
                }
            }
            out
        }
        Top::Array(items) => {
            let mut out = Vec::new();
            for (j, item) in items.iter().enumerate() {
                for v in variants(item, own) {
                    let mut all: Vec<Value> = items.iter().map(Top::to_value).collect();
                    all[j] = v;
                    out.push(Value::Array(all));
                }
            }
            out
        }
        Top::Other(_) => Vec::new(),
    }
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
        Some(Ok(Top::Object(entries))) => Ok(Body::of(entries, go_type)),
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

/// A JSON value as Go's decoder sees it: an object's entries in order, a key that came twice
/// kept twice, at every depth.
enum Top {
    Object(Vec<(String, Top)>),
    Array(Vec<Top>),
    Other(Value),
}

impl Top {
    /// Its value: a key that came twice, the last value, at the first key's place (as `Value`'s own).
    fn into_value(self) -> Value {
        match self {
            Top::Object(entries) => Value::Object(entries.into_iter().map(|(k, t)| (k, t.into_value())).collect()),
            Top::Array(items) => Value::Array(items.into_iter().map(Top::into_value).collect()),
            Top::Other(v) => v,
        }
    }

    /// [`Top::into_value`] of a copy, for an occurrence kept beside the value taken.
    fn to_value(&self) -> Value {
        match self {
            Top::Object(entries) => Value::Object(entries.iter().map(|(k, t)| (k.clone(), t.to_value())).collect()),
            Top::Array(items) => Value::Array(items.iter().map(Top::to_value).collect()),
            Top::Other(v) => v.clone(),
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
        let mut entries = Vec::new();
        while let Some(key) = m.next_key::<String>()? {
            entries.push((key, m.next_value::<Top>()?));
        }
        Ok(Top::Object(entries))
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
    fn a_key_twice_in_a_struct_below_is_kept_as_its_fields_value_with_that_occurrence() {
        // A tool call's function name 1 then "x": the messages once more with 1 in its place
        // (bound before the messages' own value); a message's own keys are `message_order`'s.
        let body = br#"{"messages":[{"role":"user","role":"user","tool_calls":[{"function":{"name":1,"NAME":"x"}}]}],"stream_options":{"include_usage":1,"include_usage":true}}"#;
        let b = decode_body(body, "api.ChatRequest", "x").unwrap();
        assert_eq!(
            b.nested,
            vec![
                ("messages".into(), json!([{"role":"user","tool_calls":[{"function":{"name":1}}]}])),
                ("stream_options".into(), json!({"include_usage":1})),
            ]
        );
        assert_eq!(b.map["messages"][0]["tool_calls"][0]["function"]["name"], "x");
        assert_eq!(b.message_order.len(), 1, "the message's own role, twice");
        // None where no key came twice below the top.
        assert!(decode_body(br#"{"model":"a","options":{"x":1}}"#, "api.ChatRequest", "x").unwrap().nested.is_empty());
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
