//! What Go's `encoding/json` says of JSON that does not parse: a port of the states of its
//! `scanner.go` (the Go release Ollama v0.33.0-rc2 builds with), each error naming the byte and
//! what the scanner was looking for ("invalid character '5' after object key"), and running out
//! told as a decoder tells it ("unexpected EOF") or as `json.Unmarshal` does.

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

#[cfg(test)]
mod tests {
    use super::*;

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
