use crate::helpers::{plan, two_agents, two_agents_at};
use harness::matrix::{self, MatrixError, Quiet, Target};
use harness::verdict::Verdict;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A `sim-ollama` process (the binary built next to this test), killed on drop.
struct SimProcess {
    child: Child,
    urls: Vec<String>,
}

impl SimProcess {
    fn start(args: &[&str]) -> SimProcess {
        let exe = std::env::current_exe().expect("test path");
        let bin = exe.parent().and_then(|d| d.parent()).map(|d| d.join("sim-ollama")).expect("target dir");
        assert!(
            bin.exists(),
            "{} is built by `cargo nextest run --workspace` (sim-ollama's CLI test needs it)",
            bin.display()
        );
        let mut child = Command::new(&bin)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sim-ollama starts");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let n = args.windows(2).find(|w| w[0] == "--instances").map_or(1, |w| w[1].parse().unwrap_or(1));
        let urls = (0..n)
            .map(|_| {
                let mut l = String::new();
                out.read_line(&mut l).expect("a listening line");
                l.trim().strip_prefix("sim-ollama listening on ").expect("the listening line").to_string()
            })
            .collect();
        SimProcess { child, urls }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn live(endpoints: Vec<String>) -> Target {
    Target::Live { endpoints, model: "gemma3".into() }
}

#[test]
fn live_mode_runs_against_a_separately_started_sim_ollama_without_a_trace() {
    // Time scale 0.2: calls of ~0.3-0.45 s of wall time, which is all live mode can judge. At
    // 0.05 (calls of ~0.1 s) a client delayed by four busy loops once read degraded (62 %).
    let sim =
        SimProcess::start(&["--port", "0", "--instances", "2", "--preset", "dual-two-devices", "--time-scale", "0.2"]);
    let mut p = plan(&["tokio-default", "ctl-sequential"], vec![two_agents_at("live", "dual-two-devices", 0.2)], 2);
    p.target = live(sim.urls.clone());
    let r = matrix::run(&p, &mut Quiet).expect("live matrix runs");
    assert_eq!((r.mode.as_str(), r.server_trace), ("live", false));
    assert!(r.runs.iter().all(|x| x.judge.is_none()));
    let ok = r.summary.iter().find(|c| c.runtime == "tokio-default").unwrap();
    assert_eq!(ok.verdict, Verdict::Parallel, "{}", ok.reason);
    let seq = r.summary.iter().find(|c| c.runtime == "ctl-sequential").unwrap();
    assert_eq!(seq.verdict, Verdict::Serialized, "{}", seq.reason);
    assert!(seq.reason.contains("no server trace in live mode"), "{}", seq.reason);
}

fn tags(model: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(serde_json::json!({"models": [{"name": model, "model": model}]}))
}

#[test]
fn live_mode_fails_clearly_when_a_server_lacks_the_model() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(async {
        let s = MockServer::start().await;
        Mock::given(method("GET")).and(path("/api/tags")).respond_with(tags("llama3.2:latest")).mount(&s).await;
        s
    });
    let mut p = plan(&["tokio-default"], vec![two_agents("live", "dual-two-devices")], 1);
    p.target = live(vec![server.uri(), server.uri()]);
    match matrix::run(&p, &mut Quiet) {
        Err(MatrixError::Live(m)) => assert!(m.contains("does not have the model gemma3:latest"), "{m}"),
        other => panic!("expected a live-mode error, got {other:?}"),
    }
}

/// Two agents: one on a healthy sim-ollama, one on a wiremock server answering `bad`.
fn with_failing_endpoint(bad: ResponseTemplate) -> harness::report::Results {
    let sim = SimProcess::start(&["--port", "0", "--time-scale", "0.05"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(async {
        let s = MockServer::start().await;
        Mock::given(method("GET")).and(path("/api/tags")).respond_with(tags("gemma3:latest")).mount(&s).await;
        Mock::given(method("POST")).and(path("/api/generate")).respond_with(bad).mount(&s).await;
        s
    });
    let mut p = plan(&["tokio-default", "smol"], vec![two_agents("live", "dual-two-devices")], 1);
    p.target = live(vec![sim.urls[0].clone(), server.uri()]);
    p.timeout = std::time::Duration::from_millis(800);
    matrix::run(&p, &mut Quiet).expect("the matrix runs to the end")
}

fn ndjson(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).insert_header("content-type", "application/x-ndjson").set_body_string(body)
}

#[test]
fn failing_servers_give_clear_errors_and_keep_the_other_agents_results() {
    let token = "{\"model\":\"gemma3\",\"created_at\":\"2026-01-01T00:00:00Z\",\"response\":\"hi\",\"done\":false}\n";
    let cases: Vec<(&str, ResponseTemplate, &str)> = vec![
        (
            "500 before streaming",
            ResponseTemplate::new(500).set_body_string("{\"error\":\"model runner has unexpectedly stopped\"}"),
            "HTTP 500",
        ),
        (
            "an error line mid-stream",
            ndjson(&format!("{token}{token}{{\"error\":\"boom\"}}\n")),
            "error line in the stream: boom",
        ),
        ("a truncated stream", ndjson(&format!("{token}{token}")), "without a final done"),
        ("slow headers past the timeout", ndjson(token).set_delay(std::time::Duration::from_secs(3)), "timed out"),
    ];
    for (what, bad, expected) in cases {
        let r = with_failing_endpoint(bad);
        for run in &r.runs {
            let failing = run
                .calls
                .iter()
                .find(|c| c.instance == 1)
                .unwrap_or_else(|| panic!("{what}: the failing agent's call is reported"));
            let err =
                failing.error.as_deref().unwrap_or_else(|| panic!("{what} ({}): an error is reported", run.runtime));
            assert!(err.contains(expected), "{what} ({}): {err}", run.runtime);
            let healthy = run.calls.iter().find(|c| c.instance == 0).expect("the healthy agent's call is kept");
            assert!(healthy.error.is_none() && healthy.tokens > 0, "{what}: {healthy:?}");
            assert!(run.reason.contains("1 of 2 agents failed"), "{what}: {}", run.reason);
            // Issue 14: a run with a failed call is failed, not judged on a failure's timings.
            assert_eq!(run.verdict, Verdict::Failed, "{what}: {}", run.reason);
        }
        for c in &r.summary {
            assert_eq!((c.verdict, c.failed_runs), (Verdict::Failed, c.runs), "{what}: {}", c.reason);
        }
    }
}

#[test]
fn a_stalled_stream_times_out_with_a_clear_error() {
    // The simulator's own stall fault, past the harness's timeout.
    let rt = sim_ollama::SimBuilder::new()
        .time_scale(0.05)
        .fault(serde_json::from_value(serde_json::json!({"kind": "stall", "after_tokens": 5, "instance": 0})).unwrap())
        .instances(2)
        .start()
        .unwrap();
    let mut p = plan(&["tokio-default"], vec![two_agents("live", "dual-two-devices")], 1);
    p.target = live(rt.urls().to_vec());
    p.timeout = std::time::Duration::from_millis(600);
    let r = matrix::run(&p, &mut Quiet).expect("runs");
    let stalled = r.runs[0].calls.iter().find(|c| c.instance == 0).unwrap();
    assert!(stalled.error.as_deref().is_some_and(|e| e.contains("timed out")), "{stalled:?}");
    assert!(r.runs[0].calls.iter().any(|c| c.instance == 1 && c.error.is_none()));
}

/// Issue 23: a call the server ends early (a model reaching its end of text before the tokens
/// the scenario asked for) did less work than the scenario: the run is inconclusive, naming the
/// call, never judged as usual; its solo runs are no baselines either. Here a script makes one
/// agent's every answer two tokens long.
#[test]
fn a_call_the_server_ends_early_makes_the_run_inconclusive() {
    let sim = sim_ollama::SimBuilder::new()
        .time_scale(0.05)
        .instances(2)
        .script(serde_json::from_value(serde_json::json!({"agent": "insight", "text": "Done."})).unwrap())
        .start()
        .unwrap();
    let mut p = plan(&["tokio-default"], vec![two_agents("live", "dual-two-devices")], 1);
    p.target = live(sim.urls().to_vec());
    let r = matrix::run(&p, &mut Quiet).expect("runs");
    let run = &r.runs[0];
    assert_eq!(run.verdict, Verdict::Inconclusive, "{}", run.reason);
    assert!(
        run.reason.contains("agent insight's call 1 ended early") && run.reason.contains("of the 200 tokens asked for"),
        "{}",
        run.reason
    );
    let insight = run.agents.iter().find(|a| a.name == "insight").expect("insight ran");
    assert_eq!(insight.solo_rounds, 0, "a solo run that ended early is no baseline");
    assert_eq!(r.summary[0].verdict, Verdict::Inconclusive, "{}", r.summary[0].reason);
}

/// The noise of the live-mode tests: every request's work varies by a log-normal factor of
/// cv 0.15, three in a hundred run 2.5 times slower, and a request that starts beside a stream
/// on the other server runs 15 % slower (CPU-like contention). With that contention a correct
/// pair of agents saves about three quarters of what it could (the longer agent, started
/// second, runs 15 % slower): parallel or degraded, never serialized.
const NOISE: &str = "jitter=0.15,slow=0.03,slow_factor=2.5,contention=0.15";

/// The noise of two real Ollama servers sharing two cores, as measured (issue 23 item 8, two
/// servers of `../shared/tools/real-ollama`, calls of 1,000-3,200 tokens,
/// `scripts/solo-noise.py` on the matrix's results.json): solo calls vary by a coefficient of
/// variation of 0.02 (median over 140 agents' rounds; 0.065 at the 90th percentile), so jitter 0.04 with one call in a hundred 1.5 times slower is rather more;
/// the contention of two servers on two cores is what caps what they allow.
const REAL_NOISE: &str = "jitter=0.04,slow=0.01,slow_factor=1.5,contention=0.15";

/// One `sim-ollama` process with two instances of `preset` (two servers to the harness) at time
/// scale 0.04, seeded, made noisy on purpose (`--noise`), with `more` arguments.
fn noisy_servers(preset: &str, seed: &str, noise: &str, more: &[&str]) -> SimProcess {
    let mut args = vec![
        "--port",
        "0",
        "--instances",
        "2",
        "--preset",
        preset,
        "--time-scale",
        "0.04",
        "--seed",
        seed,
        "--noise",
        noise,
    ];
    args.extend_from_slice(more);
    SimProcess::start(&args)
}

/// Issue 14: the controls against noisy servers. One `sim-ollama` process with two instances of
/// `preset` (two servers to the harness), made noisy on purpose (`noise`). Live mode has
/// no trace: verdicts come from the client's view, the solo rounds and the reference client's
/// rounds (what these servers allow). Every control must be caught (serialized or partly
/// serialized: not parallel, not inconclusive) and no correct variant may be called
/// serialized; every cell carries the deployment verdict measured with the reference client. A
/// client with one connection serializes agents that share a server only (one connection per
/// server), so it runs on one server with four slots. Returns the correct cells: what they read
/// and why.
fn noisy_servers_catch_every_control(seed: &str, noise: &str, preset: &str) -> Vec<(String, Verdict)> {
    let sim = noisy_servers(preset, seed, noise, &["--num-parallel", "4"]);
    let controls = ["ctl-mutex-semaphore", "ctl-blocking-sleep", "ctl-block-on", "ctl-one-permit", "ctl-sequential"];
    let correct = ["tokio-default", "async-std", "smol"];
    let all: Vec<&str> = correct.iter().chain(controls.iter()).copied().collect();
    let runs = 4;
    let mut p = plan(&all, vec![two_agents("noisy", preset)], runs);
    p.target = live(sim.urls.clone());
    // What the command line gives live mode by default: a round before every run, one after,
    // and up to as many again while a cell is too noisy to tell.
    p.solo_runs = runs + 1;
    p.max_solo_runs = 2 * (runs + 1);
    let mut r = matrix::run(&p, &mut Quiet).expect("live matrix runs");
    let one_server = crate::helpers::scenario("noisy-one-server", "single-4slots", 2, 160, 0.04);
    let mut p = plan(&["tokio-default", "ctl-one-connection"], vec![one_server], runs);
    p.target = live(sim.urls[..1].to_vec());
    p.solo_runs = runs + 1;
    p.max_solo_runs = 2 * (runs + 1);
    r.summary.extend(matrix::run(&p, &mut Quiet).expect("live matrix runs").summary);
    for c in &r.summary {
        let what =
            format!("seed {seed}, {} x {} ({:?}): {} - {}", c.runtime, c.scenario, c.verdicts, c.verdict, c.reason);
        // The tally the README quotes (`--no-capture` shows it).
        let allows = c.deployment.as_ref().map_or("?".to_string(), |d| d.verdict.to_string());
        eprintln!(
            "cell: seed {seed}, noise {noise}, {} x {}: {} (deployment {allows})",
            c.runtime, c.scenario, c.verdict
        );
        assert_eq!(c.failed_runs, 0, "{what}");
        if c.control.is_some() {
            assert!(matches!(c.verdict, Verdict::Serialized | Verdict::PartlySerialized), "a control passed: {what}");
        } else {
            // Measured against what these servers allow (the reference client's rounds). At the
            // harsh noise ([`NOISE`], 0.15 of jitter on calls of 70-90 ms) many correct cells
            // are inconclusive (the noise, not the program, would decide; docs/harness.md gives
            // the tally); at the real servers' noise the next test asks 90 % parallel. What
            // holds at any noise: no correct variant is called serialized.
            assert_ne!(c.verdict, Verdict::Serialized, "a correct variant was called serialized: {what}");
        }
        let d =
            c.deployment.as_ref().unwrap_or_else(|| panic!("a live cell has a measured deployment verdict: {what}"));
        assert!(d.reason.contains("reference client"), "{what}: {}", d.reason);
        // A live cell says how sure its saving is, unless it quotes none: the servers allow no
        // saving (the overlap decides), in the reference client's rounds or within their noise.
        match c.saving_interval {
            Some(interval) => assert!(interval[0] <= interval[1], "{what}"),
            None => assert!(
                d.verdict == sim_ollama::judge::Allows::NoSpeedup || c.reason.contains("no share of it is quoted"),
                "a live cell with a saving to quote says how sure it is: {what}"
            ),
        }
    }
    assert_eq!(r.summary.len(), 10);
    for run in &r.runs {
        let rounds = run.agents.iter().map(|a| a.solo_rounds).min().unwrap_or(0);
        assert!(
            (runs + 1..=2 * (runs + 1)).contains(&rounds),
            "every agent has its rounds, and no more than the budget"
        );
    }
    r.summary
        .iter()
        .filter(|c| c.control.is_none())
        .map(|c| (format!("{} x {}: {}", c.runtime, c.scenario, c.reason), c.verdict))
        .collect()
}

#[test]
fn noisy_servers_seed_1_controls_caught_correct_not_serialized() {
    noisy_servers_catch_every_control("1", NOISE, "dual-two-devices");
}

/// Issue 23 item 8, in the suite: on `sim-ollama` processes as noisy as the real servers were
/// ([`REAL_NOISE`]), with their contention capping what they allow, every control is caught, no
/// correct variant is called serialized, and at least 90 % of the correct cells read
/// client-parallel: of these four cells, all four (a fifth of a cell short of 90 % is none).
#[test]
fn servers_as_noisy_as_real_ones_read_correct_clients_parallel() {
    let correct = noisy_servers_catch_every_control("2", REAL_NOISE, "dual-one-device");
    let parallel = correct.iter().filter(|(_, v)| *v == Verdict::Parallel).count();
    assert!(parallel * 10 >= correct.len() * 9, "{parallel} of {} correct cells parallel: {correct:#?}", correct.len());
}

/// Live mode adds rounds while the noise leaves a cell in doubt (`--max-solo-runs`; the rule
/// itself, on constructed rounds, is `harness::matrix`'s unit test): on servers whose every
/// call varies by half (jitter 0.5), every run of a cell is judged against the same rounds, no
/// more than the budget, each added round comes with a run, and a cell left with rounds to
/// spare is not in doubt; with the budget at the planned rounds, none is added.
#[test]
fn a_cell_in_doubt_gets_more_rounds_up_to_the_budget() {
    let sim = noisy_servers("dual-two-devices", "3", "jitter=0.5", &[]);
    let judged = |max: usize, runtimes: &[&str]| {
        let scenarios = vec![two_agents_at("in-doubt", "dual-two-devices", 0.04)];
        let mut p = plan(runtimes, scenarios, 2);
        p.target = live(sim.urls.clone());
        p.solo_runs = 3;
        p.max_solo_runs = max;
        matrix::run(&p, &mut Quiet).expect("live matrix runs")
    };
    let r = judged(6, &["tokio-default", "smol"]);
    for c in &r.summary {
        let rounds: Vec<usize> = r
            .runs
            .iter()
            .filter(|x| x.runtime == c.runtime)
            .flat_map(|x| x.agents.iter().map(|a| a.solo_rounds))
            .collect();
        let what = format!("{} rounds {rounds:?}: {} - {}", c.runtime, c.verdict, c.reason);
        let n = rounds[0];
        assert!(rounds.iter().all(|&k| k == n), "every run judged against every round: {what}");
        assert!((3..=6).contains(&n), "{what}");
        // A run before each added round: the cell's interval resamples its runs as well.
        let runs = r.runs.iter().filter(|x| x.runtime == c.runtime).count();
        assert_eq!(runs, 2 + (n - 3), "{what}");
        assert!(n == 6 || !c.reason.starts_with("too noisy to tell"), "rounds to spare, yet in doubt: {what}");
        // Nor is its deployment verdict left to the noise (its share's interval across a band's line).
        let d = c.deployment.as_ref().expect("live cells measure what the servers allow");
        let noise = d.verdict == sim_ollama::judge::Allows::Unknown && d.share_interval.is_some();
        assert!(n == 6 || !noise, "rounds to spare, yet the deployment is unknown: {what}: {}", d.reason);
    }
    // With the budget at the planned rounds, one cell says it: none is added.
    let r = judged(3, &["tokio-default"]);
    let rounds: Vec<usize> = r.runs.iter().flat_map(|x| x.agents.iter().map(|a| a.solo_rounds)).collect();
    assert!(rounds.iter().all(|&k| k == 3), "no budget, no round added: {rounds:?}");
}

#[test]
fn a_scenario_runs_on_as_many_servers_as_it_has_instances() {
    // One server with one slot: given two endpoints, it uses the first only (issue 14: it
    // measured two servers before).
    let sim = SimProcess::start(&["--port", "0", "--preset", "single-1slot", "--time-scale", "0.05"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let spare = rt.block_on(async {
        let s = MockServer::start().await;
        Mock::given(method("GET")).and(path("/api/tags")).respond_with(tags("gemma3:latest")).mount(&s).await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).expect(0).mount(&s).await;
        s
    });
    let one_slot = crate::helpers::scenario("one-slot", "single-1slot", 2, 60, 0.05);
    let mut p = plan(&["tokio-default"], vec![one_slot], 2);
    p.target = live(vec![sim.urls[0].clone(), spare.uri()]);
    let r = matrix::run(&p, &mut Quiet).expect("runs");
    assert!(r.runs.iter().flat_map(|x| &x.calls).all(|c| c.instance == 0 && c.error.is_none()));
    rt.block_on(spare.verify());

    // Two instances, one endpoint: refused before anything runs, naming what is missing.
    let mut p = plan(&["tokio-default"], vec![two_agents("two-servers", "dual-two-devices")], 1);
    p.target = live(vec![sim.urls[0].clone()]);
    match matrix::run(&p, &mut Quiet) {
        Err(MatrixError::Live(m)) => {
            assert!(m.contains("1 endpoint(s) given") && m.contains("two-servers needs 2"), "{m}")
        }
        other => panic!("expected a live-mode refusal, got {other:?}"),
    }
}

#[test]
fn live_local_work_keeps_its_share_of_a_call() {
    // Two calls of 120 tokens with 3 s of modelled local work between them; the server runs
    // at a time scale of 0.05, so a call takes ~5 % of its modelled time and so must the
    // local work: ~150 ms, not 3 s.
    let sim = SimProcess::start(&["--port", "0", "--time-scale", "0.05"]);
    let s = harness::workload::Scenario::from_toml(
        "name = \"work\"\npreset = \"single-4slots\"\n[[agents]]\nname = \"a\"\n[[agents.calls]]\nprompt = \"Plan.\"\ntokens = 120\nlocal_work_ms = 3000\n[[agents.calls]]\nprompt = \"Act.\"\ntokens = 120\n",
    )
    .unwrap();
    let mut p = plan(&["tokio-default"], vec![s], 1);
    p.target = live(vec![sim.urls[0].clone()]);
    let r = matrix::run(&p, &mut Quiet).expect("runs");
    let run = &r.runs[0];
    // Measured over modelled call time: 0.05 plus the HTTP round trip and the client's own
    // time, a few ms on calls of ~70 ms (bounds wide enough for a loaded machine).
    assert!((0.04..0.12).contains(&run.local_work_scale), "local work scale {}", run.local_work_scale);
    // Unscaled, the agent alone would take over 3 s.
    let solo = run.agents[0].solo_s;
    assert!(solo < 1.0, "the agent took {solo} s alone: its local work was not scaled");
}
