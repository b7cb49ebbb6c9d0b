//! What llama-server makes of a `format` schema before it samples: Ollama v0.33 passes the
//! schema unchanged as `json_schema` (llm/llama_server.go v0.33.0-rc2 1584-1596) to the
//! llama-server it builds from llama.cpp b10488 (LLAMA_CPP_VERSION; llama/server/CMakeLists.txt
//! 112-188), whose conversion to a grammar refuses some schemas with a 400, as does the grammar
//! parser after it ([`refusal`]), and which constrains a string to its `pattern` only where it
//! can read the pattern ([`Pattern`]).
//!
//! Ported from llama.cpp's `common/json-schema.cpp` (the schema builder: it throws at the first
//! problem, "JSON schema error at PATH: ...") and `common/json-schema-to-grammar.cpp` (the
//! converter: `_visit_pattern` collects "Invalid pattern ..." errors, one line each, and lets an
//! unsupported pattern accept any string with a warning on the server's stderr). The builder's
//! order of checks decides which error a schema with several gets, so the port keeps it.

mod pattern;

use pattern::{Pattern, scan};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Why llama-server refuses a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The conversion failed: its text after llama.cpp's "JSON schema conversion failed:\n"
    /// (the builder's first error, or one line per invalid pattern).
    Conversion(String),
    /// The grammar converted, but llama.cpp's grammar parser refuses a repetition of more than
    /// [`MAX_LEAST_REPEATS`] (the request then fails as its slot starts: "Failed to initialize
    /// samplers: failed to parse grammar").
    Grammar,
}

/// The largest minimum of a `{m,n}` repetition the grammar parser takes. Measured on the real
/// server (Ollama 0.33, llama.cpp b10488): `^a{2000}$`, `minLength: 2000`, `minItems: 2001`
/// (its separator's repetition: 2000) and `^a{0,3000}$` pass; `^a{2001}$`, `^(ab){2001}$`,
/// `^[ab]{2001}$`, `minLength: 2001` and `minItems: 2002` fail. Only the minimum counts here.
pub(crate) const MAX_LEAST_REPEATS: u64 = 2000;

/// Whether llama-server refuses `schema` as a `format`, and why; `None` where it samples.
pub(crate) fn refusal(schema: &Value) -> Option<Refusal> {
    let mut b = Builder { root: schema, built: HashSet::new(), patterns: Vec::new(), least_repeats: 0 };
    if let Err(e) = b.schema(schema, "#") {
        return Some(Refusal::Conversion(e));
    }
    let mut invalid = Vec::new();
    for p in &b.patterns {
        match scan(p) {
            (Pattern::Invalid(why), _) => invalid.push(format!("Invalid pattern {p}: {why}")),
            (Pattern::Constrains(_), least) => b.least_repeats = b.least_repeats.max(least),
            (Pattern::AnyString(_), _) => {}
        }
    }
    if !invalid.is_empty() {
        return Some(Refusal::Conversion(invalid.join("\n")));
    }
    (b.least_repeats > MAX_LEAST_REPEATS).then_some(Refusal::Grammar)
}

/// `common_schema_builder`: walks the schema as llama.cpp builds its tree, failing at the first
/// problem with the path it was found at, and keeps the patterns of the strings it built.
struct Builder<'a> {
    root: &'a Value,
    /// `$ref`s already built (each target is built once; a cycle stops at the second visit).
    built: HashSet<String>,
    patterns: Vec<String>,
    /// The largest minimum of a repetition the grammar will hold, outside patterns: a string's
    /// `minLength` (where no pattern or known format replaces it), an array's `minItems` less
    /// the first item.
    least_repeats: u64,
}

type Built = Result<(), String>;

fn at(path: &str, msg: impl std::fmt::Display) -> String {
    format!("JSON schema error at {path}: {msg}")
}

fn fail(path: &str, msg: impl std::fmt::Display) -> Built {
    Err(at(path, msg))
}

/// The schema's own string formats (`get_format`): a format it does not know is no format.
fn known_format(m: &Map<String, Value>, path: &str) -> Result<bool, String> {
    match m.get("format") {
        None => Ok(false),
        Some(Value::String(f)) => Ok(grammar_format(f).is_some()),
        Some(_) => Err(at(path, "format must be a string")),
    }
}

/// The string format llama.cpp's grammar writes a rule of its own for (`get_format`): `date`,
/// `time`, `date-time`, and `uuid` (also `uuid1` to `uuid5`); `None` for any other, which the
/// grammar leaves a plain string.
pub(crate) fn grammar_format(f: &str) -> Option<&'static str> {
    match f {
        "date" => Some("date"),
        "time" => Some("time"),
        "date-time" => Some("date-time"),
        "uuid" | "uuid1" | "uuid2" | "uuid3" | "uuid4" | "uuid5" => Some("uuid"),
        _ => None,
    }
}

impl<'a> Builder<'a> {
    fn schema(&mut self, s: &Value, path: &str) -> Built {
        let Value::Object(m) = s else { return fail(path, "schema must be an object") };
        if let Some(r) = m.get("$ref") {
            return self.reference(r, path);
        }
        if m.contains_key("oneOf") || m.contains_key("anyOf") {
            let key = if m.contains_key("oneOf") { "oneOf" } else { "anyOf" };
            return self.alternatives(&m[key], &format!("{path}/{key}"));
        }
        let ty = m.get("type").unwrap_or(&Value::Null);
        if let Value::Array(types) = ty {
            if types.is_empty() {
                return fail(path, "type must not be empty");
            }
            for (i, t) in types.iter().enumerate() {
                let mut alt = m.clone();
                alt.insert("type".into(), t.clone());
                self.schema(&Value::Object(alt), &format!("{path}/type/{i}"))?;
            }
            return Ok(());
        }
        if m.contains_key("const") {
            return Ok(());
        }
        if let Some(e) = m.get("enum") {
            return match e {
                Value::Array(values) if !values.is_empty() => Ok(()),
                _ => fail(path, "enum must be a non-empty array"),
            };
        }
        let name = match ty {
            Value::Null => "",
            Value::String(t) => t.as_str(),
            _ => return fail(path, "type must be a string or an array of strings"),
        };
        let has_properties =
            m.contains_key("properties") || m.get("additionalProperties").is_some_and(|a| *a != Value::Bool(true));
        match name {
            "" if has_properties => self.object(m, path),
            "" if m.contains_key("allOf") => self.alternatives(&m["allOf"], &format!("{path}/allOf")),
            "" if m.contains_key("items") || m.contains_key("prefixItems") => self.array(m, path),
            "" => {
                if m.contains_key("pattern") || known_format(m, path)? {
                    self.string(m, path)
                } else {
                    Ok(())
                }
            }
            "object" if !has_properties && m.contains_key("allOf") => {
                self.alternatives(&m["allOf"], &format!("{path}/allOf"))
            }
            "object" => self.object(m, path),
            "string" if m.contains_key("allOf") => self.alternatives(&m["allOf"], &format!("{path}/allOf")),
            "string" => self.string(m, path),
            "array" => self.array(m, path),
            "integer" => self.integer(m, path),
            "number" | "boolean" | "null" => Ok(()),
            other => fail(path, format!("unrecognized type {other}")),
        }
    }

    fn reference(&mut self, r: &Value, path: &str) -> Built {
        let Value::String(r) = r else { return fail(path, "$ref must be a string") };
        if !r.starts_with("#/") {
            return fail(path, format!("unsupported $ref {r}, only references into the same document are supported"));
        }
        if !self.built.insert(r.clone()) {
            return Ok(());
        }
        let target = self.resolve(r, path)?;
        self.schema(target, r)
    }

    /// The pointer walk of `resolve_ref`: `/`-separated names (no `~0`/`~1` decoding), an
    /// array's index read as `stoull` reads it.
    fn resolve(&self, r: &str, path: &str) -> Result<&'a Value, String> {
        let mut target = self.root;
        for sel in r[1..].split('/').skip(1) {
            target = match target {
                Value::Object(m) if m.contains_key(sel) => &m[sel],
                Value::Array(a) => {
                    let n = sel.trim_start();
                    let n = n.strip_prefix('+').unwrap_or(n);
                    let digits = &n[..n.bytes().take_while(u8::is_ascii_digit).count()];
                    match digits.parse::<usize>().ok().and_then(|i| a.get(i)) {
                        Some(v) => v,
                        None => return Err(at(path, format!("cannot resolve $ref {r}, {sel} is out of range"))),
                    }
                }
                _ => return Err(at(path, format!("cannot resolve $ref {r}, {sel} not found"))),
            };
        }
        Ok(target)
    }

    fn alternatives(&mut self, alts: &Value, path: &str) -> Built {
        let Value::Array(alts) = alts else { return fail(path, "must be an array of schemas") };
        if alts.is_empty() {
            return fail(path, "must not be empty");
        }
        for (i, alt) in alts.iter().enumerate() {
            self.schema(alt, &format!("{path}/{i}"))?;
        }
        Ok(())
    }

    fn object(&mut self, m: &Map<String, Value>, path: &str) -> Built {
        if let Some(props) = m.get("properties") {
            let Value::Object(props) = props else { return fail(path, "properties must be an object") };
            for (name, prop) in props {
                self.schema(prop, &format!("{path}/properties/{name}"))?;
            }
        }
        match m.get("additionalProperties") {
            None | Some(Value::Bool(_)) => Ok(()),
            Some(extra @ Value::Object(_)) => self.schema(extra, &format!("{path}/additionalProperties")),
            Some(_) => fail(path, "additionalProperties must be a boolean or a schema"),
        }
    }

    fn array(&mut self, m: &Map<String, Value>, path: &str) -> Built {
        let key = if m.contains_key("items") {
            Some("items")
        } else {
            m.contains_key("prefixItems").then_some("prefixItems")
        };
        if let Some(key) = key {
            match &m[key] {
                Value::Array(items) => {
                    // A tuple: its length is its items', no counts are read.
                    for (i, item) in items.iter().enumerate() {
                        self.schema(item, &format!("{path}/{key}/{i}"))?;
                    }
                    return Ok(());
                }
                items => self.schema(items, &format!("{path}/{key}"))?,
            }
        }
        let least = count(m, "minItems", path)?;
        self.least_repeats = self.least_repeats.max(least.saturating_sub(1));
        count(m, "maxItems", path).map(|_| ())
    }

    fn string(&mut self, m: &Map<String, Value>, path: &str) -> Built {
        if let Some(p) = m.get("pattern") {
            let Value::String(p) = p else { return fail(path, "pattern must be a string") };
            self.patterns.push(p.clone());
        }
        let format = known_format(m, path)?;
        let least = count(m, "minLength", path)?;
        if !m.contains_key("pattern") && !format {
            self.least_repeats = self.least_repeats.max(least);
        }
        count(m, "maxLength", path).map(|_| ())
    }

    fn integer(&mut self, m: &Map<String, Value>, path: &str) -> Built {
        for pair in [["minimum", "exclusiveMinimum"], ["maximum", "exclusiveMaximum"]] {
            if let Some(key) = pair.into_iter().find(|k| m.contains_key(*k)) {
                if !m[key].is_number() {
                    return fail(path, format!("{key} must be a number"));
                }
            }
        }
        Ok(())
    }
}

/// `get_count`: an integer whose C++ `int` is not negative (a float such as `1.0` is refused);
/// 0 where the key is absent.
fn count(m: &Map<String, Value>, key: &str, path: &str) -> Result<u64, String> {
    let Some(v) = m.get(key) else { return Ok(0) };
    // nlohmann's get<int>() of a 64-bit integer keeps its low 32 bits.
    let as_int = v.as_i64().map(|x| x as i32).or_else(|| v.as_u64().map(|x| x as i32));
    match as_int {
        Some(x) if x >= 0 => Ok(x as u64),
        _ => Err(at(path, format!("{key} must be a non-negative integer"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(s: Value) -> String {
        match refusal(&s) {
            Some(Refusal::Conversion(e)) => e,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn the_builder_names_the_first_problem_and_where() {
        assert_eq!(err(json!({"type": "nonsense"})), "JSON schema error at #: unrecognized type nonsense");
        assert_eq!(err(json!({"type": 5})), "JSON schema error at #: type must be a string or an array of strings");
        assert_eq!(
            err(json!({"type": "object", "properties": {"b": {"type": 5}, "a": {"type": 6}}})),
            "JSON schema error at #/properties/b: type must be a string or an array of strings",
            "properties in the schema's order"
        );
        assert_eq!(
            err(json!({"type": ["string", 5]})),
            "JSON schema error at #/type/1: type must be a string or an array of strings"
        );
        assert_eq!(
            err(json!({"type": "array", "items": {"type": 7}})),
            "JSON schema error at #/items: type must be a string or an array of strings"
        );
        assert_eq!(err(json!({"properties": 5})), "JSON schema error at #: properties must be an object");
        assert_eq!(err(json!({"enum": []})), "JSON schema error at #: enum must be a non-empty array");
        assert_eq!(err(json!({"anyOf": [{"type": "x"}]})), "JSON schema error at #/anyOf/0: unrecognized type x");
        assert_eq!(
            err(json!({"type": "string", "minLength": 1.0})),
            "JSON schema error at #: minLength must be a non-negative integer"
        );
        assert_eq!(
            err(json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "y"}}})),
            "JSON schema error at #/$defs/A: unrecognized type y",
            "a reference's target is built at the reference's own text"
        );
        assert_eq!(
            err(json!({"$ref": "#/$defs/B", "$defs": {}})),
            "JSON schema error at #: cannot resolve $ref #/$defs/B, B not found"
        );
        assert_eq!(
            err(json!({"$ref": "other.json#/a"})),
            "JSON schema error at #: unsupported $ref other.json#/a, only references into the same document are supported"
        );
        // What the builder never reads passes: a `required` that is no array, an enum or const
        // beside a bad type, keywords of a type it does not constrain, unreferenced $defs.
        for ok in [
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": 5}),
            json!({"type": 5, "enum": ["a"]}),
            json!({"type": "nonsense", "const": 1}),
            json!({"type": "number", "minimum": "low"}),
            json!({"type": "string", "$defs": {"A": {"type": "z"}}}),
            json!({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}}),
            json!({"type": "array", "items": [{"type": "string"}], "minItems": -1}),
        ] {
            assert_eq!(refusal(&ok), None, "{ok}");
        }
    }

    #[test]
    fn every_invalid_pattern_is_a_line_of_the_error() {
        assert_eq!(
            err(
                json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a$"}, "b": {"pattern": "^*$"}}})
            ),
            "Invalid pattern ^(a$: unbalanced parentheses\nInvalid pattern ^*$: nothing to repeat"
        );
    }

    #[test]
    fn a_repetition_of_more_than_two_thousand_at_least_is_refused_by_the_grammar_parser() {
        // The real server's answers (MAX_LEAST_REPEATS): each pair the last that passes and the
        // first that fails.
        for (ok, refused) in [
            (json!({"pattern": "^a{2000}$"}), json!({"pattern": "^a{2001}$"})),
            (json!({"pattern": "^(ab){2000}$"}), json!({"pattern": "^(ab){2001}$"})),
            (json!({"pattern": "^a{0,3000}$"}), json!({"pattern": "^a{2001,}$"})),
            (json!({"type": "string", "minLength": 2000}), json!({"type": "string", "minLength": 2001})),
            (json!({"type": "array", "minItems": 2001}), json!({"type": "array", "minItems": 2002})),
        ] {
            assert_eq!(refusal(&ok), None, "{ok}");
            assert_eq!(refusal(&refused), Some(Refusal::Grammar), "{refused}");
        }
        // Where the grammar holds no such repetition: a pattern it cannot read, a format's own
        // rule, a tuple; and a conversion error is the answer before any grammar is parsed.
        for ok in [
            json!({"pattern": "[a]{3000}"}),
            json!({"type": "string", "format": "date", "minLength": 3000}),
            json!({"type": "string", "pattern": "^a$", "minLength": 3000}),
            json!({"type": "array", "items": [{}], "minItems": 3000}),
        ] {
            assert_eq!(refusal(&ok), None, "{ok}");
        }
        assert!(matches!(refusal(&json!({"pattern": "^a{3000}(b$"})), Some(Refusal::Conversion(_))));
    }
}
