//! The crates' modules form layers (issue 26), checked from the source, at two grains:
//!
//! - **Top-level modules** (a file of `src/` with its directory of submodules): none reaches,
//!   through others, back to itself. An import circle is where a newcomer cannot tell which of
//!   two files comes first; the map in each crate's lib.rs reads top to bottom only if there is
//!   none.
//! - **Every module, submodules included** (`routes::pipeline`, `judge::decision`): no circle
//!   either (siblings such as the chat adapters and their pipeline included), and **nothing
//!   runs back up**: a submodule never names an item of a module above it (`super::X`,
//!   `super::*`, `crate::routes::X` from inside `routes`). A directory's own file only names and
//!   re-exports its submodules; what they share lives in a submodule of its own (`routes::http`,
//!   `judge::input`, `config::file`).
//!
//! A module names another through `crate::`, `super::` or `self::` paths (a `use` or a path in
//! code; brace groups and globs read); tests are left out (everything from a file's
//! `#[cfg(test)]` on, and test-module files named `tests.rs`), and so are comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Where a path starts: the crate root, or `n` modules up from the file's own (0: `self`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    Crate,
    Up(usize),
}

/// One path a file names: its base and its segments (the last may be `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    base: Base,
    path: Vec<String>,
}

/// The code of `src` without comments and tests.
fn code_only(src: &str) -> String {
    let mut out = String::new();
    for line in src.lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if !t.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The `crate::`, `super::` and `self::` paths in `code`, brace groups expanded.
fn named_paths(code: &str) -> Vec<Named> {
    let b = code.as_bytes();
    let ident = |i: usize| b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if ident(i) && (i == 0 || !ident(i - 1)) {
            let start = i;
            while ident(i) {
                i += 1;
            }
            let word = &code[start..i];
            let base = match word {
                "crate" => Some(Base::Crate),
                "self" => Some(Base::Up(0)),
                "super" => Some(Base::Up(1)),
                _ => None,
            };
            if let Some(base) = base
                && code[i..].starts_with("::")
            {
                let mut prefix = Vec::new();
                i = tail(code, i, &mut prefix, 0, &mut |path| {
                    // `super::super::x`: one more module up for each.
                    let ups = path.iter().take_while(|s| *s == "super").count();
                    let base = match base {
                        Base::Up(n) => Base::Up(n + ups),
                        Base::Crate => Base::Crate,
                    };
                    out.push(Named { base, path: path[ups..].to_vec() });
                });
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Reads `::seg::seg`, `::*` or `::{a, b::c}` from `at`, calling `emit` with each full path
/// (the segments pushed on `prefix` beyond `depth`, and what this reads). Returns where it
/// stopped, `prefix` cut back to `depth`.
fn tail(code: &str, mut at: usize, prefix: &mut Vec<String>, depth: usize, emit: &mut dyn FnMut(&[String])) -> usize {
    let b = code.as_bytes();
    let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    while code[at..].starts_with("::") {
        at += 2;
        while b.get(at).is_some_and(|c| c.is_ascii_whitespace()) {
            at += 1;
        }
        match b.get(at) {
            Some(b'*') => {
                prefix.push("*".into());
                at += 1;
                break;
            }
            Some(b'{') => {
                // A group: each item a path of its own after what was read so far.
                at += 1;
                loop {
                    while b.get(at).is_some_and(|c| c.is_ascii_whitespace() || *c == b',') {
                        at += 1;
                    }
                    let s = at;
                    while b.get(at).is_some_and(|c| word(c) || *c == b'*') {
                        at += 1;
                    }
                    if at > s {
                        let item = prefix.len();
                        prefix.push(code[s..at].to_string());
                        at = tail(code, at, prefix, item, emit);
                    }
                    // Past `as NAME` and the like, to the next item or the group's end.
                    while b.get(at).is_some_and(|c| *c != b',' && *c != b'}') {
                        at += 1;
                    }
                    match b.get(at) {
                        Some(b'}') => {
                            prefix.truncate(depth);
                            return at + 1;
                        }
                        Some(_) => at += 1,
                        None => {
                            prefix.truncate(depth);
                            return at;
                        }
                    }
                }
            }
            _ => {
                let s = at;
                while b.get(at).is_some_and(word) {
                    at += 1;
                }
                if at == s {
                    break;
                }
                prefix.push(code[s..at].to_string());
            }
        }
    }
    if prefix.len() > depth {
        emit(prefix);
    }
    prefix.truncate(depth);
    at
}

/// A crate's modules, each with what its code names.
struct Crate {
    /// Module path (`routes::pipeline`) -> the modules it names, each with whether it named an
    /// item of that module (rather than the module itself).
    names: BTreeMap<Vec<String>, BTreeSet<(Vec<String>, bool)>>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let module_of = |f: &Path| -> Vec<String> {
            let rel = f.strip_prefix(src).expect("under src").with_extension("");
            let mut m: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect();
            if m.last().is_some_and(|l| l == "mod") {
                m.pop();
            }
            m
        };
        let skip = |m: &[String]| m == ["lib"] || m == ["main"] || m.last().is_some_and(|l| l == "tests");
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f)).filter(|m| !skip(m)).collect();
        let mut names = BTreeMap::new();
        for f in &files {
            let m = module_of(f);
            if skip(&m) {
                continue;
            }
            let code = code_only(&std::fs::read_to_string(f).expect("readable source"));
            let mut out = BTreeSet::new();
            for n in named_paths(&code) {
                let mut full: Vec<String> = match n.base {
                    Base::Crate => Vec::new(),
                    Base::Up(k) => m[..m.len().saturating_sub(k)].to_vec(),
                };
                full.extend(n.path);
                // The longest prefix that is a module; what follows it names an item.
                let Some(k) = (1..=full.len()).rev().find(|k| modules.contains(&full[..*k])) else { continue };
                if full[..k] != m[..] {
                    out.insert((full[..k].to_vec(), k < full.len()));
                }
            }
            names.insert(m, out);
        }
        Crate { names }
    }

    /// Items a submodule names in a module above it.
    fn upward(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (m, named) in &self.names {
            for (t, item) in named {
                if *item && t.len() < m.len() && m.starts_with(t) {
                    out.push(format!("{} names an item of {}", m.join("::"), t.join("::")));
                }
            }
        }
        out
    }

    /// The graph at the given grain: `Some(1)` top-level modules, `None` every module (edges
    /// from a module to its own submodules left out: declaring and re-exporting them is the
    /// way down).
    fn graph(&self, top: Option<usize>) -> BTreeMap<String, BTreeSet<String>> {
        let key = |m: &[String]| m[..top.map_or(m.len(), |t| t.min(m.len()))].join("::");
        let mut g: BTreeMap<String, BTreeSet<String>> = self.names.keys().map(|m| (key(m), BTreeSet::new())).collect();
        for (m, named) in &self.names {
            for (t, _) in named {
                let (a, b) = (key(m), key(t));
                if a != b && !t.starts_with(m) {
                    g.get_mut(&a).expect("a module").insert(b);
                }
            }
        }
        g
    }
}

/// A circle in the graph, if there is one: the modules along it, the first repeated last.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        m: &str,
        state: &mut BTreeMap<String, bool>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), true);
        path.push(m.to_string());
        for n in g.get(m).into_iter().flatten() {
            match state.get(n) {
                Some(true) => {
                    let at = path.iter().position(|p| p == n).expect("on the path");
                    let mut c = path[at..].to_vec();
                    c.push(n.clone());
                    return Some(c);
                }
                Some(false) => {}
                None => {
                    if let Some(c) = visit(g, n, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(m.to_string(), false);
        None
    }
    let mut state = BTreeMap::new();
    g.keys().find_map(|m| if state.contains_key(m) { None } else { visit(g, m, &mut state, &mut Vec::new()) })
}

#[test]
fn the_modules_of_each_crate_form_layers_without_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["sim-ollama", "harness"] {
        let c = Crate::read(&root.join(krate).join("src"));
        let top = c.graph(Some(1));
        assert!(top.len() >= 10, "{krate}: {} modules read", top.len());
        assert_eq!(circle(&top), None, "{krate}: an import circle among its top-level modules");
        assert_eq!(circle(&c.graph(None)), None, "{krate}: an import circle among its modules");
        assert_eq!(c.upward(), Vec::<String>::new(), "{krate}: submodules naming what is above them");
    }
    // The submodules were read: the simulator's routes, judge and configuration have them.
    let sim = Crate::read(&root.join("sim-ollama/src"));
    let all = sim.graph(None);
    for m in ["routes::pipeline", "routes::http", "judge::decision", "config::file"] {
        assert!(all.contains_key(m), "{m} read as a module of its own");
    }
    assert!(all["routes::native"].contains("routes::pipeline"), "{:?}", all["routes::native"]);
}

#[test]
fn paths_are_read_through_groups_globs_and_super() {
    let n = |code: &str| -> Vec<(Base, String)> {
        named_paths(code).into_iter().map(|n| (n.base, n.path.join("::"))).collect()
    };
    assert_eq!(
        n("use super::{http::{AppState, json_body}, peer::Peer, *};"),
        [
            (Base::Up(1), "http::AppState".to_string()),
            (Base::Up(1), "http::json_body".into()),
            (Base::Up(1), "peer::Peer".into()),
            (Base::Up(1), "*".into())
        ]
    );
    assert_eq!(n("let x = crate::gojson::to_go_json(v);"), [(Base::Crate, "gojson::to_go_json".to_string())]);
    assert_eq!(n("use super::super::trace::Wait as W;"), [(Base::Up(2), "trace::Wait".to_string())]);
    assert_eq!(n("pub(super) fn f() {} pub(crate) struct S;"), []);
    // Comments and tests name modules without depending on them.
    let code = "use crate::a::X;\n// crate::b\nfn f() { crate::c::g() }\n#[cfg(test)]\nmod tests { use crate::d; }\n";
    assert_eq!(n(&code_only(code)), [(Base::Crate, "a::X".to_string()), (Base::Crate, "c::g".into())]);
}

#[test]
fn a_circle_and_a_way_back_up_are_found_and_named() {
    // The checker itself, on a crate written for it: a pipeline naming one of its adapters
    // (a circle between siblings), and an adapter naming its parent's item.
    let dir = std::env::temp_dir().join(format!("layering-{}", std::process::id()));
    let write = |path: &str, code: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, code).unwrap();
    };
    write("lib.rs", "mod routes;\nmod scheduler;\n");
    write("scheduler.rs", "pub struct S;\n");
    write("routes/mod.rs", "mod native;\nmod pipeline;\npub use native::chat;\npub struct AppState;\n");
    write("routes/pipeline.rs", "use crate::scheduler::S;\nuse super::native::Peer;\n");
    write("routes/native.rs", "use super::{pipeline, AppState};\npub struct Peer;\npub fn chat() {}\n");
    let c = Crate::read(&dir);
    assert_eq!(c.upward(), ["routes::native names an item of routes"]);
    let all = c.graph(None);
    assert!(circle(&all).is_some_and(|c| c.contains(&"routes::pipeline".to_string())), "{all:?}");
    // The parent declaring and re-exporting its submodules is the way down, not a circle.
    assert_eq!(circle(&c.graph(Some(1))), None);
    // Fixed as the crates are: the shared items in a submodule of their own.
    write("routes/mod.rs", "mod http;\nmod native;\nmod pipeline;\npub use native::chat;\n");
    write("routes/http.rs", "pub struct AppState;\npub struct Peer;\n");
    write("routes/pipeline.rs", "use crate::scheduler::S;\nuse super::http::Peer;\n");
    write("routes/native.rs", "use super::{pipeline, http::AppState};\npub fn chat() {}\n");
    let c = Crate::read(&dir);
    assert_eq!(c.upward(), Vec::<String>::new());
    assert_eq!(circle(&c.graph(None)), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_over_600_lines_says_in_its_header_why() {
    // Issue 26: one concept per file; a long one says why it is long (the word "lines" in its
    // `//!` header, with the reason), so a newcomer knows it was kept whole on purpose.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut silent = Vec::new();
    for krate in ["sim-ollama", "harness"] {
        let mut files = Vec::new();
        rust_files(&root.join(krate).join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).expect("readable source");
            let header: String = text.lines().take_while(|l| l.starts_with("//!")).collect();
            if text.lines().count() > 600 && !header.contains(" lines") {
                silent.push(f.strip_prefix(root).expect("under the root").display().to_string());
            }
        }
    }
    assert_eq!(silent, Vec::<String>::new(), "files over 600 lines whose header does not say why");
}
