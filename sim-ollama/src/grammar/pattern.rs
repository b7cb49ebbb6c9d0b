//! llama.cpp's reading of a schema's `pattern` (json-schema-to-grammar.cpp `_pattern_to_rule`):
//! the control flow of its scan, without the grammar it writes, so that each pattern is
//! constrained, read as any string, or refused as the real converter does.

/// What the converter does with a string's `pattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// The string is the whole of this regex (the pattern between its `^` and `$`).
    Constrains(String),
    /// The converter cannot read it (not anchored, `\d`, a lookaround, ...): any string, and a
    /// warning on the server's stderr.
    AnyString(String),
    /// Not a regex: the request fails ("Invalid pattern P: WHY").
    Invalid(&'static str),
}

/// Classifies a pattern as `_pattern_to_rule` reads it (the first thing it cannot read, in the
/// order it scans, decides between unsupported, any string, and invalid, an error), with the
/// largest minimum of its `{m,n}` repetitions.
pub(super) fn scan(p: &str) -> (Pattern, u64) {
    let b = p.as_bytes();
    if b.len() < 2 || b[0] != b'^' || b[b.len() - 1] != b'$' {
        return (Pattern::AnyString("not anchored with '^' and '$'".into()), 0);
    }
    let sub = &b[1..b.len() - 1];
    let mut scan = Scan { s: sub, i: 0, depth: 0, least_repeats: 0 };
    let read = scan
        .sequence()
        .and_then(|()| if scan.depth != 0 { Err(Stop::Invalid("unbalanced parentheses")) } else { Ok(()) });
    let pattern = match read {
        Ok(()) => Pattern::Constrains(String::from_utf8_lossy(sub).into_owned()),
        Err(Stop::Unsupported(why)) => Pattern::AnyString(why),
        Err(Stop::Invalid(why)) => Pattern::Invalid(why),
    };
    (pattern, scan.least_repeats)
}

/// Groups nested deeper than this are not read (`MAX_PATTERN_DEPTH`).
const MAX_PATTERN_DEPTH: usize = 100;
/// Characters that end a run of literal characters (`NON_LITERAL_SET`).
const NON_LITERAL: &[u8] = b"|.()[]{}*+?^$";
/// Escapes that stand for the character itself (`ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS`).
const ESCAPED_LITERAL: &[u8] = b"^$.[]()|{}*+?";

enum Stop {
    Unsupported(String),
    Invalid(&'static str),
}

/// The converter's scan of a pattern's body, without the grammar it writes.
struct Scan<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
    /// The largest minimum of the `{m,n}` repetitions read so far.
    least_repeats: u64,
}

impl Scan<'_> {
    fn two(&self) -> String {
        String::from_utf8_lossy(&self.s[self.i..(self.i + 2).min(self.s.len())]).into_owned()
    }

    /// One level of `transform`: up to its closing parenthesis or the end.
    fn sequence(&mut self) -> Result<(), Stop> {
        let n = self.s.len();
        let mut items = 0usize;
        while self.i < n {
            let c = self.s[self.i];
            match c {
                b'.' | b'|' => self.i += 1,
                b'(' => {
                    self.i += 1;
                    if self.s.get(self.i) == Some(&b'?') {
                        if self.s.get(self.i + 1) == Some(&b':') {
                            self.i += 2;
                        } else {
                            return Err(Stop::Unsupported("unsupported group syntax".into()));
                        }
                    }
                    self.depth += 1;
                    if self.depth > MAX_PATTERN_DEPTH {
                        return Err(Stop::Unsupported("pattern nesting too deep".into()));
                    }
                    self.sequence()?;
                }
                b')' => {
                    self.i += 1;
                    if self.depth == 0 {
                        return Err(Stop::Invalid("unbalanced parentheses"));
                    }
                    self.depth -= 1;
                    return Ok(());
                }
                b'^' | b'$' => return Err(Stop::Unsupported("anchor inside the pattern".into())),
                b'[' => {
                    self.i += 1;
                    while self.i < n && self.s[self.i] != b']' {
                        if self.s[self.i] == b'\\' {
                            let len = escape_length(self.s, self.i);
                            if len == 0 {
                                return Err(Stop::Unsupported(format!(
                                    "unsupported escape in character class: {}",
                                    self.two()
                                )));
                            }
                            self.i += len;
                        } else {
                            self.i += 1;
                        }
                    }
                    if self.i >= n {
                        return Err(Stop::Invalid("unterminated character class"));
                    }
                    self.i += 1;
                }
                b'*' | b'+' | b'?' => {
                    if items == 0 {
                        return Err(Stop::Invalid("nothing to repeat"));
                    }
                    self.i += 1;
                    continue;
                }
                b'{' => {
                    let start = self.i + 1;
                    while self.i < n && self.s[self.i] != b'}' {
                        self.i += 1;
                    }
                    if self.i >= n {
                        return Err(Stop::Unsupported("unterminated curly brackets".into()));
                    }
                    let inner = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                    self.i += 1;
                    let nums: Vec<&str> = inner.split(',').collect();
                    let least = match nums.as_slice() {
                        [one] => stoi(one),
                        [lo, hi] => {
                            let ok = |x: &str| x.is_empty() || stoi(x).is_some();
                            (ok(lo) && ok(hi)).then(|| stoi(lo).unwrap_or(0))
                        }
                        _ => return Err(Stop::Unsupported("wrong number of values in curly brackets".into())),
                    };
                    let Some(least) = least else {
                        return Err(Stop::Unsupported("invalid number in curly brackets".into()));
                    };
                    self.least_repeats = self.least_repeats.max(u64::try_from(least).unwrap_or(0));
                    if items == 0 {
                        return Err(Stop::Invalid("nothing to repeat"));
                    }
                    continue;
                }
                _ => self.literal(c)?,
            }
            items += 1;
        }
        Ok(())
    }

    /// A run of literal characters (the converter's last branch); `c` the first.
    fn literal(&mut self, c: u8) -> Result<(), Stop> {
        let n = self.s.len();
        let mut consumed = false;
        while self.i < n {
            let here = self.s[self.i];
            if here == b'\\' {
                if self.i == n - 1 {
                    return Err(Stop::Invalid("trailing backslash"));
                }
                if ESCAPED_LITERAL.contains(&self.s[self.i + 1]) {
                    self.i += 2;
                } else {
                    let len = escape_length(self.s, self.i);
                    if len == 0 {
                        return Err(Stop::Unsupported(format!("unsupported escape: {}", self.two())));
                    }
                    self.i += len;
                }
            } else if here == b'"' {
                self.i += 1;
            } else if !NON_LITERAL.contains(&here)
                && (self.i == n - 1
                    || !consumed
                    || self.s[self.i + 1] == b'.'
                    || !NON_LITERAL.contains(&self.s[self.i + 1]))
            {
                self.i += 1;
            } else {
                break;
            }
            consumed = true;
        }
        if !consumed {
            return Err(Stop::Unsupported(format!("unsupported character: {}", c as char)));
        }
        Ok(())
    }
}

/// The length of a grammar escape at `pos` (`gbnf_escape_length`): `\t \r \n \\ \" \[ \]`, or
/// `\x`, `\u`, `\U` and 2, 4 or 8 hex digits; 0 for anything else.
fn escape_length(s: &[u8], pos: usize) -> usize {
    if pos + 1 >= s.len() || s[pos] != b'\\' {
        return 0;
    }
    let hex = match s[pos + 1] {
        b'x' => 2,
        b'u' => 4,
        b'U' => 8,
        b't' | b'r' | b'n' | b'\\' | b'"' | b'[' | b']' => return 2,
        _ => return 0,
    };
    if pos + 2 + hex > s.len() || !s[pos + 2..pos + 2 + hex].iter().all(u8::is_ascii_hexdigit) {
        return 0;
    }
    2 + hex
}

/// C++'s `std::stoi`: leading spaces, a sign, at least one digit, anything after; `None` where
/// it throws (no digit, out of an int's range).
fn stoi(s: &str) -> Option<i32> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'-') => (-1i64, &t[1..]),
        Some(b'+') => (1, &t[1..]),
        _ => (1, t),
    };
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    digits.parse::<i64>().ok().and_then(|v| i32::try_from(sign * v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> Pattern {
        scan(p).0
    }

    #[test]
    fn patterns_are_constrained_read_as_any_string_or_refused() {
        assert_eq!(pattern("^[a-z]{2,4}-(x|y)$"), Pattern::Constrains("[a-z]{2,4}-(x|y)".into()));
        assert_eq!(pattern("[a-z]+"), Pattern::AnyString("not anchored with '^' and '$'".into()));
        assert_eq!(pattern(r"^\d{3}$"), Pattern::AnyString(r"unsupported escape: \d".into()));
        assert_eq!(pattern("^(?=a)b$"), Pattern::AnyString("unsupported group syntax".into()));
        assert_eq!(pattern("^a^b$"), Pattern::AnyString("anchor inside the pattern".into()));
        assert_eq!(pattern("^a{x}$"), Pattern::AnyString("invalid number in curly brackets".into()));
        assert_eq!(pattern("^(ab$"), Pattern::Invalid("unbalanced parentheses"));
        assert_eq!(pattern("^ab)$"), Pattern::Invalid("unbalanced parentheses"));
        assert_eq!(pattern("^[ab$"), Pattern::Invalid("unterminated character class"));
        assert_eq!(pattern("^*a$"), Pattern::Invalid("nothing to repeat"));
        assert_eq!(pattern("^{2}$"), Pattern::Invalid("nothing to repeat"));
        assert_eq!(
            pattern(r"^a\$"),
            Pattern::Invalid("trailing backslash"),
            "the last $ is the anchor, whatever precedes it"
        );
    }
}
