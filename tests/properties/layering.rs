//! The crates' modules form layers (issue 26): no module of `sim-ollama` or `harness` reaches,
//! through other modules, back to itself. An import circle is where a newcomer cannot tell
//! which of two files comes first; the map in each crate's lib.rs reads top to bottom only if
//! there is none.
//!
//! A module is a top-level file of `src/` (with its directory of submodules); it depends on
//! another when its code names `crate::OTHER` (a `use` or a path), tests left out (everything
//! from a file's `#[cfg(test)]` on: the crates keep their tests at the bottom of a file).

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

/// The modules named `crate::NAME` in `code` (comments and tests left out).
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        if line.starts_with("//") {
            continue;
        }
        for (i, _) in line.match_indices("crate::") {
            let name: String = line[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The crate's module graph: each top-level module and the others its code names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |f: &Path| -> String {
        let rel = f.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().to_string();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).filter(|m| m != "lib" && m != "main").collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for f in &files {
        let m = module_of(f);
        if !modules.contains(&m) {
            continue;
        }
        let code = std::fs::read_to_string(f).expect("readable source");
        for n in named_modules(&code) {
            if n != m && modules.contains(&n) {
                g.get_mut(&m).expect("a module").insert(n);
            }
        }
    }
    g
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
        for n in &g[m] {
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
        let g = graph(&root.join(krate).join("src"));
        assert!(g.len() >= 10, "{krate}: {} modules read", g.len());
        assert_eq!(circle(&g), None, "{krate}: an import circle among its modules");
    }
}

#[test]
fn a_circle_is_found_and_named() {
    // The checker itself: a graph with a circle, and the same graph without it.
    let edges = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    let c = circle(&edges(&[("routes", "pipeline"), ("pipeline", "scheduler"), ("scheduler", "routes")]));
    assert_eq!(c.as_deref(), Some(&["pipeline", "scheduler", "routes", "pipeline"].map(String::from)[..]));
    assert_eq!(circle(&edges(&[("routes", "pipeline"), ("pipeline", "scheduler"), ("routes", "scheduler")])), None);
    // Comments and tests name modules without depending on them.
    let code = "use crate::a::X;\n// crate::b\nfn f() { crate::c::g() }\n#[cfg(test)]\nmod tests { use crate::d; }\n";
    assert_eq!(named_modules(code), ["a", "c"].map(String::from).into_iter().collect());
}
