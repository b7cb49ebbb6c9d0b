//! Every Rust snippet a user reads is code that compiles and runs: rustdoc's examples run as
//! doctests here (nextest does not run them), and each ```rust block of README.md and docs/
//! must be, line for line, the visible part of a rustdoc example or a piece of a test or
//! example in the workspace, which the suite compiles and runs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target" && n != "snapshots") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A file's lines as code: trimmed, doc-comment markers removed, rustdoc's hidden lines
/// (`# ...`) and blank lines left out.
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("///").or_else(|| l.strip_prefix("//!")).unwrap_or(l);
            l.trim().to_string()
        })
        .filter(|l| !l.is_empty() && l != "#" && !l.starts_with("# "))
        .collect()
}

/// The ```rust blocks of a Markdown file, each as trimmed, non-blank lines.
fn rust_blocks(markdown: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in markdown.lines() {
        let t = line.trim();
        match &mut current {
            None if t == "```rust" => current = Some(Vec::new()),
            Some(block) if t == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) if !t.is_empty() => block.push(t.to_string()),
            _ => {}
        }
    }
    blocks
}

#[test]
fn every_rust_snippet_in_the_docs_is_compiled_code() {
    let mut sources = Vec::new();
    for dir in ["examples", "tests", "sim-ollama", "harness"] {
        rust_files(&root().join(dir), &mut sources);
    }
    let code: Vec<(PathBuf, Vec<String>)> =
        sources.into_iter().filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, code_lines(&t)))).collect();
    let mut docs = vec![root().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    let (mut checked, mut orphans) = (0, Vec::new());
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("readable");
        for block in rust_blocks(&text) {
            checked += 1;
            let found = code.iter().find(|(_, lines)| lines.windows(block.len()).any(|w| w == block.as_slice()));
            if found.is_none() {
                orphans.push(format!("{}:\n    {}", doc.display(), block.join("\n    ")));
            }
        }
    }
    assert!(checked >= 3, "the README and docs have Rust snippets; found {checked}");
    assert!(
        orphans.is_empty(),
        "these Rust snippets are not compiled anywhere: make each the body of a test, or the \
         visible lines of a rustdoc example, and copy it back exactly:\n{}",
        orphans.join("\n")
    );
}

/// rustdoc's examples (the crate docs' first screen, `SimBuilder`, `judged`, `judge`) compile
/// and run, as a reader would paste them.
#[test]
fn rustdoc_examples_compile_and_run() {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .args(["test", "--doc", "--profile", "dev", "-p", "sim-ollama", "-p", "harness"])
        .current_dir(root())
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("cargo runs");
    let log = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "doctests failed:\n{log}");
    // `test result: ok. N passed`, per crate: the examples ran, not zero of them.
    let passed: usize = log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(passed >= 5, "expected sim-ollama's doctests to run, {passed} passed:\n{log}");
}
