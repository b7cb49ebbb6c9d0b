//! `keep_alive` values as the real server reads them: a JSON number is seconds (fractions
//! allowed), a string is a Go duration (`"10m"`, `"1h30m"`, `"0"`), negative means forever,
//! and a bare numeric string other than `"0"` is rejected with Go's own error text.

use serde_json::Value;
use std::time::Duration;

/// How long a model stays loaded after its last request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Until it is evicted or explicitly unloaded (a negative value).
    Forever,
    /// For this long; zero unloads as soon as the model is idle.
    For(Duration),
}

impl KeepAlive {
    /// The default of `OLLAMA_KEEP_ALIVE`: five minutes.
    pub const DEFAULT: KeepAlive = KeepAlive::For(Duration::from_secs(300));

    /// Whether this asks for an unload as soon as the model is idle.
    pub fn is_zero(&self) -> bool {
        matches!(self, KeepAlive::For(d) if d.is_zero())
    }

    /// Reads the request field. `null` means "not given".
    pub(crate) fn from_json(v: &Value) -> Result<Option<KeepAlive>, String> {
        match v {
            Value::Null => Ok(None),
            Value::Number(n) => {
                let secs = n.as_f64().unwrap_or(0.0);
                // Too large for a duration: as good as forever (the real server overflows).
                Ok(Some(if secs < 0.0 {
                    KeepAlive::Forever
                } else {
                    Duration::try_from_secs_f64(secs).map_or(KeepAlive::Forever, KeepAlive::For)
                }))
            }
            Value::String(s) => parse_go_duration(s).map(|ns| {
                Some(if ns < 0 { KeepAlive::Forever } else { KeepAlive::For(Duration::from_nanos(ns as u64)) })
            }),
            Value::Bool(_) => Err("Unsupported type: 'bool'".into()),
            Value::Array(_) => Err("Unsupported type: '[]interface {}'".into()),
            Value::Object(_) => Err("Unsupported type: 'map[string]interface {}'".into()),
        }
    }

    /// Reads `OLLAMA_KEEP_ALIVE`: a Go duration or bare integer seconds.
    pub fn from_env_value(s: &str) -> Result<KeepAlive, String> {
        let s = s.trim();
        if let Ok(secs) = s.parse::<i64>() {
            return Ok(if secs < 0 { KeepAlive::Forever } else { KeepAlive::For(Duration::from_secs(secs as u64)) });
        }
        parse_go_duration(s)
            .map(|ns| if ns < 0 { KeepAlive::Forever } else { KeepAlive::For(Duration::from_nanos(ns as u64)) })
    }
}

/// Parses a duration exactly as Go's `time.ParseDuration` does, with its error texts.
/// Returns nanoseconds (negative for negative durations).
pub(crate) fn parse_go_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next() {
        if c == '-' || c == '+' {
            neg = c == '-';
            s = &s[1..];
        }
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: f64 = 0.0;
    while !s.is_empty() {
        // The number: digits, optionally a fraction.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut num_len = int_len;
        let mut frac_len = 0;
        if s[num_len..].starts_with('.') {
            num_len += 1;
            frac_len = s[num_len..].bytes().take_while(u8::is_ascii_digit).count();
            num_len += frac_len;
        }
        if int_len == 0 && frac_len == 0 {
            return Err(invalid());
        }
        let value: f64 = s[..num_len].trim_end_matches('.').parse().unwrap_or(0.0);
        s = &s[num_len..];
        // The unit: everything up to the next digit or '.'.
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", go_quote(orig)));
        }
        let unit = &s[..unit_len];
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => {
                return Err(format!("time: unknown unit {} in duration {}", go_quote(unit), go_quote(orig)));
            }
        };
        total += value * scale;
        s = &s[unit_len..];
    }
    if total > i64::MAX as f64 {
        return Err(invalid());
    }
    let ns = total.round() as i64;
    Ok(if neg { -ns } else { ns })
}

use crate::gojson::go_quote;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_durations_parse_like_go() {
        assert_eq!(parse_go_duration("10m"), Ok(600_000_000_000));
        assert_eq!(parse_go_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_go_duration("-1m"), Ok(-60_000_000_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("250ms"), Ok(250_000_000));
        assert_eq!(parse_go_duration("300").unwrap_err(), "time: missing unit in duration \"300\"");
        assert_eq!(parse_go_duration("abc").unwrap_err(), "time: invalid duration \"abc\"");
        assert_eq!(parse_go_duration("").unwrap_err(), "time: invalid duration \"\"");
        assert_eq!(parse_go_duration("5x").unwrap_err(), "time: unknown unit \"x\" in duration \"5x\"");
    }

    #[test]
    fn keep_alive_json_forms() {
        assert_eq!(KeepAlive::from_json(&json!(300)), Ok(Some(KeepAlive::For(Duration::from_secs(300)))));
        assert_eq!(KeepAlive::from_json(&json!(0.5)), Ok(Some(KeepAlive::For(Duration::from_millis(500)))));
        assert_eq!(KeepAlive::from_json(&json!(-1)), Ok(Some(KeepAlive::Forever)));
        assert_eq!(KeepAlive::from_json(&json!("-1m")), Ok(Some(KeepAlive::Forever)));
        assert_eq!(KeepAlive::from_json(&json!("0")), Ok(Some(KeepAlive::For(Duration::ZERO))));
        assert_eq!(KeepAlive::from_json(&json!(null)), Ok(None));
        assert_eq!(KeepAlive::from_json(&json!(1e300)), Ok(Some(KeepAlive::Forever)), "no panic on huge numbers");
        assert_eq!(KeepAlive::from_json(&json!(true)).unwrap_err(), "Unsupported type: 'bool'");
        assert_eq!(KeepAlive::from_json(&json!("3600")).unwrap_err(), "time: missing unit in duration \"3600\"");
    }

    #[test]
    fn env_value_accepts_bare_seconds() {
        assert_eq!(KeepAlive::from_env_value("60"), Ok(KeepAlive::For(Duration::from_secs(60))));
        assert_eq!(KeepAlive::from_env_value("-1"), Ok(KeepAlive::Forever));
        assert_eq!(KeepAlive::from_env_value("2h"), Ok(KeepAlive::For(Duration::from_secs(7200))));
    }
}
