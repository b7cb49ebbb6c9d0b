//! Probe runs (issue 36): the simulator holds answers back so that the agents do their local
//! work one at a time, and the judge compares the two runs. Agents here are threads making
//! blocking HTTP calls, their "tools" sleeps, free or behind a shared lock.

use crate::util::raw_blocking;
use sim_ollama::judge::{Cause, GapsStatus, JudgeOptions, Verdict, WaitKind};
use sim_ollama::{SimBuilder, SimHandle};
use std::net::SocketAddr;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// A short call of one agent (20 tokens at time scale 0.1: a few tens of milliseconds).
fn call(addr: SocketAddr, agent: Option<&str>, turn: u32) {
    let body = format!(
        r#"{{"model":"gemma3","prompt":"Turn {turn} of {}.","stream":false,"options":{{"num_predict":20}}}}"#,
        agent.unwrap_or("someone")
    );
    let headers: Vec<(&str, &str)> = agent.map(|a| vec![("X-Agent", a)]).unwrap_or_default();
    let r = raw_blocking(addr, "POST", "/api/generate", Some(&body), &headers);
    assert_eq!(r.status, 200, "{}", r.text());
}

/// How three agents do their 300 ms of work between their two calls.
#[derive(Clone, Copy)]
enum Tools {
    /// Each on its own.
    Together,
    /// One at a time, behind one lock (as tools on one blocked executor take turns).
    OneAtATime,
}

/// Three labelled agents: a call, 300 ms of work, a second call.
fn agents(addr: SocketAddr, tools: Tools) {
    let lock = Arc::new(Mutex::new(()));
    std::thread::scope(|s| {
        for agent in ["a", "b", "c"] {
            let lock = Arc::clone(&lock);
            s.spawn(move || {
                call(addr, Some(agent), 1);
                match tools {
                    Tools::Together => std::thread::sleep(Duration::from_millis(300)),
                    Tools::OneAtATime => {
                        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
                        std::thread::sleep(Duration::from_millis(300));
                    }
                }
                call(addr, Some(agent), 2);
            });
        }
    });
}

fn sim() -> SimHandle {
    SimBuilder::new().preset("ideal").unwrap().time_scale(0.1).preload("gemma3").start().unwrap()
}

/// Runs `run`, then again as a probe run; returns the options that judge both (the window
/// from before the first run, the probe run's from its first request) and that first id.
fn run_and_probe(sim: &SimHandle, run: impl Fn()) -> (JudgeOptions, u64) {
    let opts = JudgeOptions::new().since(sim.trace_mark());
    run();
    sim.wait_idle(Duration::from_secs(5)).unwrap();
    let probe = sim.begin_probe(&opts);
    run();
    sim.wait_idle(Duration::from_secs(10)).unwrap();
    sim.end_probe();
    (opts.probe_since(probe), probe)
}

/// Runs the agents, then again as a probe run; returns the judge's report on both.
fn probed(sim: &SimHandle, tools: Tools) -> sim_ollama::Report {
    let (opts, _) = run_and_probe(sim, || agents(sim.addrs()[0], tools));
    sim.judge(&opts)
}

#[test]
fn a_probe_run_holds_answers_so_the_agents_work_one_at_a_time_and_tells_waiting_from_work() {
    let sim = sim();
    // Tools one at a time: the second agent to get the lock waited 300 ms, the third 600.
    let r = probed(&sim, Tools::OneAtATime);
    let g = r.gaps.clone().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Probed, "{r}");
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.cause, Cause::BetweenCalls, "{r}");
    assert_eq!(g.waits.len(), 2, "two of the three agents waited: {g:?}");
    assert!(g.waits.iter().all(|w| w.kind == WaitKind::LocalWork), "{g:?}");
    // Each agent's own work, as the probe measured it: its 300 ms, not the lock's wait.
    for w in &g.waits {
        let own = w.own_s.expect("measured");
        assert!((0.28..0.40).contains(&own), "300 ms of work, give or take the scheduling: {w:?}");
    }
    // The probe held the later answers while an agent worked: 300 ms and 600 ms or so.
    let held: Vec<u64> = sim.trace().requests.iter().filter(|r| r.held_us > 0).map(|r| r.held_us).collect();
    assert!(held.len() >= 2 && held.iter().sum::<u64>() >= 800_000, "{held:?}");

    // Tools together: the probe measures the same 300 ms each, no one waited: parallel.
    let r = probed(&sim, Tools::Together);
    let g = r.gaps.clone().expect("gaps read");
    assert!(matches!(g.status, GapsStatus::Probed | GapsStatus::Settled), "{r}");
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(g.waits.is_empty(), "{g:?}");
}

#[test]
fn an_agent_waiting_for_an_answer_the_probe_holds_is_released_when_its_gap_expires() {
    // Two agents meet at a barrier between their calls: in the probe run the first agent's
    // gap stays open (it waits for the other), so the other's answer is held until that gap
    // expires (1.25 x its first-run length, plus the tolerance). Nothing hangs.
    let sim = sim();
    let addr = sim.addrs()[0];
    let run = || {
        let barrier = Arc::new(Barrier::new(2));
        std::thread::scope(|s| {
            for (agent, work) in [("a", 100), ("b", 250)] {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    call(addr, Some(agent), 1);
                    std::thread::sleep(Duration::from_millis(work));
                    barrier.wait();
                    call(addr, Some(agent), 2);
                });
            }
        });
    };
    let opts = JudgeOptions::new().since(sim.trace_mark());
    run();
    sim.wait_idle(Duration::from_secs(5)).unwrap();
    let probe = sim.begin_probe(&opts);
    let started = Instant::now();
    run();
    // First answers at once; the first released opens a gap of about 250 ms in the first run
    // (a waited for b), expiring after about 330 ms; then the other goes out, works 100-250
    // ms, both send. Well under two seconds; a hold with no expiry would never end.
    assert!(started.elapsed() < Duration::from_secs(3), "the probe run took {:?}", started.elapsed());
    sim.wait_idle(Duration::from_secs(5)).unwrap();
    sim.end_probe();
    let held = sim.trace().requests.iter().filter(|r| r.id >= probe && r.held_us > 0).count();
    assert_eq!(held, 1, "one answer was held, until the gap before it expired");
    let r = sim.judge(&opts.probe_since(probe));
    assert_eq!(r.gaps.as_ref().map(|g| g.status), Some(GapsStatus::Probed), "{r}");
}

/// Three unlabelled agents (no conversation, the same prompts): an embedding of the question,
/// a generate call, 300 ms of work, a second call.
fn unlabelled(addr: SocketAddr, tools: Tools) {
    let lock = Arc::new(Mutex::new(()));
    std::thread::scope(|s| {
        for _ in 0..3 {
            let lock = Arc::clone(&lock);
            s.spawn(move || {
                let body = r#"{"model":"nomic-embed-text","input":"the question"}"#;
                let r = raw_blocking(addr, "POST", "/api/embed", Some(body), &[]);
                assert_eq!(r.status, 200, "{}", r.text());
                call(addr, None, 1);
                match tools {
                    Tools::Together => std::thread::sleep(Duration::from_millis(300)),
                    Tools::OneAtATime => {
                        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
                        std::thread::sleep(Duration::from_millis(300));
                    }
                }
                call(addr, None, 2);
            });
        }
    });
}

#[test]
fn requests_of_no_known_agent_are_released_one_at_a_time_and_each_next_call_linked_to_its_answer() {
    // Unlabelled calls carry no conversation: the judge cannot tell whose they are. The probe
    // releases one answer at a time (an embedding's too); each next call arrives while its own
    // agent's answer is the one out, and the trace links it to that answer.
    for tools in [Tools::Together, Tools::OneAtATime] {
        let sim = SimBuilder::new()
            .preset("ideal")
            .unwrap()
            .time_scale(0.1)
            .preload("gemma3")
            .preload("nomic-embed-text")
            .start()
            .unwrap();
        let addr = sim.addrs()[0];
        let opts = JudgeOptions::new().since(sim.trace_mark()).expected_agents(3);
        unlabelled(addr, tools);
        sim.wait_idle(Duration::from_secs(5)).unwrap();
        let first = sim.judge(&opts);
        assert!(first.needs_probe(), "{first}");
        let probe = sim.begin_probe(&opts);
        let started = Instant::now();
        unlabelled(addr, tools);
        // Three tools of 300 ms one at a time, and the calls: about a second; expiries past
        // the first run's gaps would add about 0.4 s each. Well under five.
        assert!(started.elapsed() < Duration::from_secs(5), "the probe run took {:?}", started.elapsed());
        sim.wait_idle(Duration::from_secs(5)).unwrap();
        sim.end_probe();
        let trace = sim.trace();
        let run: Vec<_> = trace.requests.iter().filter(|r| r.id >= probe).collect();
        let firsts = run.iter().filter(|r| r.probe_after.is_none()).count();
        let mut followed: Vec<u64> = run.iter().filter_map(|r| r.probe_after).collect();
        followed.sort_unstable();
        followed.dedup();
        assert_eq!(firsts, 3, "three first calls (the embeddings), before any answer went out: {run:?}");
        assert_eq!(followed.len(), 6, "each later call follows an answer of its own: {run:?}");
        assert!(
            run.iter().filter(|r| r.endpoint == "/api/embed").all(|r| followed.contains(&r.id)),
            "each embedding was followed by its agent's first call: {run:?}"
        );
        assert!(run.iter().filter(|r| r.held_us > 0).count() >= 2, "answers were held: {run:?}");
        let r = sim.judge(&opts.probe_since(probe));
        assert_eq!(r.agents_from, sim_ollama::judge::AgentSource::Probe, "{r}");
        match tools {
            Tools::Together => assert_eq!(r.verdict, Verdict::Parallel, "{r}"),
            Tools::OneAtATime => assert_eq!(r.cause, Cause::BetweenCalls, "{r}"),
        }
    }
}

#[test]
fn over_http_a_probe_run_and_a_confirmation_are_asked_for_between_the_mark_and_the_judge() {
    let sim = sim();
    let addr = sim.addrs()[0];
    raw_blocking(addr, "POST", "/sim/mark", None, &[]);
    agents(addr, Tools::OneAtATime);
    let first = raw_blocking(addr, "GET", "/sim/judge", None, &[]).json();
    assert_eq!(first["report"]["cause"], "unprobed_gaps", "{first}");
    assert_eq!(first["report"]["gaps"]["status"], "unprobed", "{first}");
    let r = raw_blocking(addr, "POST", "/sim/probe", None, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let started = r.json();
    assert_eq!(started["agents"], 3, "{started}");
    assert_eq!(started["one_at_a_time"], false, "{started}");
    // One probe run per mark.
    let again = raw_blocking(addr, "POST", "/sim/probe", None, &[]);
    assert_eq!(again.status, 400, "{}", again.text());
    assert!(
        again.json()["error"].as_str().is_some_and(|e| e.contains("a probe run has already begun")),
        "{}",
        again.text()
    );
    agents(addr, Tools::OneAtATime);
    let doc = raw_blocking(addr, "GET", "/sim/judge?expect=parallel", None, &[]).json();
    assert_eq!(doc["report"]["gaps"]["status"], "probed", "{doc}");
    assert_eq!(doc["report"]["cause"], "between_calls", "{doc}");
    assert_eq!(doc["passed"], false, "{doc}");
    // A verdict resting on waits the probe found asks for a confirmation of the run judged.
    assert_eq!(doc["report"]["confirm"], "plain", "{doc}");
    let bad = raw_blocking(addr, "POST", "/sim/confirm?run=twice", None, &[]);
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.json()["error"].as_str().is_some_and(|e| e.contains("run must be plain or probe")), "{}", bad.text());
    let r = raw_blocking(addr, "POST", "/sim/confirm?run=plain", None, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["run"], "plain", "{}", r.text());
    let again = raw_blocking(addr, "POST", "/sim/confirm", None, &[]);
    assert_eq!(again.status, 400, "one confirmation per probe run: {}", again.text());
    agents(addr, Tools::OneAtATime);
    let doc = raw_blocking(addr, "GET", "/sim/judge", None, &[]).json();
    let c = &doc["report"]["confirmation"];
    assert_eq!(
        (c["run"].as_str(), c["kept"].as_str(), c["waits_recurred"].as_bool()),
        (Some("plain"), Some("first"), Some(true)),
        "{doc}"
    );
    assert_eq!(doc["report"]["cause"], "between_calls", "the tools took turns again: {doc}");
    assert!(doc["report"].get("confirm").is_none(), "a confirmed verdict asks for no more: {doc}");
    // A new mark starts over: a probe may be asked for again, and a confirmation only after it.
    raw_blocking(addr, "POST", "/sim/mark", None, &[]);
    let early = raw_blocking(addr, "POST", "/sim/confirm", None, &[]);
    assert_eq!(early.status, 400, "{}", early.text());
    assert!(
        early.json()["error"].as_str().is_some_and(|e| e.contains("no probe run since the mark")),
        "{}",
        early.text()
    );
    let r = raw_blocking(addr, "POST", "/sim/probe", None, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn an_answer_a_first_call_went_out_right_after_is_held_back_its_delay_in_the_probe_run() {
    // A lead's call, then two members whose first calls go out when it has answered: the probe
    // holds the lead's answer back 300 ms, and the members, which wait for it, go out after it
    // again (they depended on it).
    let sim = sim();
    let addr = sim.addrs()[0];
    let run = || {
        call(addr, Some("lead"), 1);
        std::thread::scope(|s| {
            for m in ["m1", "m2"] {
                s.spawn(move || call(addr, Some(m), 1));
            }
        });
    };
    let (opts, probe) = run_and_probe(&sim, run);
    let t = sim.trace();
    let lead = t.requests.iter().find(|r| r.id >= probe && r.agent_label.as_deref() == Some("lead")).expect("lead");
    assert!(lead.held_us >= 290_000, "the lead's answer held back its delay: {} us", lead.held_us);
    let r = sim.judge(&opts);
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.handoffs.len(), 2, "{g:?}");
    assert!(g.handoffs.iter().all(|h| h.depended == Some(true)), "{g:?}");
    assert_ne!(r.verdict, Verdict::Parallel, "no data behind the wait: {r}");
}

/// A lead's call, then two members whose first prompts are handed the lead's answer as its
/// words sorted, deduplicated and cut to eight (not in order, so no hint the judge reads in one
/// run): their answers.
fn members_handed_sorted_words(addr: SocketAddr) {
    let body = r#"{"model":"gemma3","prompt":"Turn 1 of lead.","stream":false,"options":{"num_predict":20}}"#;
    let r = raw_blocking(addr, "POST", "/api/generate", Some(body), &[("X-Agent", "lead")]);
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json()["response"].as_str().unwrap_or_default().to_lowercase();
    let mut words: Vec<&str> = answer.split(|c: char| !c.is_alphabetic()).filter(|w| w.len() > 3).collect();
    words.sort_unstable();
    words.dedup();
    let task = words.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    std::thread::scope(|s| {
        for m in ["m1", "m2"] {
            let task = &task;
            s.spawn(move || {
                let body = serde_json::json!({"model": "gemma3", "prompt": format!("{m}: write about {task}"),
                    "stream": false, "options": {"num_predict": 20}})
                .to_string();
                let r = raw_blocking(addr, "POST", "/api/generate", Some(&body), &[("X-Agent", m)]);
                assert_eq!(r.status, 200, "{}", r.text());
            });
        }
    });
}

#[test]
fn members_handed_an_answer_in_a_form_the_judge_does_not_read_are_shown_handed_it_by_marked_words() {
    // The probe holds the lead's answer back and writes it in marked words; the members, handed
    // its words sorted, send prompts holding some: data of it reached them, a hand-off shown,
    // parallel (with the prompts fixed, the test above: never parallel on that evidence).
    let sim = sim();
    let (opts, probe) = run_and_probe(&sim, || members_handed_sorted_words(sim.addrs()[0]));
    let t = sim.trace();
    let marked: Vec<bool> = t.requests.iter().filter(|r| r.id >= probe).map(|r| r.probe_marked).collect();
    assert_eq!(marked, [false, true, true], "the members' probe prompts, not the lead's");
    let first: Vec<bool> = t.requests.iter().filter(|r| r.id < probe).map(|r| r.probe_marked).collect();
    assert!(first.iter().all(|m| !m), "nothing is marked outside a probe run: {first:?}");
    let r = sim.judge(&opts);
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.reason.contains("2 first calls held words of the answer it went out after"), "{}", g.reason);
}

/// How three labelled agents, one call each, come to call one after another.
#[derive(Clone, Copy)]
enum Spaced {
    /// Each on its own timer, 250 ms after the one before started: a fixed delay of the
    /// program's own (a framework's start-up), which calls this short (~45 ms) outlast.
    Timer,
    /// Each once the one before has its answer, and 200 ms of work more: waiting.
    Answer,
}

fn spaced(addr: SocketAddr, how: Spaced) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    std::thread::scope(|s| {
        for (i, agent) in ["a", "b", "c"].into_iter().enumerate() {
            let (tx, rx) = (tx.clone(), Arc::clone(&rx));
            s.spawn(move || {
                match how {
                    Spaced::Timer => std::thread::sleep(Duration::from_millis(250 * i as u64)),
                    Spaced::Answer if i > 0 => {
                        rx.lock().unwrap_or_else(|e| e.into_inner()).recv().expect("the agent before answered");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Spaced::Answer => {}
                }
                call(addr, Some(agent), 1);
                let _ = tx.send(());
            });
        }
    });
}

#[test]
fn calls_that_never_overlapped_are_probed_by_holding_every_answer() {
    use sim_ollama::judge::HeldStatus;
    for (how, verdict, cause, status, held) in [
        // On their own timers: the first held answer is overtaken, the program's own delay (not
        // waiting) kept its calls apart at this time scale; the probe holds no more.
        (Spaced::Timer, Verdict::Inconclusive, Cause::TimeScale, HeldStatus::DidNotWait, 1),
        // Waiting for the answer before: no call comes while an answer is held (all three).
        (Spaced::Answer, Verdict::Serialized, Cause::Client, HeldStatus::Waited, 3),
    ] {
        let sim = sim();
        let opts = JudgeOptions::new().since(sim.trace_mark());
        spaced(sim.addrs()[0], how);
        sim.wait_idle(Duration::from_secs(5)).unwrap();
        let first = sim.judge(&opts);
        // One run cannot tell: serialized as the calls were, a probe asked for.
        assert_eq!((first.verdict, first.cause), (Verdict::Serialized, Cause::Client), "{first}");
        assert_eq!(first.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{first}");
        assert!(first.needs_probe, "{first}");
        let probe = sim.begin_probe(&opts);
        let t = Instant::now();
        spaced(sim.addrs()[0], how);
        sim.wait_idle(Duration::from_secs(5)).unwrap();
        sim.end_probe();
        let probed = sim.judge(&opts.probe_since(probe));
        let h = probed.held.clone().expect("held read");
        assert_eq!((probed.verdict, probed.cause, h.status, h.held), (verdict, cause, status, held), "{probed}");
        assert!(!probed.needs_probe, "{probed}");
        // Where the time scale is what left it open, the report names the one to judge it at.
        match cause {
            Cause::TimeScale => {
                assert!(probed.longer_time_scale.is_some_and(|s| s > probed.time.time_scale && s <= 1.0), "{probed}")
            }
            _ => assert_eq!(probed.longer_time_scale, None, "{probed}"),
        }
        // Bounded: each of the three answers held at most its hold (the longest gap, ~0.2 s, a
        // quarter more and the tolerance: under 0.5 s on an idle machine, 0.6 s allowed), the
        // program's own 0.5 s besides; 3 s leaves room for a loaded machine.
        assert!(h.hold_s > 0.0 && h.hold_s < 0.6, "{h:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "the probe run took {:?}", t.elapsed());
    }
}

#[test]
fn a_streamed_rival_is_out_when_its_last_token_is() {
    // Three agents behind a permit of two (FIFO): a's short call and b's long streamed one hold
    // the permits; c's call waits and goes out as a's answer ends. The probe holds a's answer
    // (c went out right after it) 300 ms, and until 300 ms after its rival, b's answer, is out.
    // b streams for some 400 ms from its start: were a's answer let out while b still streamed
    // (b counted out when its stream started), c would follow a's again and a permit would
    // read as a hand-off. A streamed answer keeps every other back until its last token, so
    // b's end frees the permit while a's answer is held, and c can go out right after b's
    // (measured: 1 ms after b's end, a's answer 12-16 ms after it).
    let sim = sim();
    let addr = sim.addrs()[0];
    let streamed = |agent: &str, tokens: u32| {
        let body = format!(
            r#"{{"model":"gemma3","prompt":"The long part of {agent}.","stream":true,"options":{{"num_predict":{tokens}}}}}"#
        );
        let r = raw_blocking(addr, "POST", "/api/generate", Some(&body), &[("X-Agent", agent)]);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    let run = || {
        // A FIFO permit of two: c waits for a turn a or b gives back.
        let permits = Arc::new((Mutex::new(2u32), std::sync::Condvar::new()));
        let started = Arc::new(Barrier::new(2));
        std::thread::scope(|s| {
            for agent in ["a", "b", "c"] {
                let (permits, started) = (Arc::clone(&permits), Arc::clone(&started));
                s.spawn(move || {
                    if agent == "c" {
                        // After a and b hold the permits.
                        started.wait();
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let (lock, freed) = &*permits;
                    let mut n = freed.wait_while(lock.lock().unwrap(), |n| *n == 0).unwrap();
                    *n -= 1;
                    drop(n);
                    if agent == "a" {
                        started.wait();
                    }
                    match agent {
                        "b" => streamed("b", 700),
                        _ => call(addr, Some(agent), 1),
                    }
                    *lock.lock().unwrap() += 1;
                    freed.notify_one();
                });
            }
        });
    };
    let (_, probe) = run_and_probe(&sim, run);
    let t = sim.trace();
    let of = |agent: &str| {
        t.requests.iter().find(|r| r.id >= probe && r.agent_label.as_deref() == Some(agent)).expect("a probe request")
    };
    let (a, b) = (of("a"), of("b"));
    let (a_end, b_end) = (a.end_us.expect("a ended"), b.end_us.expect("b ended"));
    // What the server does, not how soon c's thread wakes: a's answer, held, is not let out
    // before b's last token (then c, whichever answer it waited for, can follow b's).
    assert!(a.held_us >= 290_000, "a's answer held back its delay: {} us", a.held_us);
    assert!(a_end >= b_end, "a's answer came out at {a_end} us, before b's last token at {b_end} us");
}

/// Twelve unlabelled agents of one call each (tickets): threads started 10 ms apart (a
/// launcher slow to start them), or all at once through a pool of four threads.
fn tickets(addr: SocketAddr, pool: bool) {
    let next = std::sync::atomic::AtomicU32::new(0);
    let take = || Some(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)).filter(|&k| k < 12);
    std::thread::scope(|s| {
        for _ in 0..if pool { 4 } else { 12 } {
            if !pool {
                std::thread::sleep(Duration::from_millis(10));
            }
            s.spawn(|| {
                while let Some(k) = take() {
                    call(addr, None, k);
                    if !pool {
                        break;
                    }
                }
            });
        }
    });
}

#[test]
fn a_probe_run_one_answer_at_a_time_waits_for_a_slow_launcher_and_shows_a_pool() {
    // Released one answer at a time, the probe holds its first answer until no request has
    // come for 50 ms: every ticket a launcher starts over 110 ms goes out before any answer
    // (before, the first answer went out 50 ms after the first request, and the later tickets
    // were taken to follow answers); through a pool of four, four go out and
    // each other one after an answer: the limit shown, partly serialized. (A launcher pausing
    // over 50 ms between two threads, on a starved machine, would end the start early: 10 ms
    // apart leaves that margin.)
    for pool in [false, true] {
        let sim = sim();
        let (opts, probe) = run_and_probe(&sim, || tickets(sim.addrs()[0], pool));
        let opts = opts.expected_agents(12);
        let trace = sim.trace();
        let run: Vec<_> = trace.requests.iter().filter(|r| r.id >= probe).collect();
        let firsts = run.iter().filter(|r| r.probe_after.is_none()).count();
        assert_eq!(firsts, if pool { 4 } else { 12 }, "pool {pool}: {run:?}");
        if pool {
            let r = sim.judge(&opts);
            assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
            assert!(r.reason.contains("at most 4 of 12"), "{r}");
        }
    }
}

/// Agents a and b make two calls each at once; `late` makes two calls 300 ms after the program
/// began (on its own timer), or 300 ms after a and b are done (agents run one after another).
fn late_agent(addr: SocketAddr, after_the_others: bool) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        for agent in ["a", "b"] {
            let tx = tx.clone();
            s.spawn(move || {
                call(addr, Some(agent), 1);
                call(addr, Some(agent), 2);
                let _ = tx.send(());
            });
        }
        s.spawn(move || {
            if after_the_others {
                rx.iter().take(2).for_each(drop);
            }
            std::thread::sleep(Duration::from_millis(300));
            call(addr, Some("late"), 1);
            call(addr, Some("late"), 2);
        });
    });
}

#[test]
fn a_probe_run_holds_every_answer_until_an_agent_that_started_late_comes_and_tells_its_start_up_from_waiting() {
    for (after_the_others, verdict) in [(false, Verdict::Parallel), (true, Verdict::Serialized)] {
        let sim = sim();
        let (opts, probe) = run_and_probe(&sim, || late_agent(sim.addrs()[0], after_the_others));
        let r = sim.judge(&opts);
        assert_eq!(r.verdict, verdict, "{r}");
        let g = r.gaps.as_ref().expect("gaps read");
        assert_eq!(g.status, GapsStatus::Probed, "{r}");
        assert_eq!(g.reason.contains("late waiting for no answer (late's"), !after_the_others, "{}", g.reason);
        // The probe held a's and b's first answers until late came (about 300 ms less their
        // ~45 ms calls), or until late's time in the first run was up (a quarter more, plus
        // the tolerance: about 0.5 s); never longer than the first run's 0.4 s or so a quarter
        // more and a loaded machine's 0.3 s.
        let t = sim.trace();
        let first_held: Vec<u64> = t
            .requests
            .iter()
            .filter(|q| q.id >= probe && q.agent_label.as_deref() != Some("late"))
            .take(2)
            .map(|q| q.held_us)
            .collect();
        assert!(first_held.iter().all(|&h| (200_000..1_100_000).contains(&h)), "{first_held:?}");
    }
}
