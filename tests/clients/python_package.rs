//! The Python wheel as a user gets it (issue 24): `scripts/setup-python-project.sh` builds the
//! wheel (the `sim-ollama` and `harness` binaries and the `sim_ollama` module with its pytest
//! plugin) and installs it into a fresh virtual environment beside the sample project's pinned
//! requirements (pytest, pytest-asyncio, ollama-python, LangGraph, the OpenAI Agents SDK,
//! pydantic-ai, AutoGen). These tests run pytest there,
//! read its JUnit report and check every test's outcome: the package's own tests all pass; in
//! the sample user project (examples/python-project) the correct programs pass and each
//! serialization bug fails with the judge's report as its message. A missing tool is a failure,
//! never a skip.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The venv's Python, after (re)installing the current code's wheel when it is stale.
fn python() -> PathBuf {
    let out = Command::new("bash").arg(root().join("scripts/setup-python-project.sh")).output().expect("bash runs");
    assert!(
        out.status.success(),
        "scripts/setup-python-project.sh failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    root().join("target/pyproject/bin/python")
}

/// One pytest test's outcome: `passed`, `failure`, `error` or `skipped`, and its message.
#[derive(Debug)]
struct Case {
    name: String,
    outcome: String,
    message: String,
}

/// Runs pytest in `dir` (its own configuration applies), with `env` set, and returns every
/// test's outcome. A failure's message is its exception's, whole: pytest 9 keeps at most 500
/// characters of it in the report's `message` (whole lines; a judge's report line can be
/// longer), and then the exception's `E` lines of the element text are read instead.
fn pytest(dir: &Path, junit_name: &str, extra: &[&str], env: &[(&str, &str)]) -> Vec<Case> {
    let py = python();
    let junit = root().join("target/tmp").join(junit_name);
    std::fs::create_dir_all(junit.parent().expect("a parent")).expect("target/tmp");
    let _ = std::fs::remove_file(&junit);
    let run = Command::new(&py)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
        .args(extra)
        .arg("--junitxml")
        .arg(&junit)
        .current_dir(dir)
        // The fixture must find the wheel's binaries itself, as a user's run does.
        .env_remove("SIM_OLLAMA_BIN")
        .env_remove("SIM_OLLAMA_HARNESS_BIN")
        .envs(env.iter().copied())
        .output()
        .expect("pytest runs");
    let log = format!("{}\n{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(junit.exists(), "pytest wrote no report (exit {:?}):\n{log}", run.status);
    let read = Command::new(&py)
        .arg("-c")
        .arg(
            "import json, sys, xml.etree.ElementTree as ET\n\
             cases = []\n\
             for tc in ET.parse(sys.argv[1]).iter('testcase'):\n\
             \x20   outcome, message = 'passed', ''\n\
             \x20   for tag in ('failure', 'error', 'skipped'):\n\
             \x20       e = tc.find(tag)\n\
             \x20       if e is not None:\n\
             \x20           message, text = e.get('message') or '', e.text or ''\n\
             \x20           if message.endswith('full report in element text]'):\n\
             \x20               message = '\\n'.join(l[1:].strip() for l in text.splitlines() if l.startswith('E '))\n\
             \x20           outcome, message = tag, message + '\\n' + text\n\
             \x20   cases.append({'name': tc.get('name'), 'outcome': outcome, 'message': message})\n\
             print(json.dumps(cases))",
        )
        .arg(&junit)
        .output()
        .expect("python reads the report");
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let cases: Vec<Value> = serde_json::from_slice(&read.stdout).expect("JSON");
    let cases: Vec<Case> = cases
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            outcome: c["outcome"].as_str().unwrap_or_default().to_string(),
            message: c["message"].as_str().unwrap_or_default().to_string(),
        })
        .collect();
    assert!(!cases.is_empty(), "pytest ran no test:\n{log}");
    cases
}

#[test]
fn the_python_packages_own_tests_pass() {
    // Two workers (pytest-xdist): its tests mostly wait on simulators and pytest subprocesses.
    // Without the pytest plugins of the venv these tests do not use: LangSmith's, which the venv
    // has through LangChain (the sample project's; 1.8 s of CPU to import in every pytest
    // process), and anyio's (0.25 s). The workers inherit PYTEST_ADDOPTS, and the tests'
    // conftest.py hands it to the pytester runs (pytester clears it): 25 s of CPU and 24.9 s
    // of wall alone with the pytester runs importing LangSmith, 8 s and 16.4 s without
    // (/usr/bin/time, 2026-11-27). The sample project below keeps them, as its users would.
    let env = [("PYTEST_ADDOPTS", "-p no:langsmith_plugin -p no:anyio")];
    let cases = pytest(&root().join("python"), "python-package.xml", &["-n", "2"], &env);
    let bad: Vec<&Case> = cases.iter().filter(|c| c.outcome != "passed").collect();
    assert!(bad.is_empty(), "{bad:#?}");
    // Every test of the file ran (none deselected or lost to a collection error).
    assert_eq!(cases.len(), 27, "{cases:#?}");
}

#[test]
fn the_sample_project_passes_correct_agents_and_fails_each_bug_with_the_report() {
    let cases = pytest(&root().join("examples/python-project"), "python-project.xml", &[], &[]);
    let outcome =
        |name: &str| cases.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no test {name} in {cases:#?}"));
    for name in [
        "test_review_runs_reviewers_together",
        "test_review_runs_reviewers_together_async",
        "test_one_slot_server_is_not_the_programs_fault",
        "test_graph_fans_out",
    ] {
        let c = outcome(name);
        assert_eq!(c.outcome, "passed", "a correct program must pass: {c:#?}");
    }
    for name in ["test_review_in_turn", "test_review_locked", "test_review_blocking", "test_graph_blocking_nodes"] {
        let c = outcome(name);
        assert_eq!(c.outcome, "failure", "a serializing program must fail: {c:#?}");
        // The message is the judge's report in words: the headline, the client verdict with its
        // cause in the client, and the deployment (which allowed the agents to run together).
        let m = &c.message;
        assert!(m.contains("the agents were not judged parallel\nclient: "), "{name}: {m}");
        assert!(
            m.contains("client: serialized (cause: client): ")
                || m.contains("client: partly serialized (cause: client): "),
            "{name}: {m}"
        );
        assert!(m.contains("deployment: full (limit: none): "), "{name}: {m}");
    }
    // Tool-calling reviewers on LangGraph's ReAct agent, the OpenAI Agents SDK (Chat
    // Completions and Responses), pydantic-ai, AutoGen and a tool loop over LiteLLM,
    // unlabelled: together they pass assert_parallel, awaited in turn the judge calls them
    // serialized in the client.
    for framework in ["langgraph", "openai-agents-chat", "openai-agents-responses", "pydantic-ai", "autogen", "litellm"]
    {
        for test in ["test_reviewers_together_are_parallel", "test_reviewers_in_turn_are_caught"] {
            let c = outcome(&format!("{test}[{framework}]"));
            assert_eq!(c.outcome, "passed", "{c:#?}");
        }
    }
    // Issue 36: reviewers whose tool calls time.sleep inside async def (LangGraph's ReAct
    // agent; the OpenAI Agents SDK's the same, tried by hand) wait for each other between
    // their calls. One run cannot
    // tell that from their own work: the fixture runs the test again as a probe run, and the
    // failure names the work between calls. The same tool awaited passes.
    // (LiteLLM's reviewers with the same tools read the same, tried by hand: their tool loop
    // is the reviewer's own code, as in `programs::python_tools_that_hold_the_event_loop_*`.)
    for framework in ["langgraph"] {
        let c = outcome(&format!("test_reviewers_with_a_blocking_tool_are_caught[{framework}]"));
        assert_eq!(c.outcome, "failure", "a tool that holds the event loop must fail: {c:#?}");
        assert!(c.message.contains("serialized (cause: between_calls): "), "{c:#?}");
        assert!(!c.message.contains("ProbeNeeded"), "the probe run settled it: {c:#?}");
        let c = outcome(&format!("test_reviewers_with_an_awaited_tool_are_parallel[{framework}]"));
        assert_eq!(c.outcome, "passed", "{c:#?}");
    }
    // LiteLLM reviewers through a Router: parallel, and caught in the client when the router's
    // deployment lets one request through at a time (`max_parallel_requests=1`).
    for name in [
        "test_reviewers_through_a_litellm_router_are_parallel",
        "test_a_litellm_router_of_one_request_at_a_time_is_caught",
    ] {
        let c = outcome(name);
        assert_eq!(c.outcome, "passed", "{c:#?}");
    }
    // A LangChain batch of twelve tickets: a thread for each, or `abatch`, parallel; through
    // six threads (`batch`'s default pool on a 2-core machine) partly serialized, the limit
    // named (the test asserts it).
    for name in [
        "test_a_batch_with_a_thread_per_ticket_is_parallel",
        "test_an_async_batch_is_parallel",
        "test_a_batch_through_six_threads_is_caught",
    ] {
        let c = outcome(name);
        assert_eq!(c.outcome, "passed", "{c:#?}");
    }
    assert_eq!(cases.len(), 27, "every test of the sample project ran: {cases:#?}");
}
