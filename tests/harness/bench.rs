use harness::bench::{BenchPlan, Server};
use std::path::PathBuf;
use std::time::Duration;

/// The directory cargo puts this profile's binaries in (`sim-ollama` and `harness` are built
/// by `cargo nextest run --workspace`).
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    exe.parent().and_then(|d| d.parent()).expect("target dir").to_path_buf()
}

fn plan() -> BenchPlan {
    let dir = bin_dir();
    BenchPlan {
        // 5,000 tokens: enough CPU for /proc's 10 ms clock ticks to see it (~50-150 ms).
        streams: vec![100],
        tokens: 50,
        interval: Duration::from_millis(10),
        rounds: 1,
        sim_bin: dir.join("sim-ollama"),
        writer_bin: dir.join("harness"),
    }
}

#[test]
fn the_benchmark_measures_the_simulator_and_the_bare_writer_each_in_its_own_process() {
    let rep = harness::bench::run(&plan(), &mut |_| {}).expect("the benchmark runs");
    assert_eq!(rep.error, None);
    assert_eq!(rep.rows.len(), 2);
    assert_eq!(rep.rows[0].server, Server::SimOllama);
    assert_eq!(rep.rows[1].server, Server::BareWriter);
    for row in &rep.rows {
        let m = &row.median;
        assert_eq!(m.tokens, 5000, "{}: every token of every stream, counted at the client", row.server);
        // Lateness is measured against the schedule from the request's send: a schedule
        // anchored a token off would read 10 ms early (the
        // real figure is a few ms late: accepting 100 connections, tokio's 1 ms timer). Nothing arrives before it is due (the
        // simulator's timer may release a token 50 µs early).
        assert!(m.client_ms[0] > -1.0 && m.first_ms[0] > -1.0, "{}: {m:?}", row.server);
        assert!(m.server_ms[0] >= 0.0 && m.server_ms[1] >= m.server_ms[0], "{}: {m:?}", row.server);
        // The server process did the work, not this one: its CPU and memory are its own.
        assert!(m.cpu_us_per_token > 0.0 && m.rss_peak_mb > 1.0, "{}: {m:?}", row.server);
    }
    let table = rep.to_string();
    assert!(table.contains("| 100 | sim-ollama |") && table.contains("| 100 | bare tokio writer |"), "{table}");
}

#[test]
fn the_benchmark_refuses_what_it_cannot_measure() {
    let mut p = plan();
    p.streams = vec![0];
    assert!(harness::bench::run(&p, &mut |_| {}).unwrap_err().contains("at least 1"));
    let mut p = plan();
    p.interval = Duration::ZERO;
    assert!(harness::bench::run(&p, &mut |_| {}).unwrap_err().contains("interval"));
    let mut p = plan();
    p.sim_bin = bin_dir().join("no-such-sim");
    let e = harness::bench::run(&p, &mut |_| {}).unwrap_err();
    assert!(e.contains("no-such-sim") && e.contains("cargo build --release -p sim-ollama"), "{e}");
}

#[test]
fn a_server_that_fails_mid_benchmark_stops_it_and_what_was_measured_is_kept() {
    // The simulator's round runs first; then the "writer" is a program that exits at once.
    let mut p = plan();
    p.writer_bin = PathBuf::from("/bin/true");
    let rep = harness::bench::run(&p, &mut |_| {}).expect("the plan is valid");
    let e = rep.error.as_deref().unwrap_or_default();
    assert!(e.contains("bare tokio writer did not say where it listens"), "{e:?}");
    assert_eq!(rep.rows.len(), 1, "the simulator's round is kept");
    assert_eq!((rep.rows[0].server, rep.rows[0].median.tokens), (Server::SimOllama, 5000));
    assert!(rep.to_string().contains("STOPPED before the end"));
}
