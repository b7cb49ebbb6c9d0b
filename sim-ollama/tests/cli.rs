//! The `sim-ollama` binary: the listening lines, clean shutdown on SIGTERM, exit codes.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("writes");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("reads");
    out
}

#[test]
fn it_prints_one_line_per_instance_serves_and_stops_cleanly_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim-ollama"))
        .args(["--port", "0", "--instances", "2", "--seed", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut urls = Vec::new();
    for _ in 0..2 {
        let mut l = String::new();
        lines.read_line(&mut l).expect("a line");
        let url =
            l.trim().strip_prefix("sim-ollama listening on http://").unwrap_or_else(|| panic!("unexpected line {l:?}"));
        urls.push(url.to_string());
    }
    let mut ready = String::new();
    lines.read_line(&mut ready).expect("the ready line");
    assert_eq!(ready.trim(), "sim-ollama ready: 2 instances", "after every listening line");
    for u in &urls {
        assert!(u.starts_with("127.0.0.1:"), "{u}");
        assert!(get(u, "/").ends_with("Ollama is running"));
    }
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let exit = child.wait().expect("exits");
    assert!(exit.success(), "a clean stop exits 0, got {exit:?}");
}

#[test]
fn bad_arguments_exit_with_2_and_a_clear_message() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_sim-ollama")).args(["--port", "0", "--time-scale=-1"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("time_scale"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(env!("CARGO_BIN_EXE_sim-ollama"))
        .args(["--port", "0", "--preset", "nope"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dual-one-device"));
    let out = Command::new(env!("CARGO_BIN_EXE_sim-ollama"))
        .args(["--port", "0", "--noise", "jitter=0.2,loud=1"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown key \"loud\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ollama_host_sets_the_address_and_a_taken_port_exits_with_1() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(env!("CARGO_BIN_EXE_sim-ollama"))
        .env("OLLAMA_HOST", format!("127.0.0.1:{port}"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("127.0.0.1:{port}")));
}

/// Issue 13 item 8: the real server reads a bad `OLLAMA_*` value as its default, with a
/// warning (envconfig: "invalid environment variable, using default"); the simulator exited.
#[test]
fn bad_environment_values_fall_back_to_the_defaults() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim-ollama"))
        .args(["--port", "0"])
        .env("OLLAMA_NUM_PARALLEL", "two")
        .env("OLLAMA_MAX_LOADED_MODELS", "-1")
        .env("OLLAMA_KEEP_ALIVE", "soon")
        .env("OLLAMA_MAX_QUEUE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("a line");
    let url = line.trim().strip_prefix("sim-ollama listening on http://").map(str::to_string);
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let out = child.wait_with_output().expect("exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let url = url.unwrap_or_else(|| panic!("did not start: {line:?}\n{stderr}"));
    assert!(url.starts_with("127.0.0.1:"), "{url}");
    for key in ["OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_KEEP_ALIVE"] {
        assert!(
            stderr.contains("invalid environment variable, using default") && stderr.contains(key),
            "{key}: {stderr}"
        );
    }
    assert!(out.status.success(), "{:?}", out.status);
}
