//! Request decoding with the real server's error texts. Bodies are read the way Go's
//! `json.Decoder` reads them (first JSON value only, `null` = `{}`, empty = "missing request
//! body": `request/body.rs`), then each field is checked for its type with Go's `cannot
//! unmarshal` message.

use crate::error::ApiError;
use crate::gotype::Decoded;
use crate::keepalive::KeepAlive;
use serde_json::{Map, Value};

mod body;
mod fold;

pub(crate) use body::{Body, decode_body};

/// `decodeImageURL` (openai/openai.go v0.33.0-rc2 738-766), which the OpenAI-compatible routes
/// read an image with: a web URL is refused, a data URL must be base64 of a JPEG, PNG or WebP
/// (or name no type: `data:;base64,`), and its data must decode.
pub(crate) fn decode_image_url(url: &str) -> Result<(), ApiError> {
    use base64::Engine;
    let bad = |m: &str| ApiError::bad_request(m).from_middleware();
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(bad("image URLs are not currently supported, please use base64 encoded data instead"));
    }
    let data = url.strip_prefix("data:;base64,").or_else(|| {
        ["jpeg", "jpg", "png", "webp"].iter().find_map(|t| url.strip_prefix(&format!("data:image/{t};base64,")))
    });
    match data {
        Some(d) if base64::engine::general_purpose::STANDARD.decode(d).is_ok() => Ok(()),
        _ => Err(bad("invalid image input")),
    }
}

pub(crate) use crate::gotype::json_kind;

/// Typed access to a request object's fields, with Go's type errors.
#[derive(Debug)]
pub(crate) struct Fields<'a> {
    pub(crate) map: &'a Map<String, Value>,
    go_type: &'static str,
    /// [`Body`]'s keys in the body's order where a field came twice.
    order: &'a [(String, Option<Value>)],
    /// The same for each element of `messages` where a field came twice in it.
    message_order: &'a [(usize, Vec<(String, Option<Value>)>)],
    /// [`Body`]'s fields with an earlier occurrence of a key that came twice in a struct below
    /// them in its place, each bound before the field's own value.
    nested: &'a [(String, Value)],
}

impl<'a> Fields<'a> {
    pub(crate) fn new(map: &'a Map<String, Value>, go_type: &'static str) -> Self {
        Fields { map, go_type, order: &[], message_order: &[], nested: &[] }
    }

    /// The `index`-th element of `messages`, `message` (an object), as a Go struct `go_type`:
    /// where a field came twice in it, each occurrence is bound in turn ([`Fields::bound`]).
    pub(crate) fn message(&self, index: usize, message: &'a Map<String, Value>, go_type: &'static str) -> Fields<'a> {
        let order = self.message_order.iter().find(|(i, _)| *i == index).map_or(&[][..], |(_, o)| o.as_slice());
        Fields { map: message, go_type, order, message_order: &[], nested: &[] }
    }

    /// A body's fields, each occurrence of a field that came twice bound in turn ([`Fields::bound`]).
    pub(crate) fn of(body: &'a Body, go_type: &'static str) -> Self {
        Fields { map: &body.map, go_type, order: &body.order, message_order: &body.message_order, nested: &body.nested }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    pub(crate) fn type_error(&self, key: &str, v: &Value, go: &str) -> ApiError {
        ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go struct field {}.{key} of type {go}",
            json_kind(v),
            self.go_type
        ))
        .from_middleware()
    }

    /// Checks the body's fields in the body's order with `check` (each field's type, as its Go
    /// struct declares it), as Go's decoder binds them: it goes on past a field of the wrong
    /// type and answers with the earliest, unless a field whose type decodes itself (`own`: an
    /// `UnmarshalJSON` of its own, as `keep_alive`'s `Duration`) fails, which ends the decoding
    /// there with its error, whatever came before. A field whose key came more than once is
    /// checked at each of its places, with the value it had there (`check` and `own` are given
    /// the fields as they stood: one field, or all of them at its last place), and so is a
    /// field in which a key came twice in a struct below it, with each earlier occurrence.
    pub(crate) fn bound(
        &self,
        check: impl Fn(&Fields<'_>, &str) -> Result<(), ApiError>,
        own: impl Fn(&Fields<'_>, &str) -> bool,
    ) -> Result<(), ApiError> {
        let mut first = None;
        let mut bind = |f: &Fields<'_>, key: &str| match check(f, key) {
            Err(e) if own(f, key) => Some(e),
            Err(e) => {
                first.get_or_insert(e);
                None
            }
            Ok(()) => None,
        };
        for (key, earlier) in body::places(self.map, self.order) {
            let ended = match earlier {
                // A key that came twice in a struct below it: that occurrence first, as Go
                // decodes it.
                None => self
                    .nested
                    .iter()
                    .filter(|(k, _)| k == key)
                    .find_map(|(_, v)| {
                        let one = Map::from_iter([(key.clone(), v.clone())]);
                        bind(&Fields::new(&one, self.go_type), key)
                    })
                    .or_else(|| bind(self, key)),
                Some(v) => {
                    let one = Map::from_iter([(key.clone(), v.clone())]);
                    bind(&Fields::new(&one, self.go_type), key)
                }
            };
            if let Some(e) = ended {
                return Err(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// [`Fields::bound`] for a struct with no field that decodes itself.
    pub(crate) fn in_body_order(
        &self,
        check: impl Fn(&Fields<'_>, &str) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        self.bound(check, |_, _| false)
    }

    /// Field `key` decoded as type `ty` of struct `strukt`, nested types and all
    /// ([`crate::gotype::decode_field`]): its error, as the middleware answers it.
    pub(crate) fn decoded(
        &self,
        key: &'static str,
        ty: crate::gotype::Go,
        strukt: &'static str,
    ) -> Result<(), ApiError> {
        match self.get(key).map(|v| crate::gotype::decode_field(v, ty, strukt, key)) {
            None | Some(Decoded::Fits) => Ok(()),
            Some(Decoded::Saved(e) | Decoded::Ended(e)) => Err(ApiError::bad_request(e.text()).from_middleware()),
        }
    }

    /// `tools` decoded as a field of struct `strukt` (`ChatRequest`, `ChatCompletionRequest`), nested
    /// types and all (`ToolFunctionParameters.tools.function.parameters.required`): its error,
    /// and whether that error ends the decoding (one inside `properties`, which decode
    /// themselves) or is saved while the decoding goes on.
    pub(crate) fn tools_bound(&self, strukt: &'static str) -> (Result<(), ApiError>, bool) {
        let ty = if strukt == "ChatRequest" { crate::gotype::NATIVE_TOOLS } else { crate::gotype::OPENAI_TOOLS };
        let decoded = match self.get("tools") {
            None => return (Ok(()), false),
            Some(v) => crate::gotype::decode_field(v, ty, strukt, "tools"),
        };
        match decoded {
            Decoded::Fits => (Ok(()), false),
            Decoded::Saved(e) => (Err(ApiError::bad_request(e.text()).from_middleware()), false),
            Decoded::Ended(e) => (Err(ApiError::bad_request(e.text()).from_middleware()), true),
        }
    }

    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.type_error(key, v, "string")),
        }
    }

    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.type_error(key, v, "bool")),
        }
    }

    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
            Some(v @ Value::Number(_)) => Err(ApiError::bad_request(format!(
                "json: cannot unmarshal number {} into Go struct field {}.{key} of type int",
                v, self.go_type
            ))
            .from_middleware()),
            Some(v) => Err(self.type_error(key, v, "int")),
        }
    }

    pub(crate) fn float(&self, key: &str) -> Result<Option<f64>, ApiError> {
        self.float_of(key, "float64")
    }

    /// A number field whose Go type is `go` (`float64`, `float32`), as the type error names it.
    pub(crate) fn float_of(&self, key: &str, go: &str) -> Result<Option<f64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(self.type_error(key, v, go)),
        }
    }

    pub(crate) fn array(&self, key: &str, go: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.type_error(key, v, go)),
        }
    }

    pub(crate) fn object(&self, key: &str, go: &str) -> Result<Option<&'a Map<String, Value>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(self.type_error(key, v, go)),
        }
    }

    /// A native request's `images` (`[]api.ImageData`, each a Go `[]byte`, which Go's decoder
    /// reads from a base64 string), checked as Go binds them: a string that is not base64 as
    /// Go reads it gets Go's error for it (a data URL: `illegal base64 data at input byte 4`,
    /// [`crate::gobase64`]), `null` none.
    pub(crate) fn images(&self, key: &str) -> Result<(), ApiError> {
        for v in self.array(key, "[]api.ImageData")?.into_iter().flatten() {
            match v {
                Value::String(s) => {
                    if let Some(at) = crate::gobase64::corrupt_at(s.as_bytes()) {
                        return Err(
                            ApiError::bad_request(format!("illegal base64 data at input byte {at}")).from_middleware()
                        );
                    }
                }
                Value::Null => {}
                other => return Err(self.type_error(key, other, "api.ImageData")),
            }
        }
        Ok(())
    }

    /// An array of Go `int`s (`GenerateRequest.context`): its values, `null` as Go's zero. An
    /// element that is no whole number in range gets Go's error for it.
    pub(crate) fn int_array(&self, key: &str) -> Result<Option<Vec<i64>>, ApiError> {
        let Some(a) = self.array(key, "[]int")? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(a.len());
        for v in a {
            match v {
                Value::Null => out.push(0),
                Value::Number(n) if n.is_i64() => out.push(n.as_i64().unwrap_or(0)),
                Value::Number(_) => {
                    return Err(ApiError::bad_request(format!(
                        "json: cannot unmarshal number {v} into Go struct field {}.{key} of type int",
                        self.go_type
                    ))
                    .from_middleware());
                }
                other => return Err(self.type_error(key, other, "int")),
            }
        }
        Ok(Some(out))
    }

    pub(crate) fn keep_alive(&self) -> Result<Option<KeepAlive>, ApiError> {
        match self.map.get("keep_alive") {
            None => Ok(None),
            Some(v) => KeepAlive::from_json(v).map_err(ApiError::bad_request),
        }
    }

    /// `think`: a bool or a level string, read as the real `ThinkValue.UnmarshalJSON`
    /// (api/types.go v0.33.0-rc2 1202-1222): any other string (`"true"` included) and any other
    /// type are errors, each with its own text.
    pub(crate) fn think(&self) -> Result<Option<Think>, ApiError> {
        match self.get("think") {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(if *b { Think::On(Effort::Default) } else { Think::Off })),
            // "max" is sent to the model as "high" (server/routes.go v0.33.0-rc2 430-432).
            Some(Value::String(s)) if s == "low" => Ok(Some(Think::On(Effort::Low))),
            Some(Value::String(s)) if s == "medium" => Ok(Some(Think::On(Effort::Medium))),
            Some(Value::String(s)) if s == "high" || s == "max" => Ok(Some(Think::On(Effort::High))),
            Some(Value::String(s)) => Err(ApiError::bad_request(format!(
                "invalid think value: {} (must be \"high\", \"medium\", \"low\", \"max\", true, or false)",
                Value::String(s.clone())
            ))),
            Some(_) => Err(ApiError::bad_request(
                "think must be a boolean or string (\"high\", \"medium\", \"low\", \"max\", true, or false)",
            )),
        }
    }
}

/// Thinking requested or not, and how hard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Think {
    On(Effort),
    Off,
}

/// A thinking level (`think: "low"`, ... or `reasoning_effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effort {
    /// `think: true`: the model's own default.
    Default,
    Low,
    Medium,
    High,
}

impl Think {
    /// `thinkFromReasoningEffort` (openai/openai.go v0.33.0-rc2 523-546): the think value of
    /// an OpenAI reasoning effort (empty: the model's default), for the /v1 adapters.
    pub(crate) fn from_effort(effort: &str) -> Result<Option<Think>, ApiError> {
        match effort {
            "" => Ok(None),
            "none" => Ok(Some(Think::Off)),
            "minimal" | "low" => Ok(Some(Think::On(Effort::Low))),
            "medium" => Ok(Some(Think::On(Effort::Medium))),
            "high" | "max" | "xhigh" | "ultra" => Ok(Some(Think::On(Effort::High))),
            other => Err(ApiError::bad_request(format!(
                "invalid reasoning value: {} (must be \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")",
                crate::gojson::go_quote(other)
            ))),
        }
    }

    pub(crate) fn is_on(self) -> bool {
        matches!(self, Think::On(_))
    }

    /// What a request thinks: as asked, else on for a model that can think (the real handlers
    /// default `think` to true for models with the thinking capability, server/routes.go
    /// v0.33.0-rc2 454-458 and 2616-2620), else off.
    pub(crate) fn resolve(asked: Option<Think>, can_think: bool) -> Think {
        match asked {
            Some(t) => t,
            None if can_think => Think::On(Effort::Default),
            None => Think::Off,
        }
    }

    /// How much reasoning, against the model's default: the simulator's choice (the real
    /// length is the model's): half at low, twice at high, none when off.
    pub(crate) fn factor(self) -> f64 {
        match self {
            Think::Off => 0.0,
            Think::On(Effort::Low) => 0.5,
            Think::On(Effort::Default | Effort::Medium) => 1.0,
            Think::On(Effort::High) => 2.0,
        }
    }
}

/// The `options` object, resolved: every known key type-checked (wrong types are the
/// scheduler's 500), unknown keys ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Options {
    pub(crate) num_ctx: Option<i64>,
    pub(crate) num_batch: Option<i64>,
    pub(crate) num_gpu: Option<i64>,
    pub(crate) main_gpu: Option<i64>,
    pub(crate) use_mmap: Option<bool>,
    pub(crate) num_thread: Option<i64>,
    pub(crate) num_predict: Option<i64>,
    pub(crate) seed: Option<i64>,
    pub(crate) temperature: Option<f64>,
    pub(crate) top_k: Option<i64>,
    pub(crate) top_p: Option<f64>,
    pub(crate) stop: Vec<String>,
    /// Simulator extension: the model's natural answer length (real Ollama ignores unknown
    /// options), so workloads get the lengths they ask for.
    pub(crate) sim_tokens: Option<i64>,
    /// Simulator extension: tool calls per user turn when tools are offered (default 1).
    pub(crate) sim_tool_calls: Option<i64>,
    /// Simulator extension: the chance that a user turn with tools calls one (default 1).
    pub(crate) sim_tool_call_probability: Option<f64>,
    /// `num_keep`, `repeat_last_n` and `repeat_penalty`, which llama-server checks.
    pub(crate) num_keep: Option<i64>,
    pub(crate) repeat_last_n: Option<i64>,
    pub(crate) repeat_penalty: Option<f64>,
}

const INT_OPTIONS: &[&str] = &[
    "sim_tokens",
    "sim_tool_calls",
    "num_keep",
    "seed",
    "num_predict",
    "top_k",
    "repeat_last_n",
    "num_ctx",
    "num_batch",
    "num_gpu",
    "main_gpu",
    "num_thread",
    "draft_num_predict",
];
const FLOAT_OPTIONS: &[&str] = &[
    "typical_p",
    "top_p",
    "min_p",
    "temperature",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "sim_tool_call_probability",
];

impl Options {
    /// What llama-server answers (status 400, its JSON as Ollama's error text) to parameters
    /// out of its range, once the request has its runner and slot (the real CPU build:
    /// `num_keep` below -1, `repeat_last_n` below 0, `repeat_penalty` 0 or less).
    pub(crate) fn runner_refusal(&self) -> Option<ApiError> {
        let refuse = |m: String| ApiError::llama_server_refusal(&m);
        let field = |name: &str, lo: i64, v: i64| {
            format!("Field '{name}': Value must be between {lo} <= value <= 2147483647, but got {v}")
        };
        // The runner receives them as 32-bit ints (wrapping, as Go's int32 conversion does).
        let wrapped = |v: i64| i64::from(v as i32);
        if let Some(v) = self.num_keep.map(wrapped).filter(|v| *v < -1) {
            return Some(refuse(field("n_keep", -1, v)));
        }
        if let Some(v) = self.repeat_last_n.map(wrapped).filter(|v| *v < 0) {
            return Some(refuse(field("repeat_last_n", 0, v)));
        }
        if self.repeat_penalty.is_some_and(|p| !(p.is_finite() && p > 0.0)) {
            return Some(refuse(
                "Failed to initialize samplers: penalty_repeat must be finite and greater than 0".into(),
            ));
        }
        None
    }

    /// Reads an options map. Errors are 500, as the real server's scheduler returns them.
    pub(crate) fn from_map(map: Option<&Map<String, Value>>) -> Result<Options, ApiError> {
        let mut o = Options::default();
        let Some(map) = map else { return Ok(o) };
        for (k, v) in map {
            if v.is_null() {
                continue;
            }
            let bad = |t: &str| ApiError::internal(format!("option \"{k}\" must be of type {t}"));
            if INT_OPTIONS.contains(&k.as_str()) {
                // Integers accept JSON floats (truncated).
                let n = v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).ok_or_else(|| bad("integer"))?;
                match k.as_str() {
                    "num_ctx" => o.num_ctx = Some(n),
                    "num_batch" => o.num_batch = Some(n),
                    "num_gpu" => o.num_gpu = Some(n),
                    "main_gpu" => o.main_gpu = Some(n),
                    "num_thread" => o.num_thread = Some(n),
                    "num_predict" => o.num_predict = Some(n),
                    "seed" => o.seed = Some(n),
                    "top_k" => o.top_k = Some(n),
                    "sim_tokens" => o.sim_tokens = Some(n),
                    "sim_tool_calls" => o.sim_tool_calls = Some(n),
                    "num_keep" => o.num_keep = Some(n),
                    "repeat_last_n" => o.repeat_last_n = Some(n),
                    _ => {}
                }
            } else if FLOAT_OPTIONS.contains(&k.as_str()) {
                let f = v.as_f64().ok_or_else(|| bad("float32"))?;
                match k.as_str() {
                    "temperature" => o.temperature = Some(f),
                    "top_p" => o.top_p = Some(f),
                    "sim_tool_call_probability" => o.sim_tool_call_probability = Some(f),
                    "repeat_penalty" => o.repeat_penalty = Some(f),
                    _ => {}
                }
            } else if k == "use_mmap" {
                o.use_mmap = Some(v.as_bool().ok_or_else(|| bad("boolean"))?);
            } else if k == "stop" {
                let arr = v.as_array().ok_or_else(|| bad("array"))?;
                o.stop = arr
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| ApiError::internal(format!("option \"{k}\" must be of an array of strings")))
                    })
                    .collect::<Result<_, _>>()?;
            }
            // Unknown and removed keys (numa, low_vram, mirostat, ...) are ignored.
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_that_comes_twice_is_bound_at_each_place_as_go_binds_it() {
        let bound = |body: &str| {
            let b = decode_body(body.as_bytes(), "api.GenerateRequest", "x").unwrap();
            let f = Fields::of(&b, "GenerateRequest");
            let r = f.bound(
                |f, key| match key {
                    "model" => f.string(key).map(drop),
                    "stream" => f.bool(key).map(drop),
                    "keep_alive" => f.keep_alive().map(drop),
                    _ => Ok(()),
                },
                |_, key| key == "keep_alive",
            );
            (r.err().map(|e| e.message), b.map)
        };
        // The last value is the object's, at the first key's place; the first is bound too
        // (Ollama 0.33 answers 400 for it).
        let (err, map) = bound(r#"{"model":1,"prompt":"p","model":"tiny"}"#);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["model", "prompt"]);
        assert_eq!(map["model"], "tiny");
        assert_eq!(
            err.as_deref(),
            Some("json: cannot unmarshal number into Go struct field GenerateRequest.model of type string")
        );
        // The earliest error in the body's order, each occurrence at its own place.
        let (err, _) = bound(r#"{"model":"tiny","stream":"x","model":1}"#);
        assert_eq!(
            err.as_deref(),
            Some("json: cannot unmarshal string into Go struct field GenerateRequest.stream of type bool")
        );
        let (err, _) = bound(r#"{"Model":1,"stream":"x","model":"tiny"}"#);
        assert_eq!(
            err.as_deref(),
            Some("json: cannot unmarshal number into Go struct field GenerateRequest.model of type string")
        );
        // A value that decodes itself ends the decoding at its first place.
        let (err, _) = bound(r#"{"stream":"x","keep_alive":true,"keep_alive":"5m"}"#);
        assert_eq!(err.as_deref(), Some("Unsupported type: 'bool'"));
        // Twice and right both times: bound.
        assert_eq!(bound(r#"{"model":"a","model":"tiny"}"#).0, None);
    }

    #[test]
    fn field_type_errors_name_the_go_struct_field() {
        let m = json!({"stream": "yes", "prompt": 3}).as_object().unwrap().clone();
        let f = Fields::new(&m, "GenerateRequest");
        assert_eq!(
            f.bool("stream").unwrap_err().message,
            "json: cannot unmarshal string into Go struct field GenerateRequest.stream of type bool"
        );
        assert_eq!(
            f.string("prompt").unwrap_err().message,
            "json: cannot unmarshal number into Go struct field GenerateRequest.prompt of type string"
        );
    }

    #[test]
    fn options_type_errors_are_500_with_the_option_name() {
        let m = json!({"num_ctx": "abc"}).as_object().unwrap().clone();
        let e = Options::from_map(Some(&m)).unwrap_err();
        assert_eq!(e.status.as_u16(), 500);
        assert_eq!(e.message, "option \"num_ctx\" must be of type integer");
        let m = json!({"stop": "x"}).as_object().unwrap().clone();
        assert_eq!(Options::from_map(Some(&m)).unwrap_err().message, "option \"stop\" must be of type array");
        let m = json!({"num_predict": 8.0, "mirostat": 2, "stop": ["a"]}).as_object().unwrap().clone();
        let o = Options::from_map(Some(&m)).unwrap();
        assert_eq!(o.num_predict, Some(8));
        assert_eq!(o.stop, vec!["a".to_string()]);
    }
}
