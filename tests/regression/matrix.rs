use crate::util::snapshot_settings;
use harness::matrix::{self, MatrixPlan, Quiet, Target};
use harness::runtime::{VARIANTS, VariantInfo};
use harness::thresholds::{Thresholds, band, control_band};
use harness::workload;
use std::fmt::Write as _;
use std::time::Duration;

/// Runs every variant on one CI scenario, checks every cell against the thresholds, then
/// snapshots the verdict table: the client verdict and what it blamed, the deployment verdict
/// and its limit, and the efficiency band. On a one-slot server a correct client reads
/// client-parallel with the deployment's slots named; a control that serialized itself reads
/// serialized in the client, whatever the deployment allows.
///
/// Correct variants run 3 times per cell: their median is held to a band a noisy run could
/// leave. Controls run once: a control takes its agents' turns one after another by
/// construction, so no run of it can overlap them, and its serialized run is the gate's
/// slowest (8 agents in turn take 8 times as long): 3 runs of each cost this binary most of
/// its time for no added power (issue 25).
/// A matrix on the embedded simulator: `runtimes` x `scenarios`, `runs` each.
fn plan(runtimes: Vec<String>, scenarios: &[workload::Scenario], runs: usize, command: String) -> MatrixPlan {
    MatrixPlan {
        runtimes,
        scenarios: scenarios.to_vec(),
        runs,
        seed: 0,
        time_scale: None,
        solo_runs: 1,
        max_solo_runs: 1,
        target: Target::Simulator,
        out: None,
        timeout: Duration::from_secs(30),
        command,
        shard: None,
    }
}

fn gate(scenario: &str) {
    let scenarios = workload::select(&[scenario.to_string()], None).expect("a built-in scenario");
    let plan =
        |runtimes: Vec<String>, runs: usize| plan(runtimes, &scenarios, runs, format!("regression gate {scenario}"));
    // VARIANTS lists the correct variants first, then the controls: the table keeps its order.
    let (controls, correct): (Vec<&VariantInfo>, Vec<&VariantInfo>) =
        VARIANTS.iter().partition(|v| v.control.is_some());
    let names = |vs: Vec<&VariantInfo>| vs.iter().map(|v| v.name.to_string()).collect();
    let mut summary = Vec::new();
    for (runtimes, runs) in [(names(correct), 3), (names(controls), 1)] {
        let results = matrix::run(&plan(runtimes, runs), &mut Quiet).unwrap_or_else(|e| panic!("the matrix ran: {e}"));
        summary.extend(results.summary);
    }
    let thresholds = Thresholds::builtin();
    let failures: Vec<String> = summary.iter().flat_map(|c| thresholds.check(c)).collect();
    assert!(
        failures.is_empty(),
        "{} cell(s) of {scenario} broke harness/thresholds.toml:\n{}",
        failures.len(),
        failures.join("\n")
    );

    let mut table = format!(
        "{:<22} {:<17} {:<16} {:<11} {:<14} true efficiency\n",
        "variant", "client verdict", "cause", "deployment", "limit"
    );
    for c in &summary {
        let cause = c.cause.map_or("-", |c| c.as_str());
        let (dep, limit) = c.deployment.as_ref().map_or(("-", "-"), |d| (d.verdict.as_str(), d.limit.as_str()));
        let _ = writeln!(
            table,
            "{:<22} {:<17} {:<16} {:<11} {:<14} {}",
            c.runtime,
            c.verdict.as_str(),
            cause,
            dep,
            limit,
            // A control whose bug cannot act here is a correct client (or one whose bug costs
            // too little to judge): its efficiency is not what the gate holds it to, and one
            // run of it may land either side of a band's edge.
            if c.control_idle.is_some() {
                "(bug cannot act)".to_string()
            } else if VARIANTS.iter().any(|v| v.name == c.runtime && v.control.is_some()) {
                control_band(c.efficiency_true.median).to_string()
            } else {
                band(c.efficiency_true.median).to_string()
            }
        );
    }
    snapshot_settings().bind(|| insta::assert_snapshot!(format!("verdicts_{scenario}"), table));
}

#[test]
fn gate_dual_instances_on_separate_devices() {
    gate("deploy_dual_two_devices");
}

#[test]
fn gate_one_instance_with_one_slot() {
    gate("deploy_single_1slot");
}

#[test]
fn gate_two_instances_on_one_device() {
    gate("deploy_dual_one_device");
}

#[test]
fn gate_eight_agents_on_one_instance() {
    gate("scale_8");
}

/// Agents whose calls are tool round trips (issue 11): the correct variants overlap them, every
/// control is caught.
#[test]
fn gate_agents_running_tool_loops() {
    gate("tool_loops");
}

/// Agents whose tools between calls are as long as their calls (issue 36): the correct variants
/// overlap them, every control is caught, the blocked executor in the tools
/// (`ctl-blocking-tool`) among them.
#[test]
fn gate_agents_with_tools_between_their_calls() {
    gate("tools_between_calls");
}

/// Ollama's concurrency pitfalls (issue 27, `tag:pitfalls`, docs/pitfalls.md): on each, a
/// correct client is not blamed (client-parallel; failed where the server's queue refused its
/// calls) and the deployment verdict names the pitfall's cause and its fix; a client that
/// takes turns is still caught. Checked against `harness/thresholds.toml`'s pitfall rules.
/// One correct variant and one control: the pitfalls are the deployment's, the same for
/// every client (the gate above holds every variant to its band).
#[test]
fn pitfalls_blame_the_deployment_with_its_fix_never_a_correct_client() {
    let scenarios = workload::select(&["tag:pitfalls".to_string()], None).expect("the pitfall scenarios");
    assert!(scenarios.len() >= 7, "{} pitfall scenarios", scenarios.len());
    let plan =
        |runtime: &str, runs: usize| plan(vec![runtime.to_string()], &scenarios, runs, "regression pitfalls".into());
    let mut summary = Vec::new();
    for (runtime, runs) in [("tokio-default", 2), ("ctl-sequential", 1)] {
        let results = matrix::run(&plan(runtime, runs), &mut Quiet).unwrap_or_else(|e| panic!("the matrix ran: {e}"));
        summary.extend(results.summary);
    }
    assert_eq!(summary.len(), 2 * scenarios.len());
    let thresholds = Thresholds::builtin();
    let failures: Vec<String> = summary.iter().flat_map(|c| thresholds.check(c)).collect();
    assert!(
        failures.is_empty(),
        "{} pitfall cell(s) broke harness/thresholds.toml:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
