//! Differential testing for `harness conformance --generated N` (issue 38): requests built from
//! the fields of Ollama's request types instead of picked by hand, sent to the real server and
//! to the simulator, and every difference shrunk to the fewest changes that still show it.
//! About 850 lines, a third of them the tables of the request types' fields and their values,
//! a seventh its unit tests: one concept, kept whole.
//!
//! Each case starts from a small valid request of one route (the `ROUTES` table: the native
//! API of `api/types.go`, the OpenAI-compatible ones of `openai/openai.go` and
//! `openai/responses.go`, the Anthropic one of `anthropic/anthropic.go`, as of v0.33.0-rc2) and
//! applies one to three changes drawn with a seeded generator: a field set to another valid
//! value, removed, given a value of the wrong JSON type or out of range, an unknown field, an odd
//! header (`Origin`, `Content-Type`), or a body that is not a JSON object at all. The same seed
//! gives the same cases.
//!
//! A case whose responses differ (as [`crate::conformance::compare`] sees them) is shrunk: each change is
//! dropped in turn and kept out while the first difference's place still differs, so what is
//! reported is a request with only the changes that matter. Findings with the same place and
//! the same minimal changes are reported once, with how many cases hit them.
//!
//! Names: `generated/<route>/<change>; <change>...`, so the accepted list can name a route's
//! generated cases with a trailing `*` (`generated/chat/*`).

use crate::conformance::{Accepted, Case, Difference, apply_accepted, compare, send};
use rand::{RngExt, SeedableRng};
use serde_json::{Map, Value, json};

/// A JSON type a field takes, and so the values a change draws for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
    StrList,
    IntList,
    /// A native chat's messages.
    Messages,
    /// An OpenAI or Anthropic chat's messages.
    OpenMessages,
    /// `keep_alive`: a duration string or a number of seconds.
    Duration,
    /// `format`: "json", a JSON schema, or nothing.
    Format,
    /// `think`: a bool or a level.
    Think,
    /// An embedding input: a string or a list of them.
    Input,
    /// A Responses request's input: a string or a list of items.
    ResponsesInput,
    /// A chat's `tools` (`[]api.Tool`).
    Tools,
    /// A Responses request's `tools` (flat function tools, namespaces).
    ResponsesTools,
    /// An Anthropic request's `tools` (`input_schema`, built-in web search).
    AnthropicTools,
    /// A free-form object (`options`, `response_format`, `stream_options`, `tools`' items).
    Object,
}

/// One field of a route's request, by its path in the body.
struct Field {
    path: &'static [&'static str],
    kind: Kind,
}

const fn f(path: &'static [&'static str], kind: Kind) -> Field {
    Field { path, kind }
}

/// A route: its request's fields, and a small valid request to start from.
struct Route {
    name: &'static str,
    path: &'static str,
    base: fn(&str) -> Value,
    fields: &'static [Field],
    /// The fields that bound a generation (`options.num_predict`, `max_tokens`), and the
    /// objects holding them: a change never removes the bound, nor sets it to what means "no
    /// bound" (0, negative), nor replaces its object: a model that never writes its end token
    /// (the tiny test model) would then generate until the real server's context is full, or
    /// forever where it shifts the context. Wrong types stay: they are refused before any
    /// generation.
    caps: &'static [&'static str],
}

/// The options of `api.Options` and `api.Runner` (`options` of the native routes).
const OPTIONS: &[Field] = &[
    f(&["options", "num_predict"], Kind::Int),
    f(&["options", "temperature"], Kind::Float),
    f(&["options", "top_k"], Kind::Int),
    f(&["options", "top_p"], Kind::Float),
    f(&["options", "min_p"], Kind::Float),
    f(&["options", "seed"], Kind::Int),
    f(&["options", "stop"], Kind::StrList),
    f(&["options", "num_ctx"], Kind::Int),
    f(&["options", "num_batch"], Kind::Int),
    f(&["options", "num_keep"], Kind::Int),
    f(&["options", "repeat_penalty"], Kind::Float),
    f(&["options", "repeat_last_n"], Kind::Int),
    f(&["options", "presence_penalty"], Kind::Float),
    f(&["options", "frequency_penalty"], Kind::Float),
    f(&["options", "num_thread"], Kind::Int),
    f(&["options", "use_mmap"], Kind::Bool),
];

const CHAT: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["messages"], Kind::Messages),
    f(&["stream"], Kind::Bool),
    f(&["format"], Kind::Format),
    f(&["keep_alive"], Kind::Duration),
    f(&["think"], Kind::Think),
    f(&["truncate"], Kind::Bool),
    f(&["shift"], Kind::Bool),
    f(&["logprobs"], Kind::Bool),
    f(&["top_logprobs"], Kind::Int),
    f(&["options"], Kind::Object),
    f(&["tools"], Kind::Tools),
];

const GENERATE: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["prompt"], Kind::Str),
    f(&["suffix"], Kind::Str),
    f(&["system"], Kind::Str),
    f(&["context"], Kind::IntList),
    f(&["stream"], Kind::Bool),
    f(&["raw"], Kind::Bool),
    f(&["format"], Kind::Format),
    f(&["keep_alive"], Kind::Duration),
    f(&["think"], Kind::Think),
    f(&["truncate"], Kind::Bool),
    f(&["logprobs"], Kind::Bool),
    f(&["top_logprobs"], Kind::Int),
    f(&["options"], Kind::Object),
];

const EMBED: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["input"], Kind::Input),
    f(&["keep_alive"], Kind::Duration),
    f(&["truncate"], Kind::Bool),
    f(&["dimensions"], Kind::Int),
    f(&["options"], Kind::Object),
];

const EMBEDDINGS: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["prompt"], Kind::Str),
    f(&["keep_alive"], Kind::Duration),
    f(&["options"], Kind::Object),
];

const SHOW: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["name"], Kind::Str),
    f(&["verbose"], Kind::Bool),
    f(&["system"], Kind::Str),
    f(&["options"], Kind::Object),
];

const OPENAI_CHAT: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["messages"], Kind::OpenMessages),
    f(&["stream"], Kind::Bool),
    f(&["max_tokens"], Kind::Int),
    f(&["max_completion_tokens"], Kind::Int),
    f(&["temperature"], Kind::Float),
    f(&["top_p"], Kind::Float),
    f(&["seed"], Kind::Int),
    f(&["stop"], Kind::StrList),
    f(&["frequency_penalty"], Kind::Float),
    f(&["presence_penalty"], Kind::Float),
    f(&["response_format"], Kind::Object),
    f(&["stream_options"], Kind::Object),
    f(&["logprobs"], Kind::Bool),
    f(&["top_logprobs"], Kind::Int),
    f(&["reasoning_effort"], Kind::Str),
    f(&["tools"], Kind::Tools),
];

const OPENAI_COMPLETIONS: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["prompt"], Kind::Str),
    f(&["stream"], Kind::Bool),
    f(&["max_tokens"], Kind::Int),
    f(&["temperature"], Kind::Float),
    f(&["top_p"], Kind::Float),
    f(&["seed"], Kind::Int),
    f(&["stop"], Kind::StrList),
    f(&["suffix"], Kind::Str),
    f(&["echo"], Kind::Bool),
];

const OPENAI_EMBEDDINGS: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["input"], Kind::Input),
    f(&["encoding_format"], Kind::Str),
    f(&["dimensions"], Kind::Int),
];

const ANTHROPIC: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["messages"], Kind::OpenMessages),
    f(&["max_tokens"], Kind::Int),
    f(&["system"], Kind::Str),
    f(&["stream"], Kind::Bool),
    f(&["temperature"], Kind::Float),
    f(&["top_p"], Kind::Float),
    f(&["top_k"], Kind::Int),
    f(&["stop_sequences"], Kind::StrList),
    f(&["tools"], Kind::AnthropicTools),
    f(&["tool_choice"], Kind::Object),
    f(&["thinking"], Kind::Object),
    f(&["metadata"], Kind::Object),
];

const RESPONSES: &[Field] = &[
    f(&["model"], Kind::Str),
    f(&["input"], Kind::ResponsesInput),
    f(&["instructions"], Kind::Str),
    f(&["stream"], Kind::Bool),
    f(&["max_output_tokens"], Kind::Int),
    f(&["temperature"], Kind::Float),
    f(&["top_p"], Kind::Float),
    f(&["truncation"], Kind::Str),
    f(&["background"], Kind::Bool),
    f(&["include"], Kind::StrList),
    f(&["reasoning"], Kind::Object),
    f(&["text"], Kind::Object),
    f(&["tools"], Kind::ResponsesTools),
];

const ROUTES: &[Route] = &[
    Route {
        name: "chat",
        path: "/api/chat",
        base: |m| {
            json!({"model": m, "messages": [{"role": "user", "content": "Say hi."}], "stream": false,
                   "options": {"num_predict": 4}})
        },
        fields: CHAT,
        caps: &["options", "options.num_predict"],
    },
    Route {
        name: "generate",
        path: "/api/generate",
        base: |m| json!({"model": m, "prompt": "Say hi.", "stream": false, "options": {"num_predict": 4}}),
        fields: GENERATE,
        caps: &["options", "options.num_predict"],
    },
    Route {
        name: "embed",
        path: "/api/embed",
        base: |m| json!({"model": m, "input": "Say hi."}),
        fields: EMBED,
        caps: &[],
    },
    Route {
        name: "embeddings",
        path: "/api/embeddings",
        base: |m| json!({"model": m, "prompt": "Say hi."}),
        fields: EMBEDDINGS,
        caps: &[],
    },
    Route { name: "show", path: "/api/show", base: |m| json!({"model": m}), fields: SHOW, caps: &[] },
    Route {
        name: "openai-chat",
        path: "/v1/chat/completions",
        base: |m| json!({"model": m, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}),
        fields: OPENAI_CHAT,
        caps: &["max_tokens", "max_completion_tokens"],
    },
    Route {
        name: "openai-completions",
        path: "/v1/completions",
        base: |m| json!({"model": m, "prompt": "Say hi.", "max_tokens": 4}),
        fields: OPENAI_COMPLETIONS,
        caps: &["max_tokens"],
    },
    Route {
        name: "openai-embeddings",
        path: "/v1/embeddings",
        base: |m| json!({"model": m, "input": "Say hi."}),
        fields: OPENAI_EMBEDDINGS,
        caps: &[],
    },
    Route {
        name: "anthropic",
        path: "/v1/messages",
        base: |m| json!({"model": m, "max_tokens": 4, "messages": [{"role": "user", "content": "Say hi."}]}),
        fields: ANTHROPIC,
        caps: &["max_tokens"],
    },
    Route {
        name: "responses",
        path: "/v1/responses",
        base: |m| json!({"model": m, "input": "Say hi.", "max_output_tokens": 4}),
        fields: RESPONSES,
        caps: &["max_output_tokens"],
    },
];

/// One change to a route's base request.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    /// Sets the field at this path (creating the objects on the way).
    Set(Vec<String>, Value),
    /// Removes the field at this path.
    Remove(Vec<String>),
    /// Adds a request header.
    Header(String, String),
    /// Renames the field at this path to the name given, the same but for case (Go binds a
    /// struct's field ignoring case; a map's keys, as `options`', it keeps).
    Rename(Vec<String>, String),
    /// Sends this text as the body instead of the request's JSON.
    Body(String),
}

impl Change {
    /// In words, for the case's name and the report.
    fn words(&self) -> String {
        match self {
            Change::Set(p, v) => format!("{}={}", p.join("."), v),
            Change::Remove(p) => format!("no {}", p.join(".")),
            Change::Header(n, v) => format!("{n}: {v}"),
            Change::Rename(p, to) => format!("{} as {to}", p.join(".")),
            Change::Body(b) => format!("body {b:?}"),
        }
    }
}

/// A generated case: its route and changes.
#[derive(Debug, Clone)]
pub struct Generated {
    route: usize,
    changes: Vec<Change>,
}

impl Generated {
    /// The case as [`send`] sends it, `{model}` in place of the model.
    pub fn case(&self) -> Case {
        let route = &ROUTES[self.route];
        let mut body = (route.base)("{model}");
        let mut headers = Vec::new();
        let mut raw = None;
        // Renames last, so a field set by another change is renamed too (never sent twice, under
        // two names: Go would report an earlier one's type error, which the simulator does not).
        let renames = self.changes.iter().filter(|c| matches!(c, Change::Rename(..)));
        for c in self.changes.iter().filter(|c| !matches!(c, Change::Rename(..))).chain(renames) {
            match c {
                Change::Set(p, v) => set(&mut body, p, v.clone()),
                Change::Remove(p) => remove(&mut body, p),
                Change::Rename(p, to) => rename(&mut body, p, to),
                Change::Header(n, v) => headers.push((n.clone(), v.clone())),
                Change::Body(b) => raw = Some(b.clone()),
            }
        }
        let words: Vec<String> = self.changes.iter().map(Change::words).collect();
        Case {
            name: format!("generated/{}/{}", route.name, words.join("; ")),
            method: "POST".into(),
            path: route.path.into(),
            body: Some(raw.unwrap_or_else(|| body.to_string())),
            headers,
        }
    }

    /// The route's name.
    pub fn route(&self) -> &'static str {
        ROUTES[self.route].name
    }

    /// The same case without change `k`.
    fn without(&self, k: usize) -> Generated {
        let mut g = self.clone();
        g.changes.remove(k);
        g
    }
}

fn set(body: &mut Value, path: &[String], v: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = body;
    for p in parents {
        match at.get(p) {
            Some(Value::Object(_)) => {}
            // A parent of another type (an earlier change's) is kept: the field cannot be set.
            Some(_) => return,
            None => at[p.as_str()] = Value::Object(Map::new()),
        }
        at = &mut at[p.as_str()];
    }
    if at.is_object() {
        at[last.as_str()] = v;
    }
}

fn remove(body: &mut Value, path: &[String]) {
    if let Some((o, last)) = parent(body, path) {
        o.remove(last);
    }
}

/// The object holding the field at `path`, and the field's name, when every parent is there.
fn parent<'a, 'p>(body: &'a mut Value, path: &'p [String]) -> Option<(&'a mut Map<String, Value>, &'p str)> {
    let (last, parents) = path.split_last()?;
    let mut at = body;
    for p in parents {
        at = at.get_mut(p)?;
    }
    Some((at.as_object_mut()?, last))
}

/// Moves the field at `path`, if there, to the key `to` in the same object (at the end).
fn rename(body: &mut Value, path: &[String], to: &str) {
    if let Some((o, last)) = parent(body, path)
        && let Some(v) = o.remove(last)
    {
        o.insert(to.to_string(), v);
    }
}

/// A field's name in another case: capitalised (an untagged Go struct's), all capitals, or
/// with the long s `ſ` for an `s` (which Go's folding takes for one) where it has one.
fn recased(rng: &mut rand_pcg::Pcg64Mcg, name: &str) -> String {
    let mut forms = vec![name.to_uppercase()];
    let mut c = name.chars();
    if let Some(first) = c.next() {
        forms.push(first.to_uppercase().chain(c).collect());
    }
    if name.contains('s') {
        forms.push(name.replacen('s', "\u{17F}", 1));
    }
    forms.swap_remove(rng.random_range(0..forms.len()))
}

/// Valid values of a kind.
fn valid(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Str => vec![json!("hello"), json!("")],
        Kind::Int => vec![json!(0), json!(1), json!(3), json!(64)],
        Kind::Float => vec![json!(0.0), json!(0.5), json!(1.0)],
        Kind::Bool => vec![json!(true), json!(false)],
        Kind::StrList => vec![json!([]), json!(["\n"]), json!(["a", "b"])],
        Kind::IntList => vec![json!([]), json!([1, 2, 3])],
        Kind::Messages => vec![
            json!([{"role": "user", "content": "Hi"}]),
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]),
            json!([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Again"}]),
            json!([]),
        ],
        Kind::OpenMessages => vec![
            json!([{"role": "user", "content": "Hi"}]),
            json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]),
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]),
        ],
        Kind::Duration => vec![json!("5m"), json!("1h"), json!(300), json!(-1), json!("10s")],
        Kind::Format => {
            vec![json!("json"), json!({"type": "object", "properties": {"a": {"type": "string"}}}), json!("")]
        }
        Kind::Think => vec![json!(true), json!(false), json!("high")],
        Kind::Input => vec![json!("hello"), json!(["a", "b"]), json!([])],
        Kind::ResponsesInput => vec![
            json!("hello"),
            json!([{"role": "user", "content": "Hi"}]),
            json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]),
            json!([{"role": "user", "content": "Hi"}, {"type": "function_call", "call_id": "c", "name": "f",
                "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": "ok"}]),
        ],
        Kind::Tools => vec![
            json!([]),
            json!([{"type": "function", "function": {"name": "f", "description": "Finds.",
                "parameters": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}}]),
        ],
        Kind::AnthropicTools => vec![
            json!([]),
            json!([{"name": "f", "description": "Finds.", "input_schema": {"type": "object",
                "properties": {"a": {"type": "string"}}, "required": ["a"]}}]),
        ],
        Kind::ResponsesTools => vec![
            json!([]),
            json!([{"type": "function", "name": "f", "parameters": {"type": "object",
                "properties": {"a": {"type": ["string", "null"]}}}}]),
        ],
        Kind::Object => vec![json!({}), json!({"type": "json_object"}), json!({"include_usage": true})],
    }
}

/// Values of the wrong JSON type for a kind.
fn wrong(kind: Kind) -> Vec<Value> {
    let all = [json!("text"), json!(7), json!(1.5), json!(true), json!(["x"]), json!({"k": 1}), Value::Null];
    all.into_iter()
        .filter(|v| match kind {
            Kind::Str => !v.is_string(),
            Kind::Int => !v.is_u64() && !v.is_f64(),
            Kind::Float => !v.is_number(),
            Kind::Bool => !v.is_boolean(),
            Kind::StrList | Kind::IntList | Kind::Messages | Kind::OpenMessages => !v.is_array(),
            Kind::Duration => !v.is_string() && !v.is_number(),
            Kind::Format => !v.is_string() && !v.is_object(),
            Kind::Think => !v.is_boolean() && !v.is_string(),
            Kind::Input | Kind::ResponsesInput => !v.is_string() && !v.is_array(),
            Kind::Tools | Kind::ResponsesTools | Kind::AnthropicTools => !v.is_array(),
            Kind::Object => !v.is_object(),
        })
        .collect()
}

/// Whether `v` is of the wrong JSON type for a field of `kind`, for the one-field rule: the
/// wrong values drawn, and those Go's decoder also refuses though they look the part (a
/// fraction for an int; an array with an element of the wrong type).
fn is_wrong(kind: Kind, v: &Value) -> bool {
    let elements = |ok: fn(&Value) -> bool| v.as_array().is_some_and(|a| a.iter().any(|e| !ok(e)));
    wrong(kind).contains(v)
        || match kind {
            Kind::Int => v.is_f64(),
            Kind::StrList => elements(Value::is_string),
            Kind::IntList => elements(|e| e.is_u64() || e.is_i64()),
            _ => false,
        }
}

/// Values out of range, or odd, for a kind.
fn out_of_range(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Int => vec![json!(-1), json!(-100), json!(1_000_000_000_000u64), json!(2.7)],
        Kind::Float => vec![json!(-1.0), json!(1e30), json!(-0.5)],
        Kind::Str => vec![json!("nope:latest"), json!(" "), json!("\u{0}")],
        Kind::Duration => vec![json!("forever"), json!("-5m"), json!(1e12)],
        Kind::Think => vec![json!("extreme"), json!("")],
        Kind::Format => vec![json!("xml"), json!({"type": "nonsense"})],
        Kind::Messages | Kind::OpenMessages => vec![
            json!([{"role": "wizard", "content": "Hi"}]),
            json!([{"content": "Hi"}]),
            json!([{"role": "user"}]),
            json!([{"role": "user", "content": 5}]),
        ],
        Kind::Input => vec![json!([1, 2]), json!([""]), json!("")],
        Kind::Tools => vec![
            json!([5]),
            json!([{"type": 5, "function": {"name": "f"}}]),
            json!([{"function": {"name": 5}}]),
            json!([{"function": {"name": "f", "parameters": 5}}]),
            json!([{"function": {"name": "f", "parameters": {"required": [5]}}}]),
            json!([{"function": {"name": "f", "parameters": {"properties": {"a": 5}}}}]),
            json!([{"function": {"name": "f", "parameters": {"properties": 5}}}]),
            json!([{"function": {"name": "f", "parameters": {"properties": {"a": {"type": [5]}}}}}]),
        ],
        Kind::AnthropicTools => vec![
            json!([5]),
            json!([{"name": 5}]),
            json!([{"name": "f", "max_uses": "x"}]),
            json!([{"name": "f", "input_schema": 5}]),
            json!([{"name": "f", "input_schema": {"properties": {"a": {"type": 5}}}}]),
            json!([{"type": "web_search_20250305", "name": "web_search"}]),
        ],
        Kind::ResponsesTools => vec![
            json!([5]),
            json!([{"type": "function", "name": 5}]),
            json!([{"type": "function", "name": "f", "parameters": 5}]),
            json!([{"type": "function", "name": "f", "parameters": {"properties": {"a": {"type": 5}}}}]),
            json!([{"type": "namespace", "name": "n", "tools": [{"type": "function", "name": "g", "strict": "yes"}]}]),
            json!([{"type": "web_search"}]),
        ],
        Kind::ResponsesInput => vec![
            json!(["hi"]),
            json!([null]),
            json!([{"role": "user", "content": 5}]),
            json!([{"role": "user", "content": [{"type": "mystery"}]}]),
            json!([{"role": "user", "content": [{"type": "input_file", "file_data": "x"}]}]),
            json!([{"type": "mystery"}]),
            json!([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{bad"}]),
            json!([{"type": "function_call_output", "call_id": 5, "output": "ok"}]),
            json!(""),
        ],
        Kind::StrList => vec![json!([1]), json!([""])],
        Kind::IntList => vec![json!(["a"]), json!([-1])],
        Kind::Bool | Kind::Object => vec![],
    }
}

/// Headers a client may send.
const HEADERS: &[(&str, &str)] = &[
    ("Origin", "http://localhost:3000"),
    ("Origin", "https://example.com"),
    ("Origin", "app://obsidian.md"),
    ("Origin", "null"),
    ("Content-Type", "text/plain"),
    ("Accept", "text/event-stream"),
];

/// Bodies that are not a request object.
const BODIES: &[&str] = &["", "{", "[]", "null", "\"hi\"", "{\"model\": }", "{}"];

/// Draws one change for a route.
fn draw(rng: &mut rand_pcg::Pcg64Mcg, route: &Route) -> Change {
    let pick = |rng: &mut rand_pcg::Pcg64Mcg, v: &[Value]| v[rng.random_range(0..v.len())].clone();
    let fields: Vec<&Field> =
        route.fields.iter().chain(if route.path.starts_with("/api/") { OPTIONS } else { &[] }).collect();
    let field = fields[rng.random_range(0..fields.len())];
    let path = || field.path.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if field.path == ["options", "num_thread"] {
        // More threads than the machine has cores slows the real CPU runner to a crawl (64 on
        // 2 cores: over 20 s for 3 tokens): at most 2, or a value it refuses at once.
        let values = [json!(1), json!(2), json!(-1), json!("text"), json!(1_000_000_000_000u64)];
        return Change::Set(path(), pick(rng, &values));
    }
    if route.caps.contains(&field.path.join(".").as_str()) {
        // A bound: a smaller or larger one, or a value of the wrong type (never null).
        let mut values: Vec<Value> = wrong(field.kind).into_iter().filter(|v| !v.is_null()).collect();
        if field.kind == Kind::Int {
            values.extend([json!(1), json!(3), json!(64), json!(2.7)]);
        }
        return Change::Set(path(), pick(rng, &values));
    }
    match rng.random_range(0..100) {
        0..35 => Change::Set(path(), pick(rng, &valid(field.kind))),
        35..50 => Change::Remove(path()),
        50..70 => Change::Set(path(), pick(rng, &wrong(field.kind))),
        70..85 => {
            let odd = out_of_range(field.kind);
            if odd.is_empty() {
                Change::Set(path(), pick(rng, &wrong(field.kind)))
            } else {
                Change::Set(path(), pick(rng, &odd))
            }
        }
        85..88 => {
            // A field the body lacks (not in the base request, nor set by another change) stays
            // absent.
            let to = recased(rng, field.path.last().copied().unwrap_or_default());
            Change::Rename(path(), to)
        }
        88..92 => {
            let at = if rng.random_range(0..2) == 0 || !route.path.starts_with("/api/") {
                vec!["no_such_field".to_string()]
            } else {
                vec!["options".to_string(), "no_such_option".to_string()]
            };
            Change::Set(at, json!(1))
        }
        92..97 => {
            let (n, v) = HEADERS[rng.random_range(0..HEADERS.len())];
            Change::Header(n.into(), v.into())
        }
        _ => Change::Body(BODIES[rng.random_range(0..BODIES.len())].into()),
    }
}

/// The routes whose fields the simulator binds in the body's order, as Go's decoder does: a
/// case there may have several fields of the wrong type.
const BOUND_IN_ORDER: &[&str] = &[
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/api/embeddings",
    "/api/show",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/responses",
];

/// `n` cases from `seed`: routes in turn, one to three changes each.
pub fn cases(n: usize, seed: u64) -> Vec<Generated> {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let route = i % ROUTES.len();
            let k = rng.random_range(1..=3);
            let mut changes: Vec<Change> = Vec::new();
            while changes.len() < k {
                let c = draw(&mut rng, &ROUTES[route]);
                // One change per place: a later one would undo an earlier one.
                let place = |c: &Change| match c {
                    Change::Set(p, _) | Change::Remove(p) => p.join("."),
                    Change::Rename(p, _) => format!("rename {}", p.join(".")),
                    Change::Header(n, _) => format!("header {n}"),
                    Change::Body(_) => "body".into(),
                };
                // At most one value of the wrong JSON type: with two, Go's decoder names the
                // first in the document (a type's own UnmarshalJSON failing first), which the
                // simulator follows on the routes of BOUND_IN_ORDER (docs/simulator.md);
                // elsewhere it names the first it reads. And on every route at most one wrong
                // option: Go's FromMap ranges over the options map, in an order that changes
                // from run to run.
                let wrong_typed = |c: &Change, route: &Route| match c {
                    Change::Set(p, _)
                        if BOUND_IN_ORDER.contains(&route.path) && p.first().is_none_or(|f| f != "options") =>
                    {
                        false
                    }
                    Change::Set(p, v) => route
                        .fields
                        .iter()
                        .chain(OPTIONS)
                        .find(|f| f.path.iter().copied().eq(p.iter().map(String::as_str)))
                        .is_some_and(|f| is_wrong(f.kind, v)),
                    _ => false,
                };
                let r = &ROUTES[route];
                if wrong_typed(&c, r) && changes.iter().any(|x| wrong_typed(x, r)) {
                    continue;
                }
                if !changes.iter().any(|x| place(x) == place(&c)) {
                    changes.push(c);
                }
            }
            Generated { route, changes }
        })
        .collect()
}

/// A generated case whose responses differed, shrunk.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The shrunk case.
    pub case: Generated,
    /// Its differences.
    pub differences: Vec<Difference>,
    /// How many generated cases shrank to it.
    pub hits: usize,
}

/// Sends a case to both servers, the real one first.
fn both(real: &str, sim: &str, model: &str, g: &Generated) -> Result<Vec<Difference>, String> {
    let case = g.case();
    let r = send(real, &case, model).map_err(|e| format!("case `{}`, the real server: {e}", case.name))?;
    let s = send(sim, &case, model).map_err(|e| format!("case `{}`, the simulator: {e}", case.name))?;
    Ok(compare(&case.name, &r, &s))
}

/// Drops each change in turn while the difference at `place` remains.
fn shrink(
    real: &str,
    sim: &str,
    model: &str,
    g: Generated,
    place: &str,
) -> Result<(Generated, Vec<Difference>), String> {
    let mut g = g;
    let mut diffs = both(real, sim, model, &g)?;
    let mut k = 0;
    while k < g.changes.len() && g.changes.len() > 1 {
        let smaller = g.without(k);
        let d = both(real, sim, model, &smaller)?;
        if d.iter().any(|x| x.place == place) {
            g = smaller;
            diffs = d;
        } else {
            k += 1;
        }
    }
    Ok((g, diffs))
}

impl Finding {
    /// Whether a difference of it is not on the accepted list.
    pub fn unexpected(&self) -> bool {
        self.differences.iter().any(|d| d.accepted.is_none())
    }
}

/// Runs the generated cases against both servers, shrinking every difference not on the
/// accepted list, into `findings` (kept when a later case fails to run).
pub fn run(
    real: &str,
    sim: &str,
    model: &str,
    generated: &[Generated],
    accepted: &[Accepted],
    findings: &mut Vec<Finding>,
) -> Result<(), String> {
    for g in generated {
        let mut diffs = both(real, sim, model, g)?;
        apply_accepted(&mut diffs, accepted);
        let Some(first) = diffs.iter().find(|d| d.accepted.is_none()) else { continue };
        let place = first.place.clone();
        let (small, mut d) = shrink(real, sim, model, g.clone(), &place)?;
        apply_accepted(&mut d, accepted);
        let name = small.case().name;
        match findings.iter_mut().find(|f| f.case.case().name == name) {
            Some(f) => f.hits += 1,
            None => findings.push(Finding { case: small, differences: d, hits: 1 }),
        }
    }
    Ok(())
}

/// The generated cases' findings in words: each shrunk request and its differences.
#[derive(Debug)]
pub struct Report<'a> {
    /// Cases sent.
    pub cases: usize,
    /// What they found.
    pub findings: &'a [Finding],
}

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for x in self.findings {
            let c = x.case.case();
            let mark = if x.unexpected() { "DIFFERS" } else { "accepted" };
            writeln!(f, "{mark:8} {} ({} of the generated cases)", c.name, x.hits)?;
            let headers: String = c.headers.iter().map(|(n, v)| format!(" -H '{n}: {v}'")).collect();
            writeln!(f, "         request: POST {}{headers} {}", c.path, c.body.as_deref().unwrap_or(""))?;
            for d in &x.differences {
                writeln!(f, "         {}\n           real: {}\n           sim:  {}", d.place, d.real, d.sim)?;
                if let Some(r) = &d.accepted {
                    writeln!(f, "           why:  {r}")?;
                }
            }
        }
        let unexpected = self.findings.iter().filter(|x| x.unexpected()).count();
        writeln!(
            f,
            "{} generated cases: {unexpected} differences not accepted, {} accepted (each shrunk to the fewest changes that show it)",
            self.cases,
            self.findings.len() - unexpected
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_cases_and_every_route_is_drawn() {
        let names = |seed| cases(40, seed).iter().map(|g| g.case().name).collect::<Vec<_>>();
        assert_eq!(names(7), names(7));
        assert_ne!(names(7), names(8));
        let routes: std::collections::BTreeSet<&str> = cases(40, 7).iter().map(|g| g.route()).collect();
        assert_eq!(routes.len(), ROUTES.len());
    }

    #[test]
    fn a_case_applies_its_changes_to_the_routes_base_request() {
        let g = Generated {
            route: 0,
            changes: vec![
                Change::Set(vec!["options".into(), "temperature".into()], json!("hot")),
                Change::Remove(vec!["stream".into()]),
                Change::Header("Origin".into(), "https://example.com".into()),
            ],
        };
        let c = g.case();
        assert_eq!(c.path, "/api/chat");
        let body: Value = serde_json::from_str(c.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["options"], json!({"num_predict": 4, "temperature": "hot"}));
        assert!(body.get("stream").is_none());
        assert_eq!(c.headers, [("Origin".to_string(), "https://example.com".to_string())]);
        assert_eq!(c.name, "generated/chat/options.temperature=\"hot\"; no stream; Origin: https://example.com");
        // A body change replaces the JSON.
        let raw = Generated { route: 2, changes: vec![Change::Body("{".into())] }.case();
        assert_eq!(raw.body.as_deref(), Some("{"));
        // A rename applies last, to a field another change set too.
        let renamed = Generated {
            route: 0,
            changes: vec![
                Change::Rename(vec!["model".into()], "Model".into()),
                Change::Rename(vec!["options".into(), "num_predict".into()], "NUM_PREDICT".into()),
                Change::Set(vec!["keep_alive".into()], json!("1m")),
                Change::Rename(vec!["keep_alive".into()], "KEEP_ALIVE".into()),
            ],
        }
        .case();
        let body: Value = serde_json::from_str(renamed.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["Model"], "{model}");
        assert_eq!(body["KEEP_ALIVE"], "1m");
        assert!(body.get("model").is_none() && body.get("keep_alive").is_none());
        assert_eq!(body["options"], json!({"NUM_PREDICT": 4}));
        // The generator draws renames.
        assert!(cases(400, 1).iter().any(|g| g.changes.iter().any(|c| matches!(c, Change::Rename(..)))));
    }

    #[test]
    fn no_case_lifts_the_bound_on_a_generation() {
        // A generation is bounded by options.num_predict (native) or max_tokens (OpenAI,
        // Anthropic): no generated case removes it, nulls it, sets it to 0 or less, or
        // replaces the options object holding it.
        for g in cases(3000, 11) {
            let route = &ROUTES[g.route];
            let c = g.case();
            let Ok(body) = serde_json::from_str::<Value>(c.body.as_deref().unwrap_or("")) else { continue };
            let bound = match route.name {
                "chat" | "generate" => &body["options"]["num_predict"],
                "openai-chat" | "openai-completions" | "anthropic" => &body["max_tokens"],
                _ => continue,
            };
            // Refused before any generation: not an object, another model or none, options
            // of the wrong type.
            if !body.is_object()
                || body["model"] != json!("{model}")
                || body.get("options").is_some_and(|o| !o.is_object() && !o.is_null())
            {
                continue;
            }
            assert!(
                bound.as_f64().is_some_and(|n| n >= 1.0)
                    || bound.is_string()
                    || bound.is_boolean()
                    || bound.is_array()
                    || bound.is_object(),
                "{}: {}",
                c.name,
                body
            );
        }
    }

    #[test]
    fn wrong_values_are_never_of_the_fields_kind() {
        for kind in [Kind::Str, Kind::Int, Kind::Float, Kind::Bool, Kind::StrList, Kind::Input, Kind::Object] {
            let valid_kinds: Vec<&str> = valid(kind).iter().map(crate::conformance::kind).collect();
            for w in wrong(kind) {
                assert!(!valid_kinds.contains(&crate::conformance::kind(&w)), "{kind:?}: {w}");
            }
        }
    }
}
