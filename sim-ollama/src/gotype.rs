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
//! Object keys match a field's name exactly, else ignoring ASCII case, as Go's do.

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
    let mut d = Decoder { strukt: None, stack: Vec::new(), saved: None };
    d.value(v, ty)?;
    d.saved.map_or(Ok(()), Err)
}

/// [`check`] of an object into a struct.
pub(crate) fn check_object(obj: &Map<String, Value>, s: &'static GoStruct) -> Result<(), Failure> {
    let mut d = Decoder { strukt: None, stack: Vec::new(), saved: None };
    d.fields(obj, s)?;
    d.saved.map_or(Ok(()), Err)
}

/// A field of a JSON object as Go's decoder binds it: the last key naming it, exactly or but
/// for ASCII case.
pub(crate) fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.iter().filter(|(k, _)| k.as_str() == name || k.eq_ignore_ascii_case(name)).map(|(_, v)| v).next_back()
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
            let found = s
                .fields
                .iter()
                .find(|(n, _)| *n == key)
                .or_else(|| s.fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(key)));
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

/// Go's text for JSON that does not parse (`scanner.go`'s errors), or `None` if it does:
/// `whole` as `json.Unmarshal` checks a whole document (anything after the value is an error;
/// running out is "unexpected end of JSON input"), else as a `json.Decoder` reads its first
/// value from a body (running out is "unexpected EOF").
pub(crate) fn syntax_error(data: &[u8], whole: bool) -> Option<String> {
    let eof = if whole { "unexpected end of JSON input" } else { "unexpected EOF" };
    // `checkValid` ends by stepping the scanner over a space (`scanner.eof`): a literal, number
    // or escape cut short is an "invalid character ' '" there, before running out is told.
    let padded = [data, b" "].concat();
    let mut scan = Scan { data: if whole { &padded } else { data }, at: 0 };
    let r = scan.value().and_then(|()| {
        scan.space();
        match scan.peek() {
            Some(c) if whole => Err(bad(c, "after top-level value")),
            _ => Ok(()),
        }
    });
    match r {
        Ok(()) => None,
        Err(None) => Some(eof.to_string()),
        Err(Some((c, context))) => Some(format!("invalid character {} {context}", quote_char(c))),
    }
}

/// `quoteChar`: a byte as the scanner's errors show it.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        c => {
            let q = crate::gojson::go_quote(&char::from(c).to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

/// A syntax error: the byte and what the scanner was looking for, or `None` for running out.
type ScanError = Option<(u8, String)>;

fn bad(c: u8, context: &str) -> ScanError {
    Some((c, context.to_string()))
}

/// A recursive reading of one JSON value with the states of Go's scanner.
struct Scan<'a> {
    data: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The next byte after white space (running out is an error).
    fn next_token(&mut self) -> Result<u8, ScanError> {
        self.space();
        self.peek().ok_or(None)
    }

    fn value(&mut self) -> Result<(), ScanError> {
        let c = self.next_token()?;
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true", "in literal true"),
            b'f' => self.literal(b"false", "in literal false"),
            b'n' => self.literal(b"null", "in literal null"),
            c => Err(bad(c, "looking for beginning of value")),
        }
    }

    fn object(&mut self) -> Result<(), ScanError> {
        self.at += 1;
        if self.next_token()? == b'}' {
            self.at += 1;
            return Ok(());
        }
        loop {
            match self.next_token()? {
                b'"' => self.string()?,
                c => return Err(bad(c, "looking for beginning of object key string")),
            }
            match self.next_token()? {
                b':' => self.at += 1,
                c => return Err(bad(c, "after object key")),
            }
            self.value()?;
            match self.next_token()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Ok(());
                }
                c => return Err(bad(c, "after object key:value pair")),
            }
        }
    }

    fn array(&mut self) -> Result<(), ScanError> {
        self.at += 1;
        if self.next_token()? == b']' {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.value()?;
            match self.next_token()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Ok(());
                }
                c => return Err(bad(c, "after array element")),
            }
        }
    }

    fn string(&mut self) -> Result<(), ScanError> {
        self.at += 1;
        loop {
            let c = self.peek().ok_or(None)?;
            self.at += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => {
                    let e = self.peek().ok_or(None)?;
                    self.at += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            for _ in 0..4 {
                                let h = self.peek().ok_or(None)?;
                                if !h.is_ascii_hexdigit() {
                                    return Err(bad(h, "in \\u hexadecimal character escape"));
                                }
                                self.at += 1;
                            }
                        }
                        e => return Err(bad(e, "in string escape code")),
                    }
                }
                c if c < 0x20 => return Err(bad(c, "in string literal")),
                _ => {}
            }
        }
    }

    /// Digits, at least one (`context` names the part of the number they are).
    fn digits(&mut self, context: &'static str) -> Result<(), ScanError> {
        match self.peek() {
            Some(b'0'..=b'9') => {}
            Some(c) => return Err(bad(c, context)),
            None => return Err(None),
        }
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        Ok(())
    }

    /// A number; at the end of the data it is complete where it may end (a decoder's top-level
    /// number), its end otherwise read by the caller.
    fn number(&mut self) -> Result<(), ScanError> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        if self.peek() == Some(b'0') {
            self.at += 1;
        } else {
            self.digits("in numeric literal")?;
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.digits("after decimal point in numeric literal")?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.digits("in exponent of numeric literal")?;
        }
        Ok(())
    }

    fn literal(&mut self, word: &'static [u8], context: &'static str) -> Result<(), ScanError> {
        self.at += 1;
        for &want in &word[1..] {
            match self.peek() {
                Some(c) if c == want => self.at += 1,
                Some(c) => {
                    // The context names the letter expected: "in literal true (expecting 'r')".
                    return Err(bad(c, &format!("{context} (expecting '{}')", char::from(want))));
                }
                None => return Err(None),
            }
        }
        Ok(())
    }
}

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
        Value::Null => Ok(()),
        Value::Object(props) => props.values().try_for_each(|p| check(p, TOOL_PROPERTY_TYPE)),
        _ => Err(Failure::Other("Value looks like object, but can't find closing '}' symbol".into())),
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

    #[test]
    fn syntax_errors_have_the_texts_of_gos_scanner() {
        // Each as the real server answered a body of it (a decoder), or `json.Unmarshal` (whole).
        let body = |s: &str| syntax_error(s.as_bytes(), false);
        assert_eq!(body(r#"{"model" 5}"#).as_deref(), Some("invalid character '5' after object key"));
        assert_eq!(body(r#"{"a":"x" "y"}"#).as_deref(), Some("invalid character '\"' after object key:value pair"));
        assert_eq!(body("[1 2]").as_deref(), Some("invalid character '2' after array element"));
        assert_eq!(body(r#"{"a":tru}"#).as_deref(), Some("invalid character '}' in literal true (expecting 'e')"));
        assert_eq!(body(r#"{"a":-x}"#).as_deref(), Some("invalid character 'x' in numeric literal"));
        assert_eq!(
            body(r#"{"a":1.x}"#).as_deref(),
            Some("invalid character 'x' after decimal point in numeric literal")
        );
        assert_eq!(body(r#"{"a":"\q"}"#).as_deref(), Some("invalid character 'q' in string escape code"));
        assert_eq!(
            body(r#"{"a":"\u12g4"}"#).as_deref(),
            Some("invalid character 'g' in \\u hexadecimal character escape")
        );
        assert_eq!(
            body(r#"{5:1}"#).as_deref(),
            Some("invalid character '5' looking for beginning of object key string")
        );
        assert_eq!(body("{\"a\":\"x\ny\"}").as_deref(), Some("invalid character '\\n' in string literal"));
        assert_eq!(body(r#"{"a":1"#).as_deref(), Some("unexpected EOF"));
        assert_eq!(body("nul").as_deref(), Some("unexpected EOF"));
        assert_eq!(body(r#"{"a":[1,{"b":null}]} trailing"#), None, "a decoder reads the first value only");
        let whole = |s: &str| syntax_error(s.as_bytes(), true);
        assert_eq!(whole("nul").as_deref(), Some("invalid character ' ' in literal null (expecting 'l')"));
        assert_eq!(whole(r#"{"a":1"#).as_deref(), Some("unexpected end of JSON input"));
        assert_eq!(whole(r#"{"a":1} x"#).as_deref(), Some("invalid character 'x' after top-level value"));
        assert_eq!(whole("12"), None);
    }
}
