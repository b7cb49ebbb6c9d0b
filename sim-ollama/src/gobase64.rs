//! Where Go's `base64.StdEncoding` finds a string corrupt, as `encoding/json` decodes a
//! `[]byte` field (Ollama's `api.ImageData`: a native request's `images`): the error ends the
//! request with `illegal base64 data at input byte N` (400), before any model is looked at.
//! A data URL pasted where Ollama wants bare base64 (`data:image/png;base64,...`) fails at
//! byte 4. Ported from `decodeQuantum` (src/encoding/base64/base64.go, Go 1.26): standard
//! alphabet, padding required, `\r` and `\n` skipped, not strict.

/// The byte at which Go reports `s` corrupt, or `None` where it decodes.
pub(crate) fn corrupt_at(s: &[u8]) -> Option<usize> {
    let mut si = 0;
    while si < s.len() {
        match quantum(s, si) {
            Ok(next) => si = next,
            Err(at) => return Some(at),
        }
    }
    None
}

/// Decodes one quantum from `si`: where the next one starts (the input's end after padding),
/// or the corrupt byte.
fn quantum(s: &[u8], mut si: usize) -> Result<usize, usize> {
    let valid = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let skip_newlines = |mut i: usize| {
        while i < s.len() && (s[i] == b'\n' || s[i] == b'\r') {
            i += 1;
        }
        i
    };
    let mut j = 0;
    while j < 4 {
        if si == s.len() {
            // The input ended inside a quantum: padding is required.
            return if j == 0 { Ok(si) } else { Err(si - j) };
        }
        let c = s[si];
        si += 1;
        if valid(c) {
            j += 1;
            continue;
        }
        if c == b'\n' || c == b'\r' {
            continue;
        }
        if c != b'=' || j < 2 {
            return Err(si - 1);
        }
        if j == 2 {
            // "==" is expected, the first one consumed.
            si = skip_newlines(si);
            if si == s.len() {
                return Err(s.len());
            }
            if s[si] != b'=' {
                return Err(si - 1);
            }
            si += 1;
        }
        // Anything after the padding is trailing garbage.
        si = skip_newlines(si);
        return if si < s.len() { Err(si) } else { Ok(si) };
    }
    Ok(si)
}

#[cfg(test)]
mod tests {
    use super::corrupt_at;

    /// Each input with where Go 1.26's `base64.StdEncoding.DecodeString` reported it corrupt
    /// (printed by a Go program over these inputs, 2026-11-26).
    const GO: &[(&str, Option<usize>)] = &[
        ("", None),
        ("iVBORw0KGgo=", None),
        ("data:image/png;base64,iVBORw0KGgo=", Some(4)),
        ("not-base64!!", Some(3)),
        ("@@@", Some(0)),
        ("abc", Some(0)),
        ("ab", Some(0)),
        ("a", Some(0)),
        ("abcd", None),
        ("ab==", None),
        ("abc=", None),
        ("a===", Some(1)),
        ("ab=c", Some(2)),
        ("ab==x", Some(4)),
        ("abcd\nefgh", None),
        ("ab\n==", None),
        ("ab=\n=", None),
        ("YWJj\r\nZGVm", None),
        ("abc=d", Some(4)),
        ("abcde", Some(4)),
        ("abcdef", Some(4)),
        ("abcdefg", Some(4)),
        ("abcdefgh=", Some(8)),
        ("====", Some(0)),
        ("ab=", Some(3)),
        ("YWJjZA==YQ==", Some(8)),
        ("aGVsbG8gd29ybGQ", Some(12)),
        ("aGVsbG8gd29ybGQ=", None),
        ("aGVs bG8=", Some(4)),
        ("\n", None),
        ("a\n", Some(1)),
        ("ab=\n", Some(4)),
    ];

    #[test]
    fn corrupt_where_go_says() {
        for (s, at) in GO {
            assert_eq!(corrupt_at(s.as_bytes()), *at, "{s:?}");
        }
    }
}
