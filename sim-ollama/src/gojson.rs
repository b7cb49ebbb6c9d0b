//! JSON exactly as Go's `encoding/json` writes it, so bodies match the real server byte for
//! byte. A leaf: every encoder (wire formats, error shapes, routes) uses it.

use bytes::{BufMut, BytesMut};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;

/// A serde_json formatter that escapes `<`, `>`, `&`, U+2028 and U+2029 the way Go's
/// encoder does (`\u003c`...), so bodies match the real server byte for byte.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let esc: Option<&[u8]> = match c {
                '<' => Some(b"\\u003c"),
                '>' => Some(b"\\u003e"),
                '&' => Some(b"\\u0026"),
                '\u{2028}' => Some(b"\\u2028"),
                '\u{2029}' => Some(b"\\u2029"),
                _ => None,
            };
            if let Some(e) = esc {
                w.write_all(&fragment.as_bytes()[start..i])?;
                w.write_all(e)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
}

/// Serialises like Go's `json.Marshal`.
pub(crate) fn to_go_json<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_go_json(&mut out, v);
    out
}

/// Appends `v` serialised like Go's `json.Marshal`.
pub(crate) fn write_go_json<W: Write, T: Serialize + ?Sized>(out: &mut W, v: &T) {
    let mut ser = serde_json::Serializer::with_formatter(out, GoFormatter);
    // Serialising our own response types to memory cannot fail: no maps with non-string
    // keys, no I/O errors.
    let _ = v.serialize(&mut ser);
}

/// Appends a JSON string literal.
pub(crate) fn write_json_str(out: &mut BytesMut, s: &str) {
    let mut w = out.writer();
    write_go_json(&mut w, s);
}

/// Sorts an object's keys, all the way down: how Go writes a `map[string]any`.
pub(crate) fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut pairs: Vec<(String, Value)> = m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// Go's `strconv.Quote` (the `%q` of its errors): `"` and `\\` escaped, printable characters as
/// they are, the usual escapes (`\\n`, `\\t`...), other control characters as `\\xHH` below
/// U+0080 and `\\uHHHH` above.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x80 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_quote_escapes_as_strconv_quote() {
        assert_eq!(super::go_quote("high"), "\"high\"");
        assert_eq!(super::go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(super::go_quote("\u{0}\n\u{7f}"), "\"\\x00\\n\\x7f\"");
        assert_eq!(super::go_quote("\u{85}é"), "\"\\u0085é\"");
    }
}
