//! A Node user's project (examples/node-project, issue 24): its `node:test` suite starts the
//! simulator binary, runs the agents with fetch and asserts on `GET /sim/judge`. Run here with
//! Node's TAP reporter: the correct program passes (on an ideal server and on a one-slot one,
//! whose limit the deployment verdict names), the program that awaits its agents in turn fails
//! with the report as its message, and an unknown model is refused naming the known ones;
//! agents nothing tells apart, with a lookup between two calls, are judged through a probe run
//! (`judgeProgram`): an awaited lookup parallel, an `execSync` one caught between the calls.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[test]
fn the_node_project_passes_correct_agents_and_fails_the_bug_with_the_report() {
    // The workspace build puts the simulator binary here (nextest builds every member's bins).
    let bin = root().join("target/debug/sim-ollama");
    assert!(bin.exists(), "{} is not built", bin.display());
    let out = Command::new("node")
        .args(["--test", "--test-reporter=tap", "test/agents.test.mjs"])
        .current_dir(root().join("examples/node-project"))
        .env("SIM_OLLAMA_BIN", &bin)
        .output()
        .expect("node is needed for the Node project (Node 18+ with built-in fetch and node:test)");
    let tap = String::from_utf8_lossy(&out.stdout);
    let results: Vec<(bool, &str)> = tap
        .lines()
        .filter_map(|l| {
            let (ok, rest) = match l.strip_prefix("not ok ") {
                Some(rest) => (false, rest),
                None => (true, l.strip_prefix("ok ")?),
            };
            Some((ok, rest.split_once(" - ")?.1))
        })
        .collect();
    assert_eq!(
        results,
        vec![
            (true, "review runs the reviewers together"),
            (true, "one slot is the server's limit, not the program's fault"),
            (false, "reviewInTurn runs the reviewers together"),
            (true, "an unknown model is refused with the names of the known ones"),
            (true, "triagers whose lookups await run together"),
            (true, "a lookup that blocks the event loop is caught between the calls"),
            (true, "a run the simulator itself was late for is run again, and the second verdict stands"),
        ],
        "{tap}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tap.contains("client: serialized (cause: client): 3 conversations made 6 requests"), "{tap}");
    assert!(!out.status.success(), "node --test exits non-zero when a test fails");
}
