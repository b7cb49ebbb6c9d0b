use crate::helpers::{plan, run, scenario, two_agents, two_agents_at};
use harness::verdict::Verdict;
use sim_ollama::judge::{Allows, Limit};

#[test]
fn the_same_agents_on_a_one_slot_instance_are_client_parallel_and_the_slot_is_named() {
    // Calls of 500 tokens (~4.4 s modelled) on one slot: the agents took turns at the server,
    // as one slot makes any client's calls do. The client overlapped them as far as the
    // deployment allows (client-parallel); the deployment allows no speedup, and says why and
    // what to set.
    let one_slot = crate::helpers::scenario("one_slot", "single-1slot", 2, 500, 0.02);
    let r = run(&plan(&["tokio-default", "smol"], vec![one_slot], 2));
    for c in &r.summary {
        assert_eq!(c.verdict, Verdict::Parallel, "{}: {}", c.runtime, c.reason);
        assert!(c.reason.contains("as far as the deployment allows"), "{}", c.reason);
        let d = c.deployment.as_ref().expect("a deployment verdict on the simulator");
        assert_eq!(d.verdict, Allows::NoSpeedup, "{}", d.reason);
        assert_eq!(d.limit, Limit::Slots, "{}", d.reason);
        assert!(d.reason.contains("1 parallel slot") && d.reason.contains("OLLAMA_NUM_PARALLEL=2"), "{}", d.reason);
    }
}

#[test]
fn two_instances_on_one_device_are_client_parallel_and_the_shared_device_is_named() {
    let r = run(&plan(&["tokio-default"], vec![two_agents("one_device", "dual-one-device")], 2));
    let c = &r.summary[0];
    assert_eq!(c.verdict, Verdict::Parallel, "{}", c.reason);
    let d = c.deployment.as_ref().expect("a deployment verdict on the simulator");
    assert_eq!(d.verdict, Allows::NoSpeedup, "{}", d.reason);
    assert_eq!(d.limit, Limit::SharedDevice, "{}", d.reason);
    assert!(d.reason.contains("instances 0 and 1 share device 0"), "{}", d.reason);
    // The study's formula reads this as a success; the true efficiency does not.
    assert!(c.efficiency_apparent.median > 0.85, "apparent {:?}", c.efficiency_apparent);
    assert!(c.efficiency_true.median < 0.6, "true {:?}", c.efficiency_true);
}

#[test]
fn two_instances_on_two_devices_are_parallel() {
    // Time scale 0.2: calls of ~0.3 and ~0.45 s of wall time. At 0.05 (calls of ~0.1 s) the
    // client's own scheduling delays under four busy loops (10-20 ms) once cost 21 % of the
    // possible saving and read degraded; the judge measures wall time, so the calls must be
    // long against what a busy machine adds.
    let r = run(&plan(&["tokio-default"], vec![two_agents_at("two_devices", "dual-two-devices", 0.2)], 2));
    assert_eq!(r.summary[0].verdict, Verdict::Parallel, "{}", r.summary[0].reason);
}

/// Issue 9: `harness::matrix::run` called from async code (here a tokio test's runtime) used
/// to panic ("Cannot start a runtime from within a runtime"); it now runs on a thread of its
/// own and returns.
#[tokio::test]
async fn the_matrix_runs_when_called_from_inside_a_tokio_runtime() {
    let p = plan(&["tokio-default", "smol"], vec![scenario("async_caller", "ideal", 2, 30, 0.02)], 1);
    let r = run(&p);
    assert_eq!(r.runs.len(), 2);
    assert!(r.runs.iter().all(|x| x.judge.is_some()), "the judge read every run's trace");
}
