//! Noise on purpose (issue 14): seeded per-request jitter, hiccups and contention between
//! devices, off by default. Frozen-clock durations are the modelled work, noise included, so
//! these checks read the work itself rather than a noisy wall clock.

use crate::util::raw_blocking;
use sim_ollama::SimBuilder;
use sim_ollama::advanced::noise::NoiseSpec;

const BODY: &str = r#"{"model":"gemma3","prompt":"The same question.","stream":false,"options":{"num_predict":8}}"#;

fn eval_durations(sim: &sim_ollama::SimHandle, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let r = raw_blocking(sim.addrs()[0], "POST", "/api/generate", Some(BODY), &[]);
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()["eval_duration"].as_u64().expect("eval_duration")
        })
        .collect()
}

fn sim(noise: Option<&str>, seed: u64) -> sim_ollama::SimHandle {
    let mut b = SimBuilder::new().seed(seed).frozen_clock(true).time_scale(0.001);
    if let Some(n) = noise {
        b = b.noise(NoiseSpec::parse(n).expect("noise parses"));
    }
    b.start().expect("simulator starts")
}

#[test]
fn without_noise_the_same_request_costs_the_same_every_time() {
    let d = eval_durations(&sim(None, 4), 12);
    assert!(d.iter().all(|x| *x == d[0]), "{d:?}");
}

#[test]
fn jitter_varies_a_repeated_request_and_the_seed_reproduces_it() {
    let a = eval_durations(&sim(Some("jitter=0.3"), 4), 40);
    let mean = a.iter().sum::<u64>() as f64 / a.len() as f64;
    let sd = (a.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / a.len() as f64).sqrt();
    // A log-normal of cv 0.3 over 40 draws: the sample cv lies well within 0.15-0.5.
    assert!((0.15..0.5).contains(&(sd / mean)), "cv {} of {a:?}", sd / mean);
    assert_eq!(eval_durations(&sim(Some("jitter=0.3"), 4), 40), a, "the same seed, the same noise");
    assert_ne!(eval_durations(&sim(Some("jitter=0.3"), 5), 40), a, "another seed, other noise");
}

#[test]
fn a_stream_on_another_device_slows_a_request_by_the_contention() {
    // Two instances on two devices; contention 1: a request that starts while one stream
    // decodes on the other device does twice the work.
    let sim = SimBuilder::new()
        .preset("dual-two-devices")
        .unwrap()
        .seed(1)
        .frozen_clock(true)
        .time_scale(0.2)
        .noise(NoiseSpec::parse("contention=1").unwrap())
        .start()
        .unwrap();
    let one = |i: usize| {
        let r = raw_blocking(sim.addrs()[i], "POST", "/api/generate", Some(BODY), &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["eval_duration"].as_u64().expect("eval_duration")
    };
    let alone = one(1);
    // A long stream on instance 0, read until its first token (it is decoding then).
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(sim.addrs()[0]).unwrap();
    let long = r#"{"model":"gemma3","prompt":"Go on.","options":{"num_predict":5000}}"#;
    s.write_all(&crate::util::request_bytes("POST", &sim.addrs()[0].to_string(), "/api/generate", Some(long), &[]))
        .unwrap();
    let mut reader = std::io::BufReader::new(s);
    let mut line = String::new();
    while !line.contains("\"response\"") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the long stream ended early");
    }
    let contended = one(1);
    let ratio = contended as f64 / alone as f64;
    assert!((ratio - 2.0).abs() < 1e-3, "alone {alone} ns, beside a stream {contended} ns");
}
