//! JSON documents synthesized from a JSON Schema: the arguments of a simulated tool call and
//! the answer to a request with a `format` schema.
//!
//! The real server constrains sampling with a grammar built from the schema (llama.cpp's
//! `json-schema-to-grammar`, reached from `llm/llama_server.go`'s `Format` handling), so a
//! constrained answer is valid against it. This module does the same by construction, seeded:
//! `type` (one or several), `enum`, `const`, `properties`, `required`, optional properties
//! (about half of them), `additionalProperties` (never added), `items`, tuples (`prefixItems`,
//! or `items` as an array: exactly their items), `minItems`/`maxItems`, `uniqueItems`,
//! `minLength`/`maxLength`, `minimum`/`maximum` and their exclusive forms, `multipleOf`,
//! `format` (`date`, `time`, `date-time`, `uuid`, and the ones llama.cpp leaves free: `email`,
//! `uri`, `uri-reference`, `hostname`, `ipv4`, `ipv6`, `duration`, `json-pointer`), `pattern` (a
//! string matching it, in printable ASCII where the pattern allows), `anyOf`/`oneOf` (one
//! branch, one with a pattern it can read where there is one), `allOf` (object branches merged), and local `$ref`s (`#/$defs/...`, `#/definitions/...`). Required
//! properties come first, then the optional ones, each in the schema's order, as llama.cpp's
//! object rule writes them (`_build_object_rule`). An answer stays small whatever a schema
//! allows: a few items or repetitions past the minimum ([`FEW_MORE`]), and at most
//! [`MAX_ITEMS`] items and [`MAX_CHARS`] characters where a minimum asks for more. Not
//! honoured: remote `$ref`s (llama-server refuses them: [`crate::grammar`]).

use crate::seed::SimRng;
use crate::words::WORDS;
use rand::RngExt;
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind};
use serde_json::{Map, Number, Value};

/// Nesting beyond this produces the smallest value the schema allows (recursive `$ref`s end).
const MAX_DEPTH: usize = 8;
/// At most this many items beyond an array's `minItems`, and of a pattern's repetition beyond
/// its minimum: a model writes a few, whatever `maxItems: 1000000` allows.
const FEW_MORE: usize = 4;
/// No array longer, no string of more characters, whatever the schema asks: bounds on one
/// answer's size (a real model's is bounded by its `num_predict`; a tool's `minLength: 10^9`
/// would otherwise hold the simulator for minutes).
const MAX_ITEMS: usize = 256;
const MAX_CHARS: usize = 16_384;

/// Synthesizes a document valid against `schema`; `words` is the number of words in each
/// free string (how long the answer grows).
pub(crate) fn synthesize(schema: &Value, rng: &mut SimRng, words: usize) -> Value {
    Synth { root: schema, rng, words: words.max(1) }.value(schema, 0)
}

struct Synth<'a> {
    root: &'a Value,
    rng: &'a mut SimRng,
    words: usize,
}

impl Synth<'_> {
    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        let Value::Object(s) = schema else {
            // `true` (anything) or a malformed schema: a string.
            return Value::String(self.words_text(1));
        };
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let target = r.strip_prefix('#').and_then(|p| self.root.pointer(p)).cloned();
            if let Some(t) = target {
                if depth < MAX_DEPTH {
                    return self.value(&t, depth + 1);
                }
                return minimal(&t);
            }
        }
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        if let Some(Value::Array(e)) = s.get("enum") {
            if !e.is_empty() {
                let i = self.rng.random_range(0..e.len());
                return e[i].clone();
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = s.get(key) {
                // A branch whose pattern this module cannot read (pydantic's `Decimal` as a
                // string: a lookahead) only where no other branch is left.
                let readable: Vec<&Value> = branches.iter().filter(|b| readable_pattern(b)).collect();
                let pool: Vec<&Value> = if readable.is_empty() { branches.iter().collect() } else { readable };
                if !pool.is_empty() {
                    let b = pool[self.rng.random_range(0..pool.len())].clone();
                    return self.value(&b, depth + 1);
                }
            }
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            let mut merged = s.clone();
            merged.remove("allOf");
            for b in all {
                let b = match b.get("$ref").and_then(Value::as_str) {
                    Some(r) => r.strip_prefix('#').and_then(|p| self.root.pointer(p)).cloned().unwrap_or(Value::Null),
                    None => b.clone(),
                };
                if let Value::Object(b) = b {
                    merge_into(&mut merged, &b);
                }
            }
            return self.value(&Value::Object(merged), depth + 1);
        }
        let ty = self.pick_type(s);
        match ty.as_str() {
            "object" => self.object(s, depth),
            "array" => self.array(s, depth),
            "integer" => self.integer(s),
            "number" => self.number(s),
            "boolean" => Value::Bool(self.rng.random_bool(0.5)),
            "null" => Value::Null,
            _ => self.string(s),
        }
    }

    /// The type to produce: the schema's (one of them, preferring non-null), else inferred
    /// from the keywords present.
    fn pick_type(&mut self, s: &Map<String, Value>) -> String {
        match s.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => {
                let named: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
                let non_null: Vec<&str> = named.iter().copied().filter(|t| *t != "null").collect();
                let pool = if non_null.is_empty() { named } else { non_null };
                if pool.is_empty() {
                    return "string".into();
                }
                pool[self.rng.random_range(0..pool.len())].to_string()
            }
            _ if s.contains_key("properties") || s.contains_key("required") => "object".into(),
            _ if s.contains_key("items") || s.contains_key("prefixItems") => "array".into(),
            _ if s.contains_key("minimum") || s.contains_key("maximum") => "number".into(),
            _ => "string".into(),
        }
    }

    fn object(&mut self, s: &Map<String, Value>, depth: usize) -> Value {
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map_or(Vec::new(), |r| r.iter().filter_map(Value::as_str).collect());
        let mut out = Map::new();
        if let Some(Value::Object(props)) = s.get("properties") {
            let (first, rest): (Vec<_>, Vec<_>) = props.iter().partition(|(k, _)| required.contains(&k.as_str()));
            for (k, sub) in first {
                let v = if depth < MAX_DEPTH { self.value(sub, depth + 1) } else { minimal(sub) };
                out.insert(k.clone(), v);
            }
            for (k, sub) in rest {
                if depth < MAX_DEPTH && self.rng.random_bool(0.5) {
                    out.insert(k.clone(), self.value(sub, depth + 1));
                }
            }
        }
        // Required names without a property schema: anything goes.
        for k in required {
            if !out.contains_key(k) {
                out.insert(k.to_string(), Value::String(self.words_text(1)));
            }
        }
        Value::Object(out)
    }

    fn array(&mut self, s: &Map<String, Value>, depth: usize) -> Value {
        // A tuple (`prefixItems`, or `items` as an array): exactly its items, as llama.cpp's
        // grammar writes it; where both are given, `items` is the one it reads
        // (common/json-schema.cpp `parse_array`).
        let key = if s.contains_key("items") { "items" } else { "prefixItems" };
        if let Some(Value::Array(tuple)) = s.get(key) {
            return Value::Array(tuple.iter().map(|item| self.value(item, depth + 1)).collect());
        }
        let min = (s.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize).min(MAX_ITEMS);
        let max = s.get("maxItems").and_then(Value::as_u64).map_or(min.max(3), |m| m as usize).max(min);
        let max = max.min(min.max(1) + FEW_MORE);
        let n = if depth >= MAX_DEPTH { min } else { self.rng.random_range(min.max(1).min(max)..=max) };
        let items = s.get("items").cloned().unwrap_or(Value::Bool(true));
        let unique = s.get("uniqueItems").and_then(Value::as_bool).unwrap_or(false);
        let mut out: Vec<Value> = Vec::with_capacity(n);
        let mut attempts = 0;
        while out.len() < n && attempts < n * 20 + 20 {
            attempts += 1;
            let v = self.value(&items, depth + 1);
            if unique && out.contains(&v) {
                continue;
            }
            out.push(v);
        }
        Value::Array(out)
    }

    fn integer(&mut self, s: &Map<String, Value>) -> Value {
        let f = |k: &str| s.get(k).and_then(Value::as_f64);
        let lo = [f("minimum").map(|v| v.ceil() as i64), f("exclusiveMinimum").map(|v| v.floor() as i64 + 1)]
            .into_iter()
            .flatten()
            .max();
        let hi = [f("maximum").map(|v| v.floor() as i64), f("exclusiveMaximum").map(|v| v.ceil() as i64 - 1)]
            .into_iter()
            .flatten()
            .min();
        let (lo, hi) = match (lo, hi) {
            (Some(a), Some(b)) => (a, b),
            (Some(a), None) => (a, a + 100),
            (None, Some(b)) => (b - 100, b),
            (None, None) => (0, 100),
        };
        let hi = hi.max(lo);
        let mut v = self.rng.random_range(lo..=hi);
        if let Some(m) = s.get("multipleOf").and_then(Value::as_f64).filter(|m| *m >= 1.0 && m.fract() == 0.0) {
            let m = m as i64;
            let first = lo.div_euclid(m) * m + if lo.rem_euclid(m) == 0 { 0 } else { m };
            let count = if hi >= first { (hi - first) / m + 1 } else { 1 };
            v = first + m * self.rng.random_range(0..count.max(1));
        }
        Value::Number(v.into())
    }

    fn number(&mut self, s: &Map<String, Value>) -> Value {
        let f = |k: &str| s.get(k).and_then(Value::as_f64);
        let lo = [f("minimum"), f("exclusiveMinimum")].into_iter().flatten().reduce(f64::max);
        let hi = [f("maximum"), f("exclusiveMaximum")].into_iter().flatten().reduce(f64::min);
        let (lo, hi) = match (lo, hi) {
            (Some(a), Some(b)) => (a, b.max(a)),
            (Some(a), None) => (a, a + 100.0),
            (None, Some(b)) => (b - 100.0, b),
            (None, None) => (0.0, 100.0),
        };
        if s.contains_key("multipleOf") {
            // Multiples of a fraction are exact only as integers times it: use the integer path.
            return self.integer(s);
        }
        // Two decimals, strictly inside the range so exclusive bounds hold.
        let mut v = lo + (hi - lo) * self.rng.random_range(0.05..0.95);
        v = (v * 100.0).round() / 100.0;
        if v <= lo || v >= hi {
            v = (lo + hi) / 2.0;
        }
        Number::from_f64(v).map_or(Value::Null, Value::Number)
    }

    fn string(&mut self, s: &Map<String, Value>) -> Value {
        // A pattern's grammar leaves out the lengths and the format (json-schema-to-grammar.cpp's
        // string case); so does a format's.
        if let Some(text) = s.get("pattern").and_then(Value::as_str).and_then(|p| self.matching(p)) {
            return Value::String(text);
        }
        let min = (s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize).min(MAX_CHARS);
        let max = s.get("maxLength").and_then(Value::as_u64).map(|m| m as usize);
        let format = s.get("format").and_then(Value::as_str);
        // A format the grammar has a rule for is written by it, lengths aside.
        let ruled = format.and_then(crate::grammar::grammar_format);
        let text = match ruled.or(format) {
            Some("date") => format!("2026-{:02}-{:02}", self.rng.random_range(1..=12), self.rng.random_range(1..=28)),
            Some("time") => {
                format!(
                    "{:02}:{:02}:{:02}Z",
                    self.rng.random_range(0..24),
                    self.rng.random_range(0..60),
                    self.rng.random_range(0..60)
                )
            }
            Some("date-time") => format!(
                "2026-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                self.rng.random_range(1..=12),
                self.rng.random_range(1..=28),
                self.rng.random_range(0..24),
                self.rng.random_range(0..60),
                self.rng.random_range(0..60)
            ),
            Some("uuid") => {
                let a: u128 = self.rng.random();
                let h = format!("{a:032x}");
                format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
            }
            Some("email" | "idn-email") => format!("{}@example.com", self.word()),
            // Formats llama.cpp's grammar leaves free (any string), written as a model asked
            // for one would, so that a client validating its own type (pydantic's `HttpUrl`,
            // `IPv4Address`, `timedelta`) reads the answer.
            Some("uri" | "url" | "iri") => format!("https://example.com/{}", self.word()),
            Some("uri-reference" | "iri-reference" | "json-pointer") => format!("/{}/{}", self.word(), self.word()),
            Some("hostname" | "idn-hostname") => format!("{}.example.com", self.word()),
            Some("ipv4") => format!(
                "10.{}.{}.{}",
                self.rng.random_range(0..256),
                self.rng.random_range(0..256),
                self.rng.random_range(1..255)
            ),
            Some("ipv6") => format!("2001:db8::{:x}", self.rng.random_range(1..0xffffu32)),
            Some("duration") => format!("PT{}M", self.rng.random_range(1..120)),
            _ => self.words_text(self.words),
        };
        if ruled.is_some() {
            return Value::String(text);
        }
        let mut chars: Vec<char> = text.chars().collect();
        while chars.len() < min {
            chars.push('x');
        }
        if let Some(m) = max {
            chars.truncate(m.max(min));
        }
        Value::String(chars.into_iter().collect())
    }

    /// A string the pattern matches in full (its anchors, where it has them, then hold too),
    /// whether or not llama-server's grammar can constrain to it ([`crate::grammar::pattern`]):
    /// a model asked for it writes one. `None` where the regex is not one Rust's can read.
    fn matching(&mut self, pattern: &str) -> Option<String> {
        let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
        let regex = rand_regex::Regex::with_hir(printable(hir), FEW_MORE as u32).ok()?;
        if regex.capacity() > MAX_CHARS {
            return None;
        }
        let text: Result<String, _> = self.rng.sample(&regex);
        text.ok()
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.rng.random_range(0..WORDS.len())]
    }

    fn words_text(&mut self, n: usize) -> String {
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.word());
        }
        out
    }
}

/// Whether a schema's `pattern`, where it has one, is a regex this module can draw from.
fn readable_pattern(schema: &Value) -> bool {
    schema.get("pattern").and_then(Value::as_str).is_none_or(|p| regex_syntax::Parser::new().parse(p).is_ok())
}

/// The regex with its assertions dropped (a whole match satisfies `^`, `$` and `\A` at its
/// ends), each repetition at most [`FEW_MORE`] past its minimum, and each class cut to printable ASCII where that leaves some of it (`.`, `\d`, `[^,]`
/// would otherwise give any of a million code points).
fn printable(hir: Hir) -> Hir {
    match hir.into_kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Class(Class::Unicode(c)) => {
            let mut ascii = ClassUnicode::new([ClassUnicodeRange::new(' ', '~')]);
            ascii.intersect(&c);
            Hir::class(Class::Unicode(if ascii.ranges().is_empty() { c } else { ascii }))
        }
        HirKind::Repetition(mut r) => {
            r.sub = Box::new(printable(*r.sub));
            r.max = Some(r.max.unwrap_or(u32::MAX).min(r.min.saturating_add(FEW_MORE as u32)));
            Hir::repetition(r)
        }
        HirKind::Capture(mut c) => {
            c.sub = Box::new(printable(*c.sub));
            Hir::capture(c)
        }
        HirKind::Concat(v) => Hir::concat(v.into_iter().map(printable).collect()),
        HirKind::Alternation(v) => Hir::alternation(v.into_iter().map(printable).collect()),
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(l) => Hir::literal(l.0),
        HirKind::Class(c) => Hir::class(c),
    }
}

/// The smallest value a schema allows, without recursion (where nesting must end).
fn minimal(schema: &Value) -> Value {
    let Value::Object(s) = schema else { return Value::Null };
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return e.clone();
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            if ts.iter().any(|t| t == "null") {
                "null"
            } else {
                ts.first().and_then(Value::as_str).unwrap_or("null")
            }
        }
        _ => "null",
    };
    match ty {
        "object" => {
            let mut out = Map::new();
            let props = s.get("properties").and_then(Value::as_object);
            for k in s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                // One level only: a required property's own required properties are not filled.
                let v = props.and_then(|p| p.get(k)).map_or(Value::Null, |p| match p.get("type") {
                    Some(Value::String(t)) if t == "object" => Value::Object(Map::new()),
                    _ => minimal_scalar(p),
                });
                out.insert(k.to_string(), v);
            }
            Value::Object(out)
        }
        "array" => Value::Array(Vec::new()),
        "string" => Value::String("x".repeat(s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize)),
        "integer" | "number" => Value::Number(s.get("minimum").and_then(Value::as_i64).unwrap_or(0).into()),
        "boolean" => Value::Bool(false),
        _ => Value::Null,
    }
}

/// [`minimal`] for a schema that is not an object.
fn minimal_scalar(schema: &Value) -> Value {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => Value::Object(Map::new()),
        _ => minimal(schema),
    }
}

/// Merges an `allOf` branch into the schema: properties and required names are united, other
/// keywords are taken where the schema has none.
fn merge_into(into: &mut Map<String, Value>, branch: &Map<String, Value>) {
    for (k, v) in branch {
        match (k.as_str(), into.get_mut(k), v) {
            ("properties", Some(Value::Object(p)), Value::Object(q)) => {
                for (pk, pv) in q {
                    p.entry(pk.clone()).or_insert_with(|| pv.clone());
                }
            }
            ("required", Some(Value::Array(r)), Value::Array(q)) => {
                for x in q {
                    if !r.contains(x) {
                        r.push(x.clone());
                    }
                }
            }
            (_, None, _) => {
                into.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
