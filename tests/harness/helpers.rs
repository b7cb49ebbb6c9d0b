use harness::matrix::{self, MatrixPlan, Quiet, Target};
use harness::report::Results;
use harness::workload::Scenario;
use std::time::Duration;

/// `agents` identical agents, one call of `tokens` each, on `preset`.
pub fn scenario(name: &str, preset: &str, agents: usize, tokens: u32, time_scale: f64) -> Scenario {
    Scenario::from_toml(&format!(
        "name = \"{name}\"\npreset = \"{preset}\"\ntime_scale = {time_scale}\n[[agents]]\nname = \"agent\"\ncount = {agents}\n[[agents.calls]]\nprompt = \"Summarise the run.\"\ntokens = {tokens}\n"
    ))
    .expect("test scenario parses")
}

/// The study's two agents (shorter) on `preset`.
pub fn two_agents(name: &str, preset: &str) -> Scenario {
    two_agents_at(name, preset, 0.05)
}

/// [`two_agents`] at another time scale.
pub fn two_agents_at(name: &str, preset: &str, time_scale: f64) -> Scenario {
    Scenario::from_toml(&format!(
        "name = \"{name}\"\npreset = \"{preset}\"\ntime_scale = {time_scale}\n[[agents]]\nname = \"collector\"\n[[agents.calls]]\nprompt = \"Collect.\"\ntokens = 120\n[[agents]]\nname = \"insight\"\n[[agents.calls]]\nprompt = \"Analyse.\"\ntokens = 200\n"
    ))
    .expect("test scenario parses")
}

pub fn plan(runtimes: &[&str], scenarios: Vec<Scenario>, runs: usize) -> MatrixPlan {
    MatrixPlan {
        runtimes: runtimes.iter().map(|s| s.to_string()).collect(),
        scenarios,
        runs,
        seed: 7,
        time_scale: None,
        solo_runs: 1,
        max_solo_runs: 1,
        target: Target::Simulator,
        out: None,
        timeout: Duration::from_secs(30),
        command: "test".into(),
        shard: None,
    }
}

pub fn run(p: &MatrixPlan) -> Results {
    matrix::run(p, &mut Quiet).unwrap_or_else(|e| panic!("the matrix ran: {e}"))
}
