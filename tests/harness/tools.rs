//! Tool round trips in the harness's agents (issue 11): a call with `tool_work_ms` gets a tool
//! call, runs the tool, sends the result with the history and reads the answer.

use harness::runtime::{self, Job};
use harness::workload::{self, Scenario};
use sim_ollama::SimBuilder;
use std::time::Duration;

#[test]
fn a_tool_loop_agent_sends_the_tool_result_back_and_gets_an_answer() {
    let scenario = workload::select(&["tool_loops".to_string()], None).unwrap().remove(0);
    let sim = SimBuilder::new().preset("ideal").unwrap().time_scale(0.02).start().unwrap();
    let agents = scenario.plan(1);
    let job = Job {
        agents: agents[..2].to_vec(),
        urls: sim.urls().to_vec(),
        model: scenario.model.clone(),
        time_scale: 0.02,
        token_gap: Duration::ZERO,
        timeout: Duration::from_secs(30),
    };
    let mut exec = runtime::build("tokio-default").unwrap();
    let recs = exec.run(&job);
    sim.wait_idle(Duration::from_secs(5)).unwrap();
    let trace = sim.trace();
    for a in &recs {
        // Two tool round trips: a call answered by a tool call, then the result answered in text.
        assert_eq!(a.calls.len(), 4, "{}: {:?}", a.name, a.calls.iter().map(|c| &c.error).collect::<Vec<_>>());
        for (i, c) in a.calls.iter().enumerate() {
            assert!(c.error.is_none(), "{:?}", c.error);
            assert_eq!(c.tool_calls.is_some(), i % 2 == 0, "call {i} of {}", a.name);
            assert!(!c.tokens.is_empty(), "the first output (a call or text) was seen");
        }
        // The answer after the tool result is the call's `tokens` long.
        let expected: Vec<u64> = scenario.agents[0].calls.iter().map(|c| u64::from(c.tokens)).collect();
        assert_eq!(a.calls[1].eval_count, Some(expected[0]));
        assert_eq!(a.calls[3].eval_count, Some(expected[1]));
        // The server saw the follow-up as the same conversation, one turn on.
        let mine: Vec<_> =
            trace.requests.iter().filter(|r| r.agent_label.as_deref() == Some(a.name.as_str())).collect();
        assert_eq!(mine.len(), 4);
        let (first, second) = (mine[0].conversation.as_ref().unwrap(), mine[1].conversation.as_ref().unwrap());
        assert_eq!(second.parent.as_ref(), Some(&first.key), "the follow-up carries the first call's history");
    }
}

#[test]
fn tool_work_needs_a_chat_call() {
    let text = r#"
name = "bad"
preset = "ideal"
[[agents]]
name = "a"
[[agents.calls]]
prompt = "x"
tokens = 5
tool_work_ms = 10.0
"#;
    let e = Scenario::from_toml(text).unwrap_err().to_string();
    assert!(e.contains("tool_work_ms needs endpoint /api/chat"), "{e}");
}
