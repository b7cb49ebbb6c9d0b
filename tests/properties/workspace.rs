//! The workspace's build property that CI's time rests on: a build of one package compiles
//! its dependencies with exactly the features the whole workspace's build gave them, so the
//! Python wheel (maturin builds `sim-ollama` alone) and `cargo build -p harness` reuse the
//! suite's build instead of compiling everything from syn up again. `workspace-hack` carries
//! the union; this test names what it lacks.

use std::collections::BTreeMap;
use std::process::Command;

/// Every package `cargo tree` lists for these arguments, with its enabled features.
fn features(args: &[&str]) -> BTreeMap<String, String> {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .arg("tree")
        .args(args)
        .args(["--prefix", "none", "--format", "{p}|{f}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (package, features) = line.split_once('|')?;
            // `serde v1.0.229 (*)`: a repeat; `syn v2.0.119 (proc-macro)`: its kind.
            let package = package.split(" (").next().unwrap_or(package).trim();
            Some((package.to_string(), features.trim().trim_end_matches("(*)").trim().to_string()))
        })
        .collect()
}

#[test]
fn one_feature_set_for_every_build() {
    let workspace = features(&["--workspace", "--edges", "normal,build,dev"]);
    assert!(workspace.len() > 100, "cargo tree listed too little: {workspace:?}");
    let mut lacking = Vec::new();
    for package in ["sim-ollama", "harness"] {
        let alone = features(&["--package", package, "--edges", "normal,build"]);
        for (dep, enabled) in &alone {
            let Some(union) = workspace.get(dep) else {
                lacking.push(format!("{dep}: in `{package}`'s build but not the workspace's"));
                continue;
            };
            if enabled != union {
                lacking.push(format!(
                    "{dep}: built alone, `{package}` enables [{enabled}]; the workspace enables [{union}]"
                ));
            }
        }
    }
    assert!(
        lacking.is_empty(),
        "a build of one package would compile these dependencies again; give workspace-hack/Cargo.toml \
         each one with the workspace's features (default-features = false; host crates such as syn \
         under [build-dependencies]):\n  {}",
        lacking.join("\n  ")
    );
}
