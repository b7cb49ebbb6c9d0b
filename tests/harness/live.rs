use crate::helpers::{plan, two_agents};
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
    let sim =
        SimProcess::start(&["--port", "0", "--instances", "2", "--preset", "dual-two-devices", "--time-scale", "0.05"]);
    let mut p = plan(&["tokio-default", "ctl-sequential"], vec![two_agents("live", "dual-two-devices")], 2);
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
    p.target = live(vec![server.uri()]);
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
