//! The shared test helpers' own tests, in one binary only: `tests/util.rs` is compiled into
//! every test binary, and tests inside it ran once per binary.

use crate::util::dechunk;

#[test]
fn dechunk_reads_a_well_formed_body() {
    assert_eq!(dechunk(b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"), b"abcde");
}

#[test]
#[should_panic(expected = "malformed chunk size")]
fn dechunk_rejects_a_malformed_size() {
    dechunk(b"3\r\nabc\r\nzz\r\nde\r\n0\r\n\r\n");
}

#[test]
#[should_panic(expected = "cut short")]
fn dechunk_rejects_a_truncated_body() {
    dechunk(b"a\r\nabc");
}
