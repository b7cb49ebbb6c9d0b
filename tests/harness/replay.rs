//! Record and replay: record from the simulator itself, replay the recording as an empirical
//! profile, record again: the distributions match.

use harness::record::{RecordPlan, record, to_ndjson};
use harness::stats::percentile;
use sim_ollama::{Replay, SimBuilder};
use std::time::Duration;

fn plan(endpoint: &str) -> RecordPlan {
    RecordPlan {
        endpoint: endpoint.to_string(),
        model: "gemma3".into(),
        calls: 20,
        max_tokens: 30,
        prompt: "Summarise".into(),
        timeout: Duration::from_secs(30),
    }
}

fn stats(calls: &[harness::record::Recorded]) -> (f64, f64, f64, f64) {
    let ttft: Vec<f64> = calls.iter().map(|c| c.ttft_ms).collect();
    let gaps: Vec<f64> = calls.iter().flat_map(|c| c.gaps_ms.iter().copied()).collect();
    let tokens: Vec<f64> = calls.iter().map(|c| c.tokens as f64).collect();
    (percentile(&ttft, 0.5), percentile(&gaps, 0.5), percentile(&gaps, 0.9), percentile(&tokens, 0.5))
}

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * a.abs().max(b.abs())
}

#[test]
fn a_recording_replayed_by_the_simulator_reproduces_its_distributions() {
    // Record from a simulator (time scale 0.25: gaps of about 2.2 ms, TTFT about 5 ms).
    let original = SimBuilder::new().seed(1).time_scale(0.25).start().unwrap();
    let first = record(&plan(original.url())).expect("recording");
    assert_eq!(first.len(), 20);
    let file = std::env::temp_dir().join(format!("replay-{}.ndjson", std::process::id()));
    std::fs::write(&file, to_ndjson(&first)).unwrap();

    // Replay it: a gemma3 whose profile is the recording (already in wall milliseconds, so
    // time scale 1.0), seeded.
    let mut spec = sim_ollama::config::default_catalogue().into_iter().find(|m| m.name == "gemma3:latest").unwrap();
    spec.profile.replay = Some(Replay::from_ndjson(&std::fs::read_to_string(&file).unwrap()).unwrap());
    spec.profile.cold_load_ms = None;
    spec.profile.load_ms = sim_ollama::dist::DistSpec::constant(0.0);
    let replayed = SimBuilder::new().seed(2).model(spec).start().unwrap();
    let second = record(&plan(replayed.url())).expect("recording the replay");

    let (a, b) = (stats(&first), stats(&second));
    // Both sides are client-side measurements: each TTFT carries the loopback round trip once
    // more in the replay (about 0.5 ms of ~5 ms), and gaps carry tens of microseconds of noise,
    // hence the tolerances; medians of 20 TTFTs and ~600 gaps are stable.
    assert!(close(a.0, b.0, 0.25), "median TTFT {:.2} ms recorded, {:.2} ms replayed", a.0, b.0);
    assert!(close(a.1, b.1, 0.25), "median gap {:.3} ms recorded, {:.3} ms replayed", a.1, b.1);
    assert!(close(a.2, b.2, 0.35), "p90 gap {:.3} ms recorded, {:.3} ms replayed", a.2, b.2);
    assert!(close(a.3, b.3, 0.10), "median tokens {} recorded, {} replayed", a.3, b.3);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn a_replay_file_is_read_from_the_configuration_and_bad_ones_are_named() {
    let file = std::env::temp_dir().join(format!("replay-cfg-{}.ndjson", std::process::id()));
    std::fs::write(&file, "{\"ttft_ms\": 50.0, \"gaps_ms\": [2.0, 2.0], \"tokens\": 3}\n").unwrap();
    let cfg = format!(
        "[[models]]\nname = \"rec:latest\"\nfamily = \"llama\"\nparameter_size = \"1B\"\nquantization_level = \"Q4_0\"\nsize = 1\ncontext_length = 4096\nembedding_length = 8\ncapabilities = [\"completion\"]\n[models.profile]\nload_ms = {{ dist = \"constant\", mean = 0.0 }}\nprompt_tokens_per_s = 1000.0\ndecode_tokens_per_s = 10.0\ninter_token = {{ dist = \"constant\" }}\noutput_tokens = {{ dist = \"constant\", mean = 100.0 }}\nreplay_file = \"{}\"\n",
        file.display()
    );
    let sim = SimBuilder::new().config(sim_ollama::ConfigFile::from_toml(&cfg).unwrap()).start().unwrap();
    let r = crate::util::raw_blocking(
        sim.addrs()[0],
        "POST",
        "/api/generate",
        Some("{\"model\":\"rec\",\"prompt\":\"x\",\"stream\":false}"),
        &[],
    );
    assert_eq!(r.json()["eval_count"], 3, "the answer length comes from the recording");
    std::fs::write(&file, "not json\n").unwrap();
    let e = SimBuilder::new().config(sim_ollama::ConfigFile::from_toml(&cfg).unwrap()).start().unwrap_err().to_string();
    assert!(e.contains("rec:latest") && e.contains("line 1"), "{e}");
    let _ = std::fs::remove_file(&file);
}
