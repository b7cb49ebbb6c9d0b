//! What Go's `encoding/json` says when a JSON value does not fit a Go type, for request types
//! too nested for [`crate::request::Fields`]' one level (the Responses API's request, a tool's
//! parameters). Modelled on `decode.go` of the Go release Ollama v0.33.0-rc2 builds with:
//!
//! - a value of the wrong JSON type is an `UnmarshalTypeError`: saved, and decoding goes on; the
//!   first one (in the body's order, depth first) is the answer once the whole value is read;
//! - its text names the innermost struct being decoded and the path of JSON field names from
//!   the value decoded (`ResponsesTextFormat.text.format.type`; an array adds nothing to the
//!   path), or the type alone at the top (`Go value of type []json.RawMessage`);
//! - `null` fits every type;
//! - a type that decodes itself (`UnmarshalJSON`, [`Go::Own`]) ends the decoding with its error
//!   at once, whatever was saved before; where that error is a type error of a decoding of its
//!   own, the enclosing decoder renames it to its own struct and prefixes its own path
//!   (`addErrorContext`): `ToolFunctionParameters.tools.function.parameters.properties.type`.
//!
//! Object keys match a field's name exactly, else ignoring case ([`folds_to`]), as Go's do.

use serde_json::{Map, Value};

/// A Go struct: its name for errors inside it (`ResponsesTool`; empty for an anonymous
/// struct), its type as `%v` prints it, and its JSON fields.
#[derive(Debug)]
pub(crate) struct GoStruct {
    pub(crate) name: &'static str,
    pub(crate) type_name: &'static str,
    pub(crate) fields: &'static [(&'static str, Go)],
}

/// A Go type, as far as decoding into it can fail.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Go {
    String,
    Bool,
    Int,
    Float64,
    /// `any`, `json.RawMessage`: anything fits.
    Any,
    /// A slice: its type name (`[]openai.ResponsesTool`), its element.
    Slice(&'static str, &'static Go),
    /// `map[string]any`: its type name.
    Map(&'static str),
    Struct(&'static GoStruct),
    /// A type with an `UnmarshalJSON` of its own.
    Own(fn(&Value) -> Result<(), Failure>),
}

impl Go {
    fn type_name(&self) -> &'static str {
        match self {
            Go::String => "string",
            Go::Bool => "bool",
            Go::Int => "int",
            Go::Float64 => "float64",
            Go::Any => "interface {}",
            Go::Slice(n, _) | Go::Map(n) => n,
            Go::Struct(s) => s.type_name,
            Go::Own(_) => "",
        }
    }
}

/// Why a value does not decode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// An `UnmarshalTypeError`: the value's kind (`number`, or `number 2.5` for an int), the
    /// type, and where (no struct and an empty path at the top of a decoding).
    Type { value: String, type_name: String, strukt: Option<String>, field: String },
    /// Any other error, as an `UnmarshalJSON` returned it.
    Other(String),
}

impl Failure {
    /// Go's text for it.
    pub(crate) fn text(&self) -> String {
        match self {
            Failure::Type { value, type_name, strukt, field } if strukt.is_some() || !field.is_empty() => format!(
                "json: cannot unmarshal {value} into Go struct field {}.{field} of type {type_name}",
                strukt.as_deref().unwrap_or("")
            ),
            Failure::Type { value, type_name, .. } => {
                format!("json: cannot unmarshal {value} into Go value of type {type_name}")
            }
            Failure::Other(text) => text.clone(),
        }
    }

    /// A type error at the top of a decoding (the value itself is of the wrong kind).
    pub(crate) fn type_at_top(v: &Value, type_name: &str) -> Failure {
        Failure::Type { value: kind(v), type_name: type_name.to_string(), strukt: None, field: String::new() }
    }
}

/// `json.Unmarshal(v, &T)`: the first failure, as Go reports it.
pub(crate) fn check(v: &Value, ty: Go) -> Result<(), Failure> {
    let mut d = Decoder::default();
    d.value(v, ty)?;
    d.saved.map_or(Ok(()), Err)
}

/// How a field of a request decodes, as part of its struct's decoding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decoded {
    Fits,
    /// A type error, saved: the decoding goes on, and names the first.
    Saved(Failure),
    /// A value that decodes itself failed: the decoding ends with this.
    Ended(Failure),
}

/// Field `field` of struct `strukt` (its name: `ChatRequest`) holding `v`, of type `ty`.
pub(crate) fn decode_field(v: &Value, ty: Go, strukt: &'static str, field: &'static str) -> Decoded {
    let mut d = Decoder { strukt: Some(strukt), stack: vec![field], saved: None };
    match d.value(v, ty) {
        Err(e) => Decoded::Ended(e),
        Ok(()) => d.saved.map_or(Decoded::Fits, Decoded::Saved),
    }
}

/// [`check`] of an object into a struct.
pub(crate) fn check_object(obj: &Map<String, Value>, s: &'static GoStruct) -> Result<(), Failure> {
    let mut d = Decoder::default();
    d.fields(obj, s)?;
    d.saved.map_or(Ok(()), Err)
}

/// [`check_object`] of an object given as its keys in the body's order, each with the value it
/// had there (a key that came twice, twice: [`crate::request::Body::occurrences`]).
pub(crate) fn check_entries<'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a Value)>,
    s: &'static GoStruct,
) -> Result<(), Failure> {
    let mut d = Decoder::default();
    for (k, v) in entries {
        d.fields(&Map::from_iter([(k.clone(), v.clone())]), s)?;
    }
    d.saved.map_or(Ok(()), Err)
}

/// A field of a JSON object as Go's decoder binds it: the last key naming it, exactly or but
/// for case ([`folds_to`]).
pub(crate) fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.iter().filter(|(k, _)| folds_to(k, name)).map(|(_, v)| v).next_back()
}

/// Whether Go's decoder binds `key` to the field named `name`: equal, or equal under Unicode
/// simple case folding (`foldName`, encoding/json/fold.go: `bytes.EqualFold`), where beyond
/// ASCII's case the long s `ſ` folds to `s` and the Kelvin sign to `k`. For the ASCII names
/// the request types have, no other character folds to one.
pub(crate) fn folds_to(key: &str, name: &str) -> bool {
    key == name || {
        let mut k = key.chars().map(fold_char);
        let mut n = name.chars().map(fold_char);
        loop {
            match (k.next(), n.next()) {
                (None, None) => break true,
                (a, b) if a == b => continue,
                _ => break false,
            }
        }
    }
}

/// [`folds_to`]'s folding of one character, onto the lower-case ASCII letter it folds with.
fn fold_char(c: char) -> char {
    match c {
        '\u{17F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    }
}

/// `key` as the lower-case field name Go binds it to ([`folds_to`]): the key itself when it
/// has no character to fold.
pub(crate) fn folded(key: &str) -> std::borrow::Cow<'_, str> {
    if key.chars().all(|c| fold_char(c) == c) {
        std::borrow::Cow::Borrowed(key)
    } else {
        std::borrow::Cow::Owned(key.chars().map(fold_char).collect())
    }
}

/// A string field (type-checked before): its value, empty when absent or null.
pub(crate) fn string_field(obj: &Map<String, Value>, name: &str) -> String {
    field(obj, name).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Go's name for a JSON value's kind in `cannot unmarshal` errors (`number 2.5` where an int
/// was wanted is written by the caller).
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn kind(v: &Value) -> String {
    json_kind(v).to_string()
}

#[derive(Default)]
struct Decoder {
    strukt: Option<&'static str>,
    stack: Vec<&'static str>,
    saved: Option<Failure>,
}

impl Decoder {
    fn save(&mut self, value: String, ty: &Go) {
        if self.saved.is_none() {
            self.saved = Some(Failure::Type {
                value,
                type_name: ty.type_name().to_string(),
                strukt: self.strukt.map(str::to_string),
                field: self.stack.join("."),
            });
        }
    }

    /// `Err` ends the decoding (an `UnmarshalJSON`'s error).
    fn value(&mut self, v: &Value, ty: Go) -> Result<(), Failure> {
        if let Go::Own(decode) = ty {
            return decode(v).map_err(|e| self.in_context(e));
        }
        if v.is_null() {
            return Ok(());
        }
        match (ty, v) {
            (Go::String, Value::String(_))
            | (Go::Bool, Value::Bool(_))
            | (Go::Float64, Value::Number(_))
            | (Go::Any, _)
            | (Go::Map(_), Value::Object(_)) => {}
            (Go::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => {}
            (Go::Int, Value::Number(n)) => self.save(format!("number {n}"), &ty),
            (Go::Slice(_, elem), Value::Array(items)) => {
                for item in items {
                    self.value(item, *elem)?;
                }
            }
            (Go::Struct(s), Value::Object(obj)) => self.fields(obj, s)?,
            _ => self.save(kind(v), &ty),
        }
        Ok(())
    }

    /// An object into a struct: each key to the field it names, the others ignored.
    fn fields(&mut self, obj: &Map<String, Value>, s: &'static GoStruct) -> Result<(), Failure> {
        for (key, item) in obj {
            let found =
                s.fields.iter().find(|(n, _)| *n == key).or_else(|| s.fields.iter().find(|(n, _)| folds_to(key, n)));
            let Some((name, fty)) = found else { continue };
            let outer = self.strukt.replace(s.name);
            self.stack.push(name);
            let r = self.value(item, *fty);
            self.stack.pop();
            self.strukt = outer;
            r?;
        }
        Ok(())
    }

    /// `addErrorContext`: a type error coming out of a value that decoded itself is renamed to
    /// the struct being decoded here and given this decoding's path before its own.
    fn in_context(&self, e: Failure) -> Failure {
        match e {
            Failure::Type { value, type_name, field, .. } if self.strukt.is_some() || !self.stack.is_empty() => {
                let mut path = self.stack.join(".");
                if !field.is_empty() {
                    path = format!("{path}.{field}");
                }
                Failure::Type { value, type_name, strukt: Some(self.strukt.unwrap_or("").to_string()), field: path }
            }
            other => other,
        }
    }
}

/// A native message's `tool_calls` (api/types.go v0.33.0-rc2 221-235): decoded inside the
/// message's own `UnmarshalJSON`, so that every error inside names `ChatRequest` (the message's
/// decoder renames them, `addErrorContext`); the arguments an ordered map that decodes itself.
pub(crate) static NATIVE_TOOL_CALLS: Go = Go::Slice("[]api.ToolCall", &Go::Struct(&NATIVE_TOOL_CALL));

static NATIVE_TOOL_CALL: GoStruct = GoStruct {
    name: "ChatRequest",
    type_name: "api.ToolCall",
    fields: &[("id", Go::String), ("function", Go::Struct(&NATIVE_TOOL_CALL_FUNCTION))],
};

static NATIVE_TOOL_CALL_FUNCTION: GoStruct = GoStruct {
    name: "ChatRequest",
    type_name: "api.ToolCallFunction",
    fields: &[("index", Go::Int), ("name", Go::String), ("arguments", Go::Own(ordered_map))],
};

/// An Anthropic message's content blocks (anthropic/anthropic.go v0.33.0-rc2 113-173): decoded
/// inside `MessageParam.UnmarshalJSON`, so every error inside names `MessagesRequest` and the
/// path from `messages` (the message's decoder renames them, `addErrorContext`); a tool call's
/// `input` an ordered map that decodes itself. Measured on the real server: `"text": 5` is
/// "... MessagesRequest.messages.text of type string", `"source": 5` "... messages.source of
/// type anthropic.ImageSource", `"input": 5` the ordered map's own error.
pub(crate) static ANTHROPIC_CONTENT_BLOCKS: Go =
    Go::Slice("[]anthropic.ContentBlock", &Go::Struct(&ANTHROPIC_CONTENT_BLOCK));

static ANTHROPIC_CONTENT_BLOCK: GoStruct = GoStruct {
    name: "MessagesRequest",
    type_name: "anthropic.ContentBlock",
    fields: &[
        ("type", Go::String),
        ("text", Go::String),
        ("citations", Go::Slice("[]anthropic.Citation", &Go::Struct(&ANTHROPIC_CITATION))),
        ("source", Go::Struct(&ANTHROPIC_IMAGE_SOURCE)),
        ("id", Go::String),
        ("name", Go::String),
        ("input", Go::Own(ordered_map)),
        ("tool_use_id", Go::String),
        ("content", Go::Any),
        ("is_error", Go::Bool),
        ("thinking", Go::String),
        ("signature", Go::String),
    ],
};

static ANTHROPIC_CITATION: GoStruct = GoStruct {
    name: "MessagesRequest",
    type_name: "anthropic.Citation",
    fields: &[
        ("type", Go::String),
        ("url", Go::String),
        ("title", Go::String),
        ("encrypted_index", Go::String),
        ("cited_text", Go::String),
    ],
};

static ANTHROPIC_IMAGE_SOURCE: GoStruct = GoStruct {
    name: "MessagesRequest",
    type_name: "anthropic.ImageSource",
    fields: &[("type", Go::String), ("media_type", Go::String), ("data", Go::String), ("url", Go::String)],
};

/// An `orderedmap.Map`'s `UnmarshalJSON`: an object (of anything), or null.
fn ordered_map(v: &Value) -> Result<(), Failure> {
    match v {
        Value::Null | Value::Object(_) => Ok(()),
        _ => Err(Failure::Other("Value looks like object, but can't find closing '}' symbol".into())),
    }
}

/// An OpenAI request's `stream_options` (openai/openai.go v0.33.0-rc2: `StreamOptions`, one
/// field, `IncludeUsage bool "json:\"include_usage\""`): on the real server
/// `{"include_usage": 1}` is refused ("Go struct field StreamOptions.stream_options.include_usage
/// of type bool"), and so is `{"INCLUDE_USAGE": 1}` (keys bind ignoring case).
pub(crate) static OPENAI_STREAM_OPTIONS: Go = Go::Struct(&STREAM_OPTIONS);

static STREAM_OPTIONS: GoStruct =
    GoStruct { name: "StreamOptions", type_name: "openai.StreamOptions", fields: &[("include_usage", Go::Bool)] };

/// An OpenAI message's `tool_calls` (openai/openai.go v0.33.0-rc2 185-193): its function an
/// anonymous struct, whose fields' errors name no struct (`.messages.tool_calls.function.name`).
pub(crate) static OPENAI_TOOL_CALLS: Go = Go::Slice("[]openai.ToolCall", &Go::Struct(&OPENAI_TOOL_CALL));

static OPENAI_TOOL_CALL: GoStruct = GoStruct {
    name: "ToolCall",
    type_name: "openai.ToolCall",
    fields: &[
        ("id", Go::String),
        ("index", Go::Int),
        ("type", Go::String),
        ("function", Go::Struct(&OPENAI_TOOL_CALL_FUNCTION)),
    ],
};

static OPENAI_TOOL_CALL_FUNCTION: GoStruct = GoStruct {
    name: "",
    type_name: r#"struct { Name string "json:\"name\""; Arguments string "json:\"arguments\"" }"#,
    fields: &[("name", Go::String), ("arguments", Go::String)],
};

/// A chat request's `tools` (api/types.go v0.33.0-rc2 182, 305-309, 486-490): `api.Tools` in
/// the native `ChatRequest`, `[]api.Tool` in the OpenAI `ChatCompletionRequest`.
pub(crate) static NATIVE_TOOLS: Go = Go::Slice("api.Tools", &TOOL_TYPE);
pub(crate) static OPENAI_TOOLS: Go = Go::Slice("[]api.Tool", &TOOL_TYPE);

static TOOL_TYPE: Go = Go::Struct(&TOOL);

static TOOL: GoStruct = GoStruct {
    name: "Tool",
    type_name: "api.Tool",
    fields: &[("type", Go::String), ("items", Go::Any), ("function", Go::Struct(&TOOL_FUNCTION))],
};

static TOOL_FUNCTION: GoStruct = GoStruct {
    name: "ToolFunction",
    type_name: "api.ToolFunction",
    fields: &[("name", Go::String), ("description", Go::String), ("parameters", Go::Struct(&TOOL_FUNCTION_PARAMETERS))],
};

/// `api.ToolFunctionParameters` (api/types.go v0.33.0-rc2 473-479), its `properties` an
/// ordered map of `ToolProperty` that decodes each value by itself.
pub(crate) static TOOL_FUNCTION_PARAMETERS: GoStruct = GoStruct {
    name: "ToolFunctionParameters",
    type_name: "api.ToolFunctionParameters",
    fields: &[
        ("type", Go::String),
        ("$defs", Go::Any),
        ("items", Go::Any),
        ("required", Go::Slice("[]string", &Go::String)),
        ("properties", Go::Own(tool_properties)),
    ],
};

static TOOL_PROPERTY: GoStruct = GoStruct {
    name: "ToolProperty",
    type_name: "api.ToolProperty",
    fields: &[
        ("anyOf", Go::Slice("[]api.ToolProperty", &TOOL_PROPERTY_TYPE)),
        ("type", Go::Own(property_type)),
        ("items", Go::Any),
        ("description", Go::String),
        ("enum", Go::Slice("[]interface {}", &Go::Any)),
        ("properties", Go::Own(tool_properties)),
        ("required", Go::Slice("[]string", &Go::String)),
    ],
};

static TOOL_PROPERTY_TYPE: Go = Go::Struct(&TOOL_PROPERTY);

/// `ToolPropertiesMap.UnmarshalJSON` (api/types.go 410-413): an ordered map
/// (`wk8/go-ordered-map`, read with `buger/jsonparser`) that decodes each value on its own,
/// stopping at the first that fails; anything but an object is refused with jsonparser's text.
fn tool_properties(v: &Value) -> Result<(), Failure> {
    match v {
        Value::Object(props) => props.values().try_for_each(|p| check(p, TOOL_PROPERTY_TYPE)),
        other => ordered_map(other),
    }
}

/// `PropertyType.UnmarshalJSON` (api/types.go 315-329): a string, else a `[]string`.
fn property_type(v: &Value) -> Result<(), Failure> {
    match v {
        Value::String(_) => Ok(()),
        other => check(other, Go::Slice("[]string", &Go::String)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static INNER: GoStruct = GoStruct { name: "Inner", type_name: "pkg.Inner", fields: &[("name", Go::String)] };
    static OUTER: GoStruct = GoStruct {
        name: "Outer",
        type_name: "pkg.Outer",
        fields: &[
            ("count", Go::Int),
            ("inner", Go::Struct(&INNER)),
            ("items", Go::Slice("[]pkg.Inner", &INNER_TYPE)),
            ("params", Go::Struct(&TOOL_FUNCTION_PARAMETERS)),
        ],
    };
    static INNER_TYPE: Go = Go::Struct(&INNER);

    fn text(v: Value) -> String {
        check(&v, Go::Struct(&OUTER)).map_or_else(|e| e.text(), |()| "ok".into())
    }

    #[test]
    fn the_first_type_error_in_the_body_names_the_innermost_struct_and_the_whole_path() {
        assert_eq!(text(json!({"count": 1, "inner": {"name": "a"}})), "ok");
        assert_eq!(
            text(json!({"inner": {"name": 5}, "count": "x"})),
            "json: cannot unmarshal number into Go struct field Inner.inner.name of type string"
        );
        assert_eq!(
            text(json!({"count": 2.5, "inner": {"name": 5}})),
            "json: cannot unmarshal number 2.5 into Go struct field Outer.count of type int"
        );
        assert_eq!(
            text(json!({"items": [{"name": "a"}, 7]})),
            "json: cannot unmarshal number into Go struct field Outer.items of type pkg.Inner"
        );
        assert_eq!(text(json!({"inner": null, "items": null, "Count": 3})), "ok");
        assert_eq!(
            text(json!({"COUNT": true})),
            "json: cannot unmarshal bool into Go struct field Outer.count of type int"
        );
        assert_eq!(text(json!([1])), "json: cannot unmarshal array into Go value of type pkg.Outer");
    }

    #[test]
    fn a_value_that_decodes_itself_ends_the_decoding_with_its_error_in_the_outer_context() {
        // A type error saved before the properties is lost: their error ends the decoding.
        assert_eq!(
            text(json!({"count": "x", "params": {"properties": {"a": {"type": 5}}}})),
            "json: cannot unmarshal number into Go struct field ToolFunctionParameters.params.properties.type of type []string"
        );
        assert_eq!(
            text(json!({"params": {"properties": {"a": {"properties": {"b": {"description": 1}}}}}})),
            "json: cannot unmarshal number into Go struct field ToolFunctionParameters.params.properties.properties.description of type string"
        );
        assert_eq!(
            text(json!({"params": {"properties": {"a": 5}}})),
            "json: cannot unmarshal number into Go struct field ToolFunctionParameters.params.properties of type api.ToolProperty"
        );
        assert_eq!(
            text(json!({"params": {"properties": 5}})),
            "Value looks like object, but can't find closing '}' symbol"
        );
        // Not a decoding of its own: saved, and the first in the body wins.
        assert_eq!(
            text(json!({"params": {"required": [5]}, "count": "x"})),
            "json: cannot unmarshal number into Go struct field ToolFunctionParameters.params.required of type string"
        );
    }
}
