//! A request's keys as Go's decoder binds them: a key names the struct field it equals
//! ignoring case, where Go reads an object into a struct; a map's keys stay as sent.

use serde_json::{Map, Value};

/// `m`, the body of a request of Go type `go_type` (`api.ChatRequest`, ...), with its keys and
/// those of the structs below it folded ([`fold_struct`]).
pub(super) fn request(m: Map<String, Value>, go_type: &str) -> Map<String, Value> {
    fold_struct(m, nest_of(go_type))
}

/// Where in a request Go reads an object into a struct, below the request's own: the fields
/// (by their lower-case names) holding a struct or an array of them, and that struct's own.
/// A field left out holds a map, a raw value, an `any` or a scalar: its keys stay as sent
/// (an OpenAI message's `content` parts are `any`, read as maps: `{"Type": ...}` is no type
/// there, on the real server as here).
struct Nest(&'static [(&'static str, &'static Nest)]);

/// A struct with no struct below it that the simulator reads by its keys.
const FLAT: &Nest = &Nest(&[]);
/// A tool (`api.Tool`): its function and the function's `parameters` (a struct,
/// `ToolFunctionParameters`, whose `properties` are a map: their names stay), or a tool call's
/// function (whose `arguments` are a map).
const TOOLS: &Nest = &Nest(&[("function", &Nest(&[("parameters", FLAT)]))]);
/// `api.ChatRequest` (and every native request: only chats and creates have messages):
/// `api.Message`, its `tool_calls`, their `function` (whose `arguments` are a map).
const NATIVE: &Nest = &Nest(&[("messages", &Nest(&[("tool_calls", TOOLS)])), ("tools", TOOLS)]);
/// `openai.ChatCompletionRequest`: `openai.Message` (its `content` an `any`), its tool calls.
const OPENAI_CHAT: &Nest = &Nest(&[
    ("messages", &Nest(&[("tool_calls", TOOLS)])),
    ("tools", TOOLS),
    ("stream_options", FLAT),
    ("response_format", &Nest(&[("json_schema", FLAT)])),
    ("reasoning", FLAT),
]);
/// `anthropic.MessagesRequest`: a `MessageParam`'s `content` blocks (`ContentBlock`, its
/// image `source`; a `tool_use`'s `input` is a map, a `tool_result`'s `content` an `any`);
/// `system` is an `any`.
const ANTHROPIC: &Nest = &Nest(&[
    ("messages", &Nest(&[("content", &Nest(&[("source", FLAT)]))])),
    ("tools", FLAT),
    ("tool_choice", FLAT),
    ("thinking", FLAT),
    ("metadata", FLAT),
    ("output_config", FLAT),
]);
/// `openai.ResponsesRequest`: its input items and their content parts (each read through a
/// struct for its type, then its own), tools and a namespace's tools, `text.format`.
const RESPONSES: &Nest = &Nest(&[
    ("input", &Nest(&[("content", FLAT)])),
    ("tools", &Nest(&[("tools", FLAT)])),
    ("reasoning", FLAT),
    ("text", &Nest(&[("format", FLAT)])),
]);

/// The structs below a request of Go type `go_type` (`api.ChatRequest`, ...).
fn nest_of(go_type: &str) -> &'static Nest {
    match go_type {
        "openai.ChatCompletionRequest" => OPENAI_CHAT,
        "anthropic.MessagesRequest" => ANTHROPIC,
        "openai.ResponsesRequest" => RESPONSES,
        t if t.starts_with("api.") => NATIVE,
        _ => FLAT,
    }
}

/// A JSON object Go reads into a struct, with its keys as the field names Go binds them to
/// ([`crate::gotype::folds_to`]: `{"Model": ...}` is `model`, as Go clients marshalling
/// untagged structs send it; on the real server too), and likewise the structs `nest` says
/// are below it. Every field of the request types is named in lower-case ASCII (`anyOf`, deep
/// in a tool's parameters, aside: `gotype` folds those itself). Where two keys name one field the last one's value is
/// read, at the first one's place; Go also reports a type error of the earlier one, which
/// this does not.
fn fold_struct(m: Map<String, Value>, nest: &Nest) -> Map<String, Value> {
    let mut out = Map::with_capacity(m.len());
    for (k, v) in m {
        // A key with nothing to fold (nearly all of them) is kept, not copied.
        let folded = match crate::gotype::folded(&k) {
            std::borrow::Cow::Owned(f) => Some(f),
            std::borrow::Cow::Borrowed(_) => None,
        };
        let k = folded.unwrap_or(k);
        let v = match nest.0.iter().find(|(name, _)| *name == k) {
            Some((_, below)) => fold_nested(v, below),
            None => v,
        };
        out.insert(k, v);
    }
    out
}

/// [`fold_struct`] on a struct field's value: an object, or each object of an array.
fn fold_nested(v: Value, nest: &Nest) -> Value {
    match v {
        Value::Object(m) => Value::Object(fold_struct(m, nest)),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| fold_nested(i, nest)).collect()),
        other => other,
    }
}
