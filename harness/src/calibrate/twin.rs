//! The twin written from a calibration: a simulator configuration with a comment above each
//! value saying what measured it, its figures kept in a `[calibration]` table, and the drift
//! check (`--check`) that compares a new calibration with it.
//!
//! Over 600 lines with its tests (about 200 of them, on one calibration they all edit): the
//! writer and the drift check read the same figures, and the tests check one against the other.

use super::devices::{DeviceGroup, alone_words, apart_in_speed, device_groups, device_prompt_speed, device_speed};
use super::figures::{Calibration, Figure, LoadBurst, ModelMeta, OtherModel, num, round3};
use super::fits::{
    PromptFit, TOKENIZER_TOLERANCE, TokenizerFit, fit_attention_batch_penalty, fit_batch_penalty,
    fit_batch_penalty_unbounded,
};
use serde::Serialize;
use sim_ollama::advanced::config::{ConfigFile, DeviceSpec, InstanceSpec, Jitter, ModelSpec, Profile};
use sim_ollama::advanced::dist::{DistKind, DistSpec};
use sim_ollama::advanced::trace::DeviceSharing;

/// The twin: the configuration the simulator runs the measured deployment with, and a comment
/// per value saying what measured it. `None` when too little was measured to write one (the
/// solo decode speed is the least a twin needs).
pub fn twin(cal: &Calibration) -> Option<(ConfigFile, Vec<(&'static str, String)>)> {
    let decode = cal.decode_tokens_per_s?;
    let meta = cal.meta.clone().unwrap_or_default();
    let mut why: Vec<(&'static str, String)> = Vec::new();
    let overhead = cal.call_overhead_ms.map_or(0.0, |f| f.median);
    // The speed at an empty context and how it falls with context, when the gaps rose along
    // the calls; else the calls' mean speed, constant.
    let (rate, slowdown) = match cal.decode_line {
        Some((a, b)) if b > 0.0 => (1000.0 / a, 1000.0 * b / a),
        _ => (decode.median, 0.0),
    };
    let gap_ms = 1000.0 / rate;
    let (first_token, prompt_rate, first_cv) = match &cal.prompt {
        Some(p) => {
            let ft = (p.intercept_ms - overhead - gap_ms).max(0.0);
            (ft, p.profile_tokens_per_s(), first_token_cv(p, ft))
        }
        None => (0.0, 1e6, 0.0),
    };
    let prompt_slowdown = cal.prompt.as_ref().map_or(0.0, |p| p.slowdown_per_1k);
    why.push(("decode_tokens_per_s", match cal.decode_line {
        Some((a, b)) if b > 0.0 => format!("the speed at an empty context of the line through the solo calls' mean gaps (over eighths of each call) against the context before them ({} ms + {} ms per 1,000 tokens of context); those calls averaged {}", num(a), num(1000.0 * b), decode.words("tokens/s")),
        _ => format!("solo calls, tokens after the first over the time they took (their gaps did not grow with context): {}", decode.words("tokens/s")),
    }));
    if slowdown > 0.0 {
        why.push((
            "decode_slowdown_per_1k",
            "how much longer a token takes per 1,000 tokens of context, from the same line".into(),
        ));
    }
    why.push((
        "inter_token",
        format!(
            "spread of the gaps between streamed tokens of those calls (cv {})",
            num(cal.inter_token_cv.unwrap_or(0.0))
        ),
    ));
    why.push((
        "call_overhead_ms",
        match cal.call_overhead_ms {
            Some(f) => {
                format!("load_duration of warm calls (the scheduler's check of a loaded runner): {}", f.words("ms"))
            }
            None => "not measured: the server reported no load_duration".into(),
        },
    ));
    if let Some(words) = cal.tokenizer.as_ref().map(tokenizer_words) {
        why.push(("template_tokens", words));
    }
    match &cal.prompt {
        Some(p) => {
            why.push(("prompt_tokens_per_s", format!("the slope of time to first token against prompt length ({} one-token calls, in the twin's token counts of the same texts){}", p.points.len(), if p.tokens_per_s.is_finite() { String::new() } else { "; the longest prompt was no slower than the shortest: too fast to measure".into() })));
            if p.slowdown_per_1k > 0.0 {
                why.push(("prompt_slowdown_per_1k", format!("the times bend upward with prompt length beyond the machine's noise (a length's fastest call lies more than 5 % and 5 ms below the chord of the shortest's and the longest's): each prompt token slower the more come before it, fitted as a curve to every call; the slope above is its speed at an empty context")));
            }
            let line = if p.slowdown_per_1k > 0.0 { "curve" } else { "line" };
            why.push(("first_token_ms", format!("the {line}'s intercept {} ms less the call overhead and one token's gap; spread: the points lie within {} ms of the {line}", num(p.intercept_ms), num(p.residual_ms))));
        }
        None => why.push(("first_token_ms", "not measured".into())),
    }
    let load = Figure::of(
        &[cal.load_ms.map(|f| f.median), cal.reload_ms.map(|f| f.median)].into_iter().flatten().collect::<Vec<_>>(),
    );
    why.push((
        "load_ms",
        match (cal.load_ms, cal.reload_ms) {
            (Some(l), Some(r)) => format!(
                "added time to first token after an unload ({}) and after a change of num_ctx ({}): their median",
                l.words("ms"),
                r.words("ms")
            ),
            _ => "not measured: a guess of 1 s".into(),
        },
    ));
    let (output_tokens, output_words) = answer_lengths(cal);
    why.push(("output_tokens", output_words));
    let profile = Profile {
        load_ms: DistSpec {
            dist: DistKind::Normal,
            mean: round3(load.map_or(1000.0, |f| f.median).max(0.0)),
            cv: round3(load.map_or(0.0, |f| ((f.max - f.min) / 4.0 / f.median.max(1e-9)).min(1.0))),
            min: Some(0.0),
            max: None,
        },
        cold_load_ms: None,
        call_overhead_ms: DistSpec::constant(round3(overhead)),
        prompt_tokens_per_s: round3(prompt_rate),
        prompt_slowdown_per_1k: round3(prompt_slowdown),
        first_token_ms: DistSpec {
            dist: DistKind::Normal,
            mean: round3(first_token),
            cv: round3(first_cv),
            min: Some(0.0),
            max: None,
        },
        decode_tokens_per_s: round3(rate),
        decode_slowdown_per_1k: round3(slowdown),
        inter_token: Jitter { dist: DistKind::Gamma, cv: round3(cal.inter_token_cv.unwrap_or(0.0).min(2.0)) },
        output_tokens,
        thinking_tokens: None,
        template_tokens: cal.tokenizer.as_ref().map_or(0, |f| f.template_tokens),
        letters_per_token: cal
            .tokenizer
            .as_ref()
            .map_or(sim_ollama::advanced::LETTERS_PER_TOKEN, |f| f.letters_per_token),
        replay: None,
        replay_file: None,
    };
    let model = model_spec(&meta, &cal.model, profile);

    // Devices: the groups of servers that slowed each other, each server alone on its own.
    let n = cal.endpoints.len().max(1);
    // The batch rounds' attention as the twin's profile gives it: its slowdown at their mean
    // context.
    let attention = slowdown * cal.batch_context.unwrap_or(0.0) / 1000.0;
    let penalty = fit_batch_penalty(&cal.batch.iter().map(|(k, f)| (*k, f.median)).collect::<Vec<_>>(), attention);
    let (groups, _) = device_groups(cal);
    let shares: Vec<(f64, Option<f64>)> = groups.iter().map(|g| g.efficiencies(cal, slowdown, |f| f.median)).collect();
    let shared_count = groups.iter().filter(|g| g.servers.len() > 1).count();
    let mut shared_seen = 0;
    let speeds: Vec<Option<(f64, String)>> = groups.iter().map(|g| device_speed(cal, g)).collect();
    let prompt_speeds: Vec<Option<(f64, String)>> = groups
        .iter()
        .zip(&speeds)
        .map(|(g, x)| device_prompt_speed(cal, g, x.as_ref().map_or(1.0, |(x, _)| *x)))
        .collect();
    let devices: Vec<DeviceSpec> = groups
        .iter()
        .enumerate()
        .map(|(k, g)| {
            let name = if g.servers.len() == 1 {
                format!("device{}", g.servers[0])
            } else {
                shared_seen += 1;
                if shared_count == 1 { "shared".to_string() } else { format!("shared{shared_seen}") }
            };
            DeviceSpec {
                batch_penalty: round3(penalty.unwrap_or(0.0)),
                cross_process_efficiency: round3(shares[k].0),
                cross_process_attention_efficiency: shares[k].1.map(round3),
                cpu: meta.cpu,
                speed: speeds[k].as_ref().map_or(1.0, |(x, _)| *x),
                prompt_speed: prompt_speeds[k].as_ref().map(|(x, _)| *x),
                ..DeviceSpec::new(name)
            }
        })
        .collect();
    why.push(("batch_penalty", match penalty {
        Some(p) if attention > 0.0 => format!("each stream's speed beside k-1 others on one server, relative to alone: {}; with the calls' attention x = {} (the slowdown at their mean context of {} tokens, which does not batch), (1 + x) / (1 + p (k - 1) + k x) fits them with p = {}", cal.batch.iter().map(|(k, f)| format!("k={k}: {}", f.words(""))).collect::<Vec<_>>().join("; "), num(attention), num(cal.batch_context.unwrap_or(0.0)), num(p)),
        Some(p) => format!("each stream's speed beside k-1 others on one server, relative to alone: {}; 1 / (1 + p (k - 1)) fits them with p = {}", cal.batch.iter().map(|(k, f)| format!("k={k}: {}", f.words(""))).collect::<Vec<_>>().join("; "), num(p)),
        None => "not measured: the server decoded one call at a time".into(),
    }));
    // One comment per device, in order; one per device whose attention shares otherwise.
    for (g, &(e, e_attention)) in groups.iter().zip(&shares) {
        let servers = g.servers.iter().map(|&i| cal.endpoint(i)).collect::<Vec<_>>().join(", ");
        why.push(("cross_process_efficiency", match (g.together, g.servers.as_slice(), e_attention) {
            (Some(t), s, _) if g.busy == s.len() && cal.pairs.is_empty() => format!("one call on each of the {} servers at once ran at {} of its solo speed: one device shared, each server getting {} / {} of it", s.len(), t.words("x"), num(e), g.busy),
            (Some(t), _, Some(_)) => format!("{servers}: one call on each of two of them at once ran at {} of its solo speed after a short prompt, {} after a long one: one device shared, the part of each token that batches getting {} / 2 of it (the attention: below)", t.words("x"), g.after_long.map_or("?".into(), |l| l.words("x")), num(e)),
            (Some(t), _, None) => format!("{servers}: one call on each of two of them at once ran at {} of its solo speed: one device shared, each of two busy servers getting {} / 2 of it", t.words("x"), num(e)),
            (None, [i], _) if n > 1 => format!("{}: {}", cal.endpoint(*i), alone_words(cal, *i)),
            _ => "one server: nothing shares its device".into(),
        }));
        if let (Some(ea), Some([short, long])) = (e_attention, cal.pair_contexts) {
            why.push(("cross_process_attention_efficiency", format!("the attention's share (each token's work over its context, {} per 1,000 tokens of it): the two rounds' mean contexts of {} and {} tokens give (1 + x) / r = 2 / e + 2 x / e_a at both, e = {} and e_a = {}", num(slowdown), num(short), num(long), num(e), num(ea))));
        }
    }
    // One comment per device whose speed is written (a speed of 1 is not), in order.
    for (x, words) in speeds.into_iter().flatten() {
        if x != 1.0 {
            why.push(("speed", words));
        }
    }
    for (_, words) in prompt_speeds.into_iter().flatten() {
        why.push(("prompt_speed", words));
    }
    let device_of = |i: usize| groups.iter().position(|g| g.servers.contains(&i)).unwrap_or(0);
    let instances: Vec<InstanceSpec> = cal
        .slots
        .iter()
        .enumerate()
        .map(|(i, sl)| InstanceSpec {
            device: Some(devices[device_of(i).min(devices.len() - 1)].name.clone()),
            num_parallel: Some(sl.slots),
            ..InstanceSpec::default()
        })
        .collect();
    // One comment per instance, in order.
    for sl in &cal.slots {
        why.push((
            "num_parallel",
            format!(
                "{}: {} call(s) decoded at once before one finished, in most rounds{}",
                sl.endpoint,
                sl.slots,
                if sl.at_least { " (every call tried: it may have more; raise --max-streams)" } else { "" }
            ),
        ));
    }
    let mut file = ConfigFile { devices, instances, models: vec![model], ..ConfigFile::default() };
    match cal.load_burst {
        Some(b) => {
            let of = |b: LoadBurst| {
                format!("{} one-token calls sent at once while the model loaded on {}", b.sent, cal.endpoint(0))
            };
            match b.max_queue() {
                Some(q) => {
                    file.server.max_queue = Some(q);
                    why.push(("max_queue", format!("{}: {} taken, {} refused with 503 \"server busy\": the one being loaded for and {q} waiting (OLLAMA_MAX_QUEUE)", of(b), b.sent - b.refused, b.refused)));
                }
                None => why.push(("server", format!("{}: none refused, so at least {} may wait for a load; the twin keeps Ollama's OLLAMA_MAX_QUEUE, 512", of(b), b.sent - 1))),
            }
        }
        None => why.push((
            "server",
            "the requests that may wait for a load (OLLAMA_MAX_QUEUE) were not measured: the twin keeps Ollama's 512"
                .into(),
        )),
    }
    others(cal, &mut file, &mut why);
    file.calibration = toml::Table::try_from(cal).ok();
    Some((file, why))
}

/// The twin's entry for a model: its metadata as the server gave it, served with `profile`.
fn model_spec(meta: &ModelMeta, asked_as: &str, profile: Profile) -> ModelSpec {
    ModelSpec {
        name: if meta.name.is_empty() { asked_as.to_string() } else { meta.name.clone() },
        family: meta.family.clone(),
        parameter_size: meta.parameter_size.clone(),
        quantization_level: meta.quantization_level.clone(),
        size: meta.size,
        size_loaded: meta.size_loaded,
        digest: meta.digest.clone(),
        context_length: meta.context_length.max(1),
        embedding_length: meta.embedding_length.max(1),
        kv_bytes_per_token: None,
        capabilities: if meta.capabilities.is_empty() { vec!["completion".into()] } else { meta.capabilities.clone() },
        template: meta.template.clone(),
        model_info: Default::default(),
        parameters: meta.parameters.clone(),
        license: meta.license.clone(),
        profile,
    }
}

/// The other models the agents use (`--with-models`): each with its own metadata, load, and
/// the decode speed, prompt speed and first token measured for it where they are apart from
/// the model's ([`OwnFigures`]; its other figures the model's), and `max_loaded_models` where
/// loading them in turn evicted some.
fn others(cal: &Calibration, file: &mut ConfigFile, why: &mut Vec<(&'static str, String)>) {
    let Some(main) = file.models.first().cloned() else { return };
    if cal.others.is_empty() {
        return;
    }
    why.push(("models", format!("{}: the model calibrated", main.name)));
    for o in &cal.others {
        // Its own metadata where the server gave it (older calibrations kept none).
        let mut m = match &o.meta {
            Some(meta) => {
                model_spec(&ModelMeta { name: o.loaded_as.clone(), ..meta.clone() }, &o.name, main.profile.clone())
            }
            None => ModelSpec { name: o.loaded_as.clone(), digest: None, ..main.clone() },
        };
        m.profile.load_ms = DistSpec::constant(round3(o.load_ms));
        let own = OwnFigures::of(cal, o, &main.profile);
        let mut own_words =
            vec![format!("its load, {} ms: its first call's time to first token over its warm calls'", num(o.load_ms))];
        let mut kept = Vec::new();
        fn words<T>(f: &Option<(T, String)>) -> Option<String> {
            f.as_ref().map(|(_, w)| w.clone())
        }
        for (what, fig) in [
            ("decode speed", words(&own.speed)),
            ("fall with context", words(&own.line)),
            ("prompt speed", words(&own.prompt)),
            ("time to first token", words(&own.first_token)),
        ] {
            match fig {
                Some(words) => own_words.push(format!("its {what}, {words}")),
                None => kept.push(what),
            }
        }
        if let Some(((rate, slowdown), _)) = own.line {
            m.profile.decode_tokens_per_s = rate;
            m.profile.decode_slowdown_per_1k = slowdown;
        } else if let Some((x, _)) = own.speed {
            m.profile.decode_tokens_per_s = round3(main.profile.decode_tokens_per_s * x);
        }
        if let Some(((rate, bend), _)) = own.prompt {
            m.profile.prompt_tokens_per_s = round3(rate);
            m.profile.prompt_slowdown_per_1k = round3(bend);
        }
        if let Some(f) = &o.tokenizer {
            m.profile.letters_per_token = f.letters_per_token;
            m.profile.template_tokens = f.template_tokens;
            own_words.push(format!("its tokenizer: {}", tokenizer_words(f)));
        }
        if let Some((ft, _)) = own.first_token {
            // Its spread too: its own calls' around its own line, not the model's.
            m.profile.first_token_ms.mean = round3(ft);
            m.profile.first_token_ms.cv = round3(o.prompt.as_ref().map_or(0.0, |p| first_token_cv(p, ft)));
        }
        let kept = if kept.is_empty() {
            String::new()
        } else {
            format!("; {}'s {} (within the machine's noise of it, or not measured)", main.name, kept.join(", "))
        };
        why.push((
            "models",
            format!(
                "{}: another model the agents use (--with-models), on {}: {}{kept}; its other figures {}'s (its slowdown beside other streams not measured)",
                o.loaded_as,
                cal.endpoint(0),
                own_words.join("; "),
                main.name
            ),
        ));
        file.models.push(m);
    }
    let all = cal.others.len() + 1;
    let names = std::iter::once(main.name.as_str()).chain(cal.others.iter().map(|o| o.loaded_as.as_str()));
    let loaded = format!("{} loaded in turn on {}", names.collect::<Vec<_>>().join(", "), cal.endpoint(0));
    match cal.loaded_together {
        Some(k) if k < all => {
            file.server.max_loaded_models = Some(k.max(1));
            why.push(("max_loaded_models", format!("{loaded}: {k} still loaded after (/api/ps), so loading one evicted another (OLLAMA_MAX_LOADED_MODELS, or the memory they need): the twin holds {} at once", k.max(1))));
        }
        Some(_) => say(
            why,
            "server",
            format!("{loaded}: all still loaded after (/api/ps); the twin keeps Ollama's OLLAMA_MAX_LOADED_MODELS, 3"),
        ),
        None => {}
    }
}

/// Another model's own figures where they are apart from the model's beyond the machine's
/// noise, each with the words saying what measured it (`None`: the model's figure serves it).
struct OwnFigures {
    /// Its decode speed as a multiple of the model's: where every one of its solo calls ran
    /// more than 15 % from the model's median on the first server (the devices' rule,
    /// [`apart_in_speed`]).
    speed: Option<(f64, String)>,
    /// Its decode speed at an empty context and slowdown per 1,000 tokens of context, from the
    /// line through its own solo calls' gaps: where its calls after the long prompt all ran
    /// more than 15 % from what the model's slowdown with context gives them at its speed.
    line: Option<((f64, f64), String)>,
    /// Its prompt tokens per second and slowdown per 1,000 tokens of context: where its long
    /// prompt's time over its short one's differs from the model's by more than 5 ms and 15 %.
    prompt: Option<((f64, f64), String)>,
    /// Its `first_token_ms`, its line's intercept less the call overhead and one of its own
    /// gaps (as the model's): where one of the two above is its own, or its short prompt's
    /// time to first token differs from the model's by more than 5 ms and 15 % (a busy
    /// machine's scheduling delays of a one-token call).
    first_token: Option<(f64, String)>,
}

impl OwnFigures {
    fn of(cal: &Calibration, o: &OtherModel, main: &Profile) -> OwnFigures {
        let apart = |a: f64, b: f64| (a - b).abs() > 5.0 && (a - b).abs() > 0.15 * b.abs();
        // Its speed over the model's at an empty context: its solo calls' speed at their
        // context (that of the model's solo calls) over what the model's profile gives there,
        // so that its twin decodes those calls as measured (the model's own line may sit off
        // its calls' mean speed), with the model's slowdown with context.
        let at_calls =
            main.decode_tokens_per_s / (1.0 + main.decode_slowdown_per_1k * cal.batch_context.unwrap_or(0.0) / 1000.0);
        let speed = match (cal.decode_per_server.first(), o.decode_tokens_per_s) {
            (Some(m), Some(own)) if apart_in_speed(m.median, &own) => Some((
                round3(own.median / at_calls),
                format!(
                    "{} x of the model's: its solo calls {}, the model's {}",
                    num(own.median / m.median),
                    own.words("tokens/s"),
                    m.words("tokens/s")
                ),
            )),
            _ => None,
        };
        // Its fall with context: what the twin would serve its calls after the long prompt
        // at with its speed and the model's slowdown, against what they ran at.
        let x = speed.as_ref().map_or(1.0, |(x, _)| *x);
        let line = match (o.decode_line, o.long_decode_tokens_per_s, o.long_context) {
            (Some((a, b)), Some(long), Some(context)) => {
                let served = main.decode_tokens_per_s * x / (1.0 + main.decode_slowdown_per_1k * context / 1000.0);
                apart_in_speed(served, &long).then(|| {
                    let (rate, slowdown) = (round3(1000.0 / a), round3(1000.0 * b / a));
                    (
                        (rate, slowdown),
                        format!(
                            "{} tokens/s at an empty context, slower by {} per 1,000 tokens of context (the line through its solo calls' gaps, after the short and the long prompt): its calls after the long prompt ran at {}, where the model's fall with context gives {} tokens/s",
                            num(rate),
                            num(slowdown),
                            long.words("tokens/s"),
                            num(served)
                        ),
                    )
                })
            }
            _ => None,
        };
        // What a prompt of `t` tokens costs on the model's profile, ms.
        let model_ms = |t: f64| main.prompt_ms(0.0, t);
        let prompt = o.prompt.as_ref().and_then(|p| {
            // The shortest and longest prompts both were measured at.
            let (lo, hi) = (
                p.points.iter().map(|x| x.0).fold(f64::NAN, f64::min),
                p.points.iter().map(|x| x.0).fold(f64::NAN, f64::max),
            );
            let (own, model) = (p.at(hi) - p.at(lo), model_ms(hi) - model_ms(lo));
            apart(own, model).then(|| {
                let bend = if p.slowdown_per_1k > 0.0 {
                    format!(" at an empty context, each token slower by {} per 1,000 before it (its times bend upward beyond their noise)", num(p.slowdown_per_1k))
                } else {
                    String::new()
                };
                (
                    (p.profile_tokens_per_s(), p.slowdown_per_1k),
                    format!(
                        "{} tokens/s{bend}: {} ms more for a prompt {} tokens longer, the model's {} ms ({} one-token calls)",
                        num(p.tokens_per_s),
                        num(own),
                        num(hi - lo),
                        num(model),
                        p.points.len()
                    ),
                )
            })
        });
        let gap_ms = 1000.0 / (main.decode_tokens_per_s * speed.as_ref().map_or(1.0, |(x, _)| *x)).max(1e-9);
        let overhead = main.call_overhead_ms.mean;
        let first_token = match (&o.prompt, o.warm_ttft_ms, cal.warm_ttft_ms) {
            (Some(p), Some(own), Some(m)) if speed.is_some() || prompt.is_some() || apart(own.median, m.median) => {
                // Its intercept with the slope the twin gives it: its own where its prompt
                // speed is, else the model's through its points.
                let intercept = if prompt.is_some() {
                    p.intercept_ms
                } else {
                    p.points.iter().map(|(t, ms)| ms - model_ms(*t)).sum::<f64>() / p.points.len().max(1) as f64
                };
                let below = overhead + gap_ms - intercept;
                let ft = (-below).max(0.0);
                let linear = if below > 5.0 {
                    format!(
                        "; the line falls below zero at an empty prompt (its first token grows faster than in proportion to its prompt), so the twin's first token of a short prompt comes up to {} ms later than measured",
                        num(below)
                    )
                } else {
                    String::new()
                };
                Some((
                    round3(ft),
                    format!(
                        "{} ms: its line's intercept {} ms less the call overhead and one of its gaps (its short prompt's one-token calls {}, the model's {}){linear}",
                        num(ft),
                        num(intercept),
                        own.words("ms"),
                        m.words("ms")
                    ),
                ))
            }
            _ => None,
        };
        OwnFigures { speed, line, prompt, first_token }
    }
}

/// The spread of a first token of `ft` ms whose one-token calls lie within `p.residual_ms` of
/// their line: the coefficient of variation, at most 1 (0 for no first token).
fn first_token_cv(p: &PromptFit, ft: f64) -> f64 {
    if ft > 0.0 { (p.residual_ms / ft).min(1.0) } else { 0.0 }
}

/// Adds `text` to the comment on `key`, or makes it that comment.
fn say(why: &mut Vec<(&'static str, String)>, key: &'static str, text: String) {
    match why.iter_mut().find(|(k, _)| *k == key) {
        Some((_, w)) => *w = format!("{w}. {text}"),
        None => why.push((key, text)),
    }
}

/// The twin as TOML, with a header and a comment above each value saying what measured it.
pub fn to_toml(cal: &Calibration, file: &ConfigFile, why: &[(&str, String)]) -> Result<String, String> {
    let body = toml::to_string(file).map_err(|e| format!("cannot write the twin: {e}"))?;
    let mut out = format!(
        "# A twin of {} serving {}, measured by `harness calibrate` on {} in {:.0} s.\n\
         #   sim-ollama --config THIS_FILE            the servers, simulated\n\
         #   harness matrix --config THIS_FILE --model {}   scenarios on them, as --endpoints runs them live\n\
         #   harness calibrate --check THIS_FILE      has the server drifted from its twin?\n",
        cal.endpoints.join(", "),
        cal.model,
        cal.started,
        cal.elapsed_s,
        cal.model
    );
    for n in &cal.notes {
        out.push_str(&format!("# Note: {n}\n"));
    }
    out.push('\n');
    let mut said = std::collections::HashSet::new();
    let mut nth: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for line in body.lines() {
        let t = line.trim_start();
        let key = if t.starts_with('[') {
            t.trim_matches(|c| c == '[' || c == ']').rsplit('.').next().unwrap_or("")
        } else {
            t.split(" =").next().unwrap_or("")
        };
        if t.starts_with("[calibration") && said.insert(("calibration", usize::MAX)) {
            out.push_str(
                "# What measured this twin (read by `harness calibrate --check`; the simulator ignores it).\n",
            );
        }
        // A key that comes back (each instance's `num_parallel`) gets its next comment.
        let seen = *nth.entry(key.to_string()).and_modify(|n| *n += 1).or_insert(0);
        let mut mine = why.iter().filter(|(k, _)| *k == key);
        let first = mine.clone().next();
        if let Some((k, w)) = mine.nth(seen).or(if seen == 0 { first } else { None }) {
            if said.insert((*k, seen)) {
                for chunk in wrap(w, 96) {
                    out.push_str(&format!("# {chunk}\n"));
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    // What is written must load as a simulator configuration.
    ConfigFile::from_toml(&out).map_err(|e| format!("the twin written does not load: {e}"))?;
    Ok(out)
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in text.split(' ') {
        let last = lines.last_mut().expect("never empty");
        if !last.is_empty() && last.len() + w.len() + 1 > width {
            lines.push(w.to_string());
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(w);
        }
    }
    lines
}

/// One figure compared by `--check`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// The figure.
    pub figure: String,
    /// The twin's value.
    pub twin: f64,
    /// Measured now.
    pub now: f64,
    /// Outside what the twin's and today's spreads allow.
    pub moved: bool,
}

/// `first`'s drifts with a figure moved only where it moved again in `again` (a calibration
/// measured after it, compared with the same twin): a slow stretch of a busy machine that falls
/// on both rounds of one measurement reads as a move (the speed beside another stream 0.64 ->
/// 0.42 once in about 35 recalibrations of a known simulator's twin, the machine slow for that
/// moment), where a server that drifted reads moved again. `--check` measures again only when
/// something moved.
pub fn confirm(first: &[Drift], again: &[Drift]) -> Vec<Drift> {
    first
        .iter()
        .map(|d| Drift { moved: d.moved && again.iter().any(|a| a.figure == d.figure && a.moved), ..d.clone() })
        .collect()
}

/// Compares a new calibration with the one a twin was made from: a figure moved when today's
/// median lies further from the twin's than 15 % of it, than either measurement's range, and
/// than a floor below which a difference is a client's noise (5 ms of time to first token,
/// 20 ms of a load, 0.05 of a relative speed); slots moved when they differ.
pub fn check(twin: &Calibration, now: &Calibration) -> Vec<Drift> {
    let mut out = Vec::new();
    let mut fig = |name: &str, a: Option<Figure>, b: Option<Figure>, floor: f64| {
        if let (Some(a), Some(b)) = (a, b) {
            let allowed = allowed_move(&a, floor).max(b.max - b.min);
            out.push(Drift {
                figure: name.into(),
                twin: a.median,
                now: b.median,
                moved: (b.median - a.median).abs() > allowed,
            });
        }
    };
    fig("decode tokens/s", twin.decode_tokens_per_s, now.decode_tokens_per_s, 0.0);
    // 5 ms: a busy machine's scheduling delays of a one-token call, and far below what moves
    // a verdict on calls of a tenth of a second or more.
    fig("time to first token, ms", twin.warm_ttft_ms, now.warm_ttft_ms, 5.0);
    // The longest prompt's: a prompt speed or a bend that moved shows there most.
    let longest = |p: &Option<PromptFit>| {
        let p = p.as_ref()?;
        let x = p.points.iter().map(|q| q.0).fold(f64::NAN, f64::max);
        Figure::of(&p.points.iter().filter(|q| q.0 == x).map(|q| q.1).collect::<Vec<_>>())
    };
    fig("time to first token of the longest prompt, ms", longest(&twin.prompt), longest(&now.prompt), 5.0);
    fig("load, ms", twin.load_ms, now.load_ms, 20.0);
    for (a, b) in twin.others.iter().zip(&now.others) {
        let one = |x: f64| Figure::of(&[x]);
        fig(&format!("load of {}, ms", a.name), one(a.load_ms), one(b.load_ms), 20.0);
        fig(&format!("decode tokens/s of {}", a.name), a.decode_tokens_per_s, b.decode_tokens_per_s, 0.0);
        fig(&format!("time to first token of {}, ms", a.name), a.warm_ttft_ms, b.warm_ttft_ms, 5.0);
        let name = format!("time to first token of {}'s longest prompt, ms", a.name);
        fig(&name, longest(&a.prompt), longest(&b.prompt), 5.0);
        let name = format!("decode tokens/s of {} after the long prompt", a.name);
        fig(&name, a.long_decode_tokens_per_s, b.long_decode_tokens_per_s, 0.0);
    }
    let last = |c: &Calibration| c.batch.last().map(|(_, f)| *f);
    fig("speed beside others on one server", last(twin), last(now), SPEED_FLOOR);
    if twin.pairs.is_empty() || now.pairs.is_empty() {
        fig("speed with every server busy", twin.together, now.together, SPEED_FLOOR);
    } else {
        for p in &twin.pairs {
            let q = now.pairs.iter().find(|q| (q.a, q.b) == (p.a, p.b));
            let name = format!("speed of {} beside {}", twin.endpoint(p.a), twin.endpoint(p.b));
            fig(&name, Some(p.speed), q.map(|q| q.speed), SPEED_FLOOR);
            // And after the long prompt: the attention's share moved shows there.
            let name = format!("{name} after the long prompt");
            fig(&name, p.after_long, q.and_then(|q| q.after_long), SPEED_FLOOR);
        }
    }
    if let (Some(a), Some(b)) = (twin.load_burst, now.load_burst) {
        // The queue's size where a burst showed one; a burst of neither refused nothing.
        let size = |x: LoadBurst| x.max_queue().map_or(f64::INFINITY, |q| q as f64);
        out.push(Drift {
            figure: "requests that may wait for a load".into(),
            twin: size(a),
            now: size(b),
            moved: a.max_queue() != b.max_queue(),
        });
    }
    if let (Some(a), Some(b)) = (twin.loaded_together, now.loaded_together) {
        out.push(Drift { figure: "models still loaded together".into(), twin: a as f64, now: b as f64, moved: a != b });
    }
    // The model's tokenizer: the same text counted otherwise is another model under the name
    // (the counts of one model's tokenizer are exact; 2 % leaves the prompt's nonce).
    if let (Some(a), Some(b)) = (&twin.tokenizer, &now.tokenizer) {
        let (x, y) = (a.longest.1, b.longest.1);
        out.push(Drift {
            figure: "tokens the server counts in the longest prompt".into(),
            twin: x,
            now: y,
            moved: (y - x).abs() > 0.02 * x.max(1.0),
        });
    }
    // Whether the model ends its answers on its own at all (the twin's answer length rests on it).
    if let (Some(a), Some(b)) = (twin.answers, now.answers) {
        let share = |a: super::figures::Answers| a.stopped as f64 / a.calls.max(1) as f64;
        out.push(Drift {
            figure: "share of answers that ended before num_predict".into(),
            twin: share(a),
            now: share(b),
            moved: (share(a) == 0.0) != (share(b) == 0.0),
        });
    }
    for (a, b) in twin.slots.iter().zip(&now.slots) {
        out.push(Drift {
            figure: format!("slots of {}", a.endpoint),
            twin: a.slots as f64,
            now: b.slots as f64,
            moved: a.slots != b.slots,
        });
    }
    out
}

/// Below this, a relative speed's move is a client's noise (`--check`).
const SPEED_FLOOR: f64 = 0.05;

/// The check's relative move: 15 % of a figure's median, or `floor` if larger.
fn relative_move(a: &Figure, floor: f64) -> f64 {
    (0.15 * a.median.abs()).max(floor)
}

/// How far a figure may move before `--check` calls it moved: its [`relative_move`], or its
/// own range if larger (the new measurement's range may widen it).
fn allowed_move(a: &Figure, floor: f64) -> f64 {
    relative_move(a, floor).max(a.max - a.min)
}

/// A twin's batching and sharing at the two ends of what `--check` calls the same servers:
/// each of its devices' sharing, in the file's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tolerance {
    /// Streams beside each other and servers beside each other as slow as the check allows.
    pub slow: Vec<DeviceSharing>,
    /// As slow, the streams' slower speeds read as attention dearer per stream of a batch
    /// (`attention_batch_penalty`) beside the fitted batching part: the same speeds at the
    /// calibration's context, slower at longer ones. A run's slow end is the slower of the two.
    pub slow_attention: Vec<DeviceSharing>,
    /// As fast as it allows.
    pub fast: Vec<DeviceSharing>,
}

/// The twin's [`Tolerance`]: each figure its batching and sharing were fitted from (each
/// stream's speed beside k-1 others, each shared device's servers' speeds beside each other)
/// moved by 15 % of it (at least 0.05), the move [`check`] allows a figure whose samples
/// agree, and fitted again, the slower speeds read two ways ([`Tolerance::slow_attention`]).
/// On this machine's CPU servers the four-slot server's speed beside three others moved 10 %
/// between calibrations minutes apart, and a live speedup 1.08x in one session, 1.16x in
/// another. `None` for a configuration that is not a twin, or one of servers
/// that each ran one call at a time alone on a device (nothing to move).
pub fn tolerance(file: &ConfigFile) -> Option<Tolerance> {
    let cal = calibration_of(file).ok()?;
    let first = file.devices.first()?;
    let slowdown = file.models.first().map_or(0.0, |m| m.profile.decode_slowdown_per_1k);
    let attention = slowdown * cal.batch_context.unwrap_or(0.0) / 1000.0;
    // The check's relative move, not the samples' range: the median the twin was fitted to
    // averages over the range, which says how the streams of one round differed.
    let moved = |sign: f64| -> Vec<(usize, f64)> {
        cal.batch.iter().map(|(k, f)| (*k, (f.median + sign * relative_move(f, SPEED_FLOOR)).max(0.01))).collect()
    };
    // The fast end as fast as the moved figures: below a device's zero where they need it
    // (`fit_batch_penalty_unbounded`), so that a twin fitted at zero still has a faster end,
    // yet never so far that k streams' batching part costs under half of one's.
    let most = cal.batch.iter().map(|(k, _)| *k).max().unwrap_or(2).max(2) as f64;
    let (p_slow, p_fast) = if cal.batch.is_empty() {
        (first.batch_penalty, first.batch_penalty)
    } else {
        (
            fit_batch_penalty(&moved(-1.0), attention)?,
            fit_batch_penalty_unbounded(&moved(1.0), attention)?.max(-0.5 / (most - 1.0)),
        )
    };
    // The slower speeds read the other way: the batching part as fitted, attention dearer
    // (0 without batch figures or attention: nothing to fit).
    let q_slow = fit_attention_batch_penalty(&moved(-1.0), attention, first.batch_penalty).unwrap_or(0.0);
    // Sharing moves only on shared devices; servers on devices of their own stay so. The
    // groups are the twin's devices in order (as `twin` wrote them); a file whose devices
    // are not (edited by hand) keeps its own figures.
    let (groups, _) = device_groups(&cal);
    let end = |penalty: f64, q: f64, (e, e_attention): (f64, Option<f64>)| DeviceSharing {
        batch_penalty: penalty,
        cross_process_efficiency: e,
        cross_process_attention_efficiency: e_attention,
        attention_batch_penalty: q,
    };
    let ends: Vec<[DeviceSharing; 3]> = file
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (slow, fast) = match groups.get(i).filter(|_| groups.len() == file.devices.len()) {
                Some(g @ DeviceGroup { together: Some(_), .. }) => {
                    let moved = |sign: f64| move |f: &Figure| f.median + sign * relative_move(f, SPEED_FLOOR);
                    (g.efficiencies(&cal, slowdown, moved(-1.0)), g.efficiencies(&cal, slowdown, moved(1.0)))
                }
                _ => {
                    let kept = (d.cross_process_efficiency, d.cross_process_attention_efficiency);
                    (kept, kept)
                }
            };
            [end(p_slow, 0.0, slow), end(first.batch_penalty, q_slow, slow), end(p_fast, 0.0, fast)]
        })
        .collect();
    let sharing_moves = ends.iter().any(|[s, _, f]| s.cross_process_efficiency != f.cross_process_efficiency);
    (!cal.batch.is_empty() || sharing_moves).then(|| Tolerance {
        slow: ends.iter().map(|e| e[0]).collect(),
        slow_attention: ends.iter().map(|e| e[1]).collect(),
        fast: ends.iter().map(|e| e[2]).collect(),
    })
}

impl Tolerance {
    /// A run's share of an ideal server's saving at the slow end: the lower of the shares the
    /// two readings of the slower speeds give (`share_at` replays the run with devices so).
    pub fn slow_share(&self, share_at: impl Fn(&[DeviceSharing]) -> f64) -> f64 {
        share_at(&self.slow).min(share_at(&self.slow_attention))
    }
}

/// An answer's length where a call sets no `num_predict` (and the most a call that sets one
/// gets), from how the calibration's answers ended ([`super::figures::Answers`]), with the words that say so.
/// A model that ended none of them on its own (the real tiny model never does) runs on until
/// `num_predict` or its context stops it (ten contexts: the simulator's cap, as Ollama's): a
/// length past any cap. One that ended some gets their lengths (a normal of their median and
/// spread); those it ended at `num_predict` say its answers may run longer than the twin's.
fn answer_lengths(cal: &Calibration) -> (DistSpec, String) {
    let guess = DistSpec { dist: DistKind::Normal, mean: 300.0, cv: 0.4, min: Some(10.0), max: Some(1000.0) };
    let Some(a) = cal.answers else {
        return (guess, "not measured: every calibration call set num_predict, as the scenarios do; the answer length of a call that sets none is a guess".into());
    };
    match a.lengths {
        None => (
            DistSpec::constant(NEVER_ENDS),
            format!(
                "none of {} calibration answers of {} tokens (num_predict) ended on its own: the model goes on until num_predict or its context stops it (the simulator's cap, ten contexts, as Ollama's)",
                a.calls, cal.tokens
            ),
        ),
        Some(f) => {
            let cut = if a.stopped < a.calls {
                format!(
                    "; {} of them ran to num_predict: the model's answers to prompts like those may run longer than the twin's",
                    a.calls - a.stopped
                )
            } else {
                String::new()
            };
            (
                DistSpec {
                    dist: DistKind::Normal,
                    mean: round3(f.median),
                    cv: round3(((f.max - f.min) / 4.0 / f.median.max(1.0)).min(1.0)),
                    min: Some(1.0),
                    max: None,
                },
                format!(
                    "{} of {} calibration answers (num_predict {}) ended on their own: {}{cut}",
                    a.stopped,
                    a.calls,
                    cal.tokens,
                    f.words("tokens")
                ),
            )
        }
    }
}

/// An answer length no cap lets a model reach: a model that never ends its answers.
const NEVER_ENDS: f64 = 1e9;

/// What fitted a model's tokenizer, for the twin's comment on `template_tokens` (and on
/// `letters_per_token`, written beside it where it is not the default).
fn tokenizer_words(f: &TokenizerFit) -> String {
    let (chars, server, default) = f.longest;
    let letters = if f.letters_per_token == sim_ollama::advanced::LETTERS_PER_TOKEN {
        format!("the simulator's default tokenizer counts them within {:.0} %", 100.0 * TOKENIZER_TOLERANCE)
    } else {
        format!(
            "the simulator's default tokenizer counts it as {} (six letters a token), so the twin's holds {} letters a token (letters_per_token), the count nearest the server's",
            num(default),
            num(f.letters_per_token)
        )
    };
    format!(
        "the server counted the calibration's prompts of {chars} characters as {} tokens (prompt_eval_count); {letters}; each prompt {} tokens more than its text (the template's)",
        num(server),
        f.template_tokens
    )
}

/// The calibration a twin file was made from (its `[calibration]` table).
pub fn calibration_of(file: &ConfigFile) -> Result<Calibration, String> {
    let t = file
        .calibration
        .clone()
        .ok_or("not a twin: it has no [calibration] table (write one with harness calibrate)")?;
    t.try_into().map_err(|e| format!("its [calibration] table does not read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::figures::*;

    fn measured() -> Calibration {
        let f = |m: f64| Some(Figure { median: m, min: m * 0.95, max: m * 1.05, samples: 3 });
        Calibration {
            endpoints: vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
            model: "tiny".into(),
            started: "2026-11-25T21:00:00Z".into(),
            elapsed_s: 30.0,
            tokens: 300,
            max_streams: 6,
            reps: 3,
            meta: Some(ModelMeta {
                name: "tiny:latest".into(),
                family: "llama".into(),
                context_length: 4096,
                embedding_length: 64,
                capabilities: vec!["completion".into()],
                template: "{{ .Prompt }} \"q\"".into(),
                ..ModelMeta::default()
            }),
            decode_tokens_per_s: f(1000.0),
            decode_per_server: vec![f(1000.0).unwrap(), f(1000.0).unwrap()],
            inter_token_cv: Some(0.3),
            decode_line: None,
            call_overhead_ms: f(2.0),
            warm_ttft_ms: f(10.0),
            prompt: Some(PromptFit {
                intercept_ms: 10.0,
                tokens_per_s: 5000.0,
                residual_ms: 1.0,
                slowdown_per_1k: 0.0,
                points: vec![(10.0, 12.0)],
            }),
            tokenizer: None,
            answers: None,
            slots: vec![
                Slots { endpoint: "http://127.0.0.1:1".into(), slots: 3, at_least: false },
                Slots { endpoint: "http://127.0.0.1:2".into(), slots: 3, at_least: false },
            ],
            batch: vec![(2, f(0.8).unwrap()), (3, f(2.0 / 3.0).unwrap())],
            batch_context: None,
            together: f(0.6),
            pairs: vec![Pair { a: 0, b: 1, speed: f(0.6).unwrap(), after_long: None }],
            long_decode_tokens_per_s: None,
            pair_contexts: None,
            all_busy: None,
            load_ms: f(250.0),
            reload_ms: f(260.0),
            load_burst: Some(LoadBurst { sent: 12, refused: 0 }),
            long_ttft_per_server: vec![],
            others: vec![],
            loaded_together: None,
            notes: vec![],
        }
    }

    #[test]
    fn other_models_are_served_with_their_load_and_evictions_hold_the_models_loaded_at_once() {
        // A second model loaded after the model, both still loaded: served, Ollama's limit kept.
        let mut cal = measured();
        cal.others = vec![OtherModel {
            name: "helper".into(),
            loaded_as: "helper:latest".into(),
            load_ms: 420.0,
            meta: Some(ModelMeta {
                name: "helper:latest".into(),
                parameter_size: "34M".into(),
                embedding_length: 512,
                ..ModelMeta::default()
            }),
            warm_ttft_ms: Figure::of(&[66.0]),
            // 0.4 ms a prompt token (the model's 0.2), 60 ms at an empty prompt.
            prompt: Some(PromptFit {
                intercept_ms: 60.0,
                tokens_per_s: 2500.0,
                residual_ms: 0.0,
                slowdown_per_1k: 0.0,
                points: vec![(15.0, 66.0), (375.0, 210.0)],
            }),
            tokenizer: None,
            decode_tokens_per_s: Figure::of(&[40.0, 42.0]),
            decode_line: None,
            long_decode_tokens_per_s: None,
            long_context: None,
        }];
        cal.loaded_together = Some(2);
        let (file, why) = twin(&cal).expect("a twin");
        let text = to_toml(&cal, &file, &why).expect("written");
        let back = ConfigFile::from_toml(&text).expect("loads");
        assert_eq!(back.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["tiny:latest", "helper:latest"]);
        assert_eq!(back.models[1].profile.load_ms.mean, 420.0);
        // Its own metadata, not the model's.
        assert_eq!((back.models[1].parameter_size.as_str(), back.models[1].embedding_length), ("34M", 512), "{text}");
        // Its own speed (41 of the model's 1,000 tokens/s), prompt speed, and first token: its
        // intercept less the overhead (2 ms) and one of its own gaps (1000 / 41 ms).
        let (main, helper) = (&back.models[0].profile, &back.models[1].profile);
        assert!((helper.decode_tokens_per_s / main.decode_tokens_per_s - 0.041).abs() < 1e-3, "{text}");
        assert_eq!(helper.prompt_tokens_per_s, 2500.0, "{text}");
        assert!((helper.first_token_ms.mean - (60.0 - 2.0 - 1000.0 / 41.0)).abs() < 1e-2, "{text}");
        assert!(text.contains("its decode speed, 0.041"), "{text}");
        // Within the machine's noise of the model's: the model's figures, said so.
        let mut close = cal.clone();
        close.others[0].decode_tokens_per_s = Figure::of(&[900.0, 1100.0]);
        close.others[0].warm_ttft_ms = Figure::of(&[12.0, 13.0]);
        close.others[0].prompt = Some(PromptFit {
            intercept_ms: 9.0,
            tokens_per_s: 5000.0,
            residual_ms: 0.0,
            slowdown_per_1k: 0.0,
            points: vec![(15.0, 12.0), (375.0, 84.0)],
        });
        let (file, why) = twin(&close).expect("a twin");
        let text = to_toml(&close, &file, &why).expect("written");
        let back = ConfigFile::from_toml(&text).expect("loads");
        assert_eq!(back.models[1].profile.decode_tokens_per_s, back.models[0].profile.decode_tokens_per_s);
        assert_eq!(back.models[1].profile.first_token_ms.mean, back.models[0].profile.first_token_ms.mean);
        assert_eq!(back.models[1].profile.prompt_tokens_per_s, back.models[0].profile.prompt_tokens_per_s);
        assert!(text.contains("(within the machine's noise of it"), "{text}");
        assert_eq!(back.server.max_loaded_models, None, "{text}");
        assert!(text.contains("all still loaded after"), "{text}");
        assert!(text.contains("another model the agents use"), "{text}");
        // Only the last one still loaded: one at a time, and `--check` sees a change.
        let mut evicting = cal.clone();
        evicting.loaded_together = Some(1);
        let (file, why) = twin(&evicting).expect("a twin");
        let text = to_toml(&evicting, &file, &why).expect("written");
        assert_eq!(ConfigFile::from_toml(&text).unwrap().server.max_loaded_models, Some(1), "{text}");
        let drifts = check(&cal, &evicting);
        assert!(drifts.iter().any(|d| d.figure == "models still loaded together" && d.moved), "{drifts:?}");
        assert!(drifts.iter().any(|d| d.figure == "load of helper, ms" && !d.moved), "{drifts:?}");
    }

    #[test]
    fn another_model_whose_speed_falls_faster_with_context_gets_its_own_line() {
        // A helper at 41 tokens/s at an empty context (24.4 ms a token), 0.1 ms more per token
        // of context; the model's speed does not fall with context (its slowdown 0).
        let helper = |long: &[f64]| OtherModel {
            name: "helper".into(),
            loaded_as: "helper:latest".into(),
            load_ms: 420.0,
            meta: None,
            warm_ttft_ms: Figure::of(&[66.0]),
            prompt: None,
            tokenizer: None,
            decode_tokens_per_s: Figure::of(&[40.0, 42.0]),
            decode_line: Some((24.4, 0.1)),
            long_decode_tokens_per_s: Figure::of(long),
            long_context: Some(500.0),
        };
        let mut cal = measured();
        // After the long prompt (500 tokens of context) its calls ran at 13-14 tokens/s, where
        // its speed with the model's slowdown gives 41.
        cal.others = vec![helper(&[13.0, 14.0])];
        let (file, why) = twin(&cal).expect("a twin");
        let text = to_toml(&cal, &file, &why).expect("written");
        let back = ConfigFile::from_toml(&text).expect("loads");
        let h = &back.models[1].profile;
        assert_eq!((h.decode_tokens_per_s, h.decode_slowdown_per_1k), (41.0, 4.1), "{text}");
        assert!(text.replace("\n# ", " ").contains("slower by 4.10 per 1,000 tokens of context"), "{text}");
        // `--check` sees its fall with context move (13-14 tokens/s after the long prompt, now
        // 39-42), and its prompt's longest length held.
        let falling = cal.clone();
        // Its long calls as the model's slowdown gives them: the model's slowdown, its speed.
        cal.others = vec![helper(&[39.0, 42.0])];
        let drifts = check(&falling, &cal);
        assert!(
            drifts.iter().any(|d| d.figure == "decode tokens/s of helper after the long prompt" && d.moved),
            "{drifts:?}"
        );
        let (file, why) = twin(&cal).expect("a twin");
        let text = to_toml(&cal, &file, &why).expect("written");
        let h = &ConfigFile::from_toml(&text).expect("loads").models[1].profile;
        assert_eq!(h.decode_slowdown_per_1k, 0.0, "{text}");
        assert!((h.decode_tokens_per_s - 41.0).abs() < 0.5, "{text}");
        assert!(text.replace("\n# ", " ").contains("fall with context"), "kept, said so: {text}");
    }

    #[test]
    fn a_prompt_time_that_bends_upward_gives_the_twin_a_prompt_slowdown_the_model_and_each_other_model_its_own() {
        let mut cal = measured();
        // 2 ms a prompt token at an empty context, 4 per 1,000 slower per token before it.
        let bent = PromptFit {
            intercept_ms: 150.0,
            tokens_per_s: 500.0,
            residual_ms: 3.0,
            slowdown_per_1k: 4.0,
            points: vec![(15.0, 181.0), (375.0, 1461.0)],
        };
        cal.prompt = Some(bent.clone());
        let (file, why) = twin(&cal).expect("a twin");
        let text = to_toml(&cal, &file, &why).expect("written");
        let back = ConfigFile::from_toml(&text).expect("loads");
        let p = &back.models[0].profile;
        assert_eq!((p.prompt_tokens_per_s, p.prompt_slowdown_per_1k), (500.0, 4.0), "{text}");
        assert!(text.replace("\n# ", " ").contains("bend upward with prompt length"), "{text}");
        // The twin's prompt of 375 tokens takes what the curve gives it, less the intercept.
        assert!((p.prompt_ms(0.0, 375.0) - (bent.at(375.0) - 150.0)).abs() < 1e-6);
        // Another model whose prompt bends (the model's a line): its own speed and bend.
        let mut with_other = measured();
        with_other.others = vec![OtherModel {
            name: "helper".into(),
            loaded_as: "helper:latest".into(),
            load_ms: 420.0,
            meta: None,
            warm_ttft_ms: Figure::of(&[181.0]),
            prompt: Some(bent),
            tokenizer: None,
            decode_tokens_per_s: Figure::of(&[40.0, 42.0]),
            decode_line: None,
            long_decode_tokens_per_s: None,
            long_context: None,
        }];
        let (file, why) = twin(&with_other).expect("a twin");
        let text = to_toml(&with_other, &file, &why).expect("written");
        let back = ConfigFile::from_toml(&text).expect("loads");
        let (main, helper) = (&back.models[0].profile, &back.models[1].profile);
        assert_eq!((main.prompt_slowdown_per_1k, helper.prompt_slowdown_per_1k), (0.0, 4.0), "{text}");
        assert!(text.replace("\n# ", " ").contains("each token slower by 4.00 per 1,000 before it"), "{text}");
        // Its first token: the curve's intercept less the overhead and one of its gaps, no
        // longer below zero.
        assert!((helper.first_token_ms.mean - (150.0 - 2.0 - 1000.0 / 41.0)).abs() < 1.0, "{text}");
        // Its spread its own calls' (3 ms about 124), not the model's (1 ms about 7).
        assert!((helper.first_token_ms.cv - 3.0 / 124.0).abs() < 2e-3, "{text}");
        assert!(!text.contains("falls below zero"), "{text}");
    }

    #[test]
    fn the_twin_loads_as_a_configuration_and_carries_its_figures() {
        let cal = measured();
        let (file, why) = twin(&cal).unwrap();
        let text = to_toml(&cal, &file, &why).unwrap();
        let back = ConfigFile::from_toml(&text).unwrap();
        assert_eq!(back.instances.iter().map(|i| i.num_parallel).collect::<Vec<_>>(), vec![Some(3), Some(3)]);
        assert_eq!(back.devices.len(), 1, "servers at 0.6 of their solo speed share one device");
        assert!((back.devices[0].cross_process_efficiency - 1.2).abs() < 1e-9);
        assert!((back.devices[0].batch_penalty - 0.25).abs() < 0.01, "{}", back.devices[0].batch_penalty);
        let p = &back.models[0].profile;
        assert_eq!((p.decode_tokens_per_s, p.prompt_tokens_per_s), (1000.0, 5000.0));
        assert!((p.first_token_ms.mean - 7.0).abs() < 1e-9, "10 ms less 2 of overhead and 1 of a gap");
        assert!(text.contains("# solo calls, tokens after the first"), "{text}");
        assert_eq!(calibration_of(&back).unwrap(), cal, "the figures come back from the file");
        assert_eq!(back.server.max_queue, None, "no call refused at a load: Ollama's default");
        assert!(text.replace("\n# ", " ").contains("none refused, so at least 11 may wait"), "{text}");
        // A burst that was refused in part: the queue it shows (3 of 8 taken: one loading,
        // two waiting).
        let mut shed = cal.clone();
        shed.load_burst = Some(LoadBurst { sent: 8, refused: 5 });
        let (file, why) = twin(&shed).unwrap();
        let text = to_toml(&shed, &file, &why).unwrap();
        assert_eq!(ConfigFile::from_toml(&text).unwrap().server.max_queue, Some(2), "{text}");
        assert!(text.replace("\n# ", " ").contains("3 taken, 5 refused"), "{text}");
        sim_ollama::SimBuilder::new().config(back).start().expect("the simulator runs the twin");
    }

    #[test]
    fn a_devices_attention_share_comes_from_its_pairs_after_a_long_prompt() {
        // Tokens of 0.5 ms plus 0.5 ms per 1,000 of context (a slowdown of 1 per 1,000): at the
        // pairs' mean contexts of 500 and 2,500 tokens the attention is 0.5 and 2.5; each
        // stream kept 0.6 and then 0.75 of its speed: (1 + x) / r = 2.5 and 4.67 give
        // 2 / e = 1.958 and 2 / e_a = 1.083.
        let mut cal = measured();
        cal.decode_line = Some((0.5, 0.0005));
        cal.pairs[0].after_long = Some(Figure { median: 0.75, min: 0.74, max: 0.76, samples: 6 });
        cal.pair_contexts = Some([500.0, 2500.0]);
        let (file, why) = twin(&cal).unwrap();
        let d = &file.devices[0];
        // (Written to three figures: 1.02 and 1.85.)
        assert!((d.cross_process_efficiency - 1.021).abs() < 0.005, "{d:?}");
        assert!(d.cross_process_attention_efficiency.is_some_and(|e| (e - 1.846).abs() < 0.005), "{d:?}");
        assert!(
            why.iter().any(|(k, w)| *k == "cross_process_attention_efficiency" && w.contains("2500 tokens")),
            "{why:?}"
        );
        // The simulator's device gives the streams what was measured at both contexts.
        for (x, r) in [(0.5, 0.6), (2.5, 0.75)] {
            assert!((d.sharing().speed(1, 2, x) - r).abs() < 0.005, "{x}: {}", d.sharing().speed(1, 2, x));
        }
        // The tolerance moves both shares; without the long rounds there is one share.
        let tol = tolerance(&file).unwrap();
        let (slow, fast) =
            (tol.slow[0].cross_process_attention_efficiency, tol.fast[0].cross_process_attention_efficiency);
        assert!(slow.zip(fast).is_some_and(|(s, f)| s < 1.846 && f > 1.846), "{tol:?}");
        cal.pairs[0].after_long = None;
        assert_eq!(twin(&cal).unwrap().0.devices[0].cross_process_attention_efficiency, None);
    }

    #[test]
    fn an_answers_length_is_the_models_own_ending_or_none_where_it_never_ended_one() {
        use sim_ollama::advanced::config::ConfigFile;
        let profile = |cal: &Calibration| {
            let (file, why) = twin(cal).expect("a twin");
            let text = to_toml(cal, &file, &why).expect("written");
            (
                ConfigFile::from_toml(&text).expect("loads").models[0].profile.output_tokens.clone(),
                text.replace("\n# ", " "),
            )
        };
        // Not measured (a twin of before): the guess.
        let (guess, _) = profile(&measured());
        assert_eq!(guess.mean, 300.0);
        // The real tiny model: no answer ended before num_predict.
        let mut endless = measured();
        endless.answers = Some(Answers { calls: 9, stopped: 0, lengths: None });
        let (spec, text) = profile(&endless);
        assert_eq!((spec.dist, spec.mean), (DistKind::Constant, NEVER_ENDS));
        assert!(text.contains("none of 9 calibration answers of 300 tokens (num_predict) ended on its own"), "{text}");
        // A chat model that ended most on its own: their lengths.
        let mut ending = measured();
        ending.answers = Some(Answers { calls: 9, stopped: 8, lengths: Figure::of(&[120.0, 140.0, 160.0, 180.0]) });
        let (spec, text) = profile(&ending);
        assert_eq!((spec.dist, spec.mean), (DistKind::Normal, 150.0));
        assert!(text.contains("8 of 9 calibration answers (num_predict 300) ended on their own"), "{text}");
        assert!(text.contains("1 of them ran to num_predict"), "{text}");
    }

    #[test]
    fn a_twins_slow_end_reads_the_slower_speeds_also_as_attention_that_batches_worse() {
        // Streams with attention x = 3.2 (0.5 ms + 0.4 ms per 1,000 tokens, their mean context
        // 4,000 tokens) beside 1, 2 and 3 others at what p = 0 gives; the slow end moves each
        // 15 % slower, read once as the batching part (slow) and once as attention dearer per
        // stream (slow_attention, p as fitted): both give the moved speeds within 12 % at the
        // calibration's context (least squares of one figure over three k of a uniform move);
        // at three times it, where attention is most of a step, the attention reading is the
        // slower.
        let mut cal = measured();
        cal.decode_line = Some((0.5, 0.0004));
        cal.batch_context = Some(4000.0);
        let x = 3.2;
        let alone = DeviceSharing {
            batch_penalty: 0.0,
            cross_process_efficiency: 1.0,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        };
        cal.batch = (2..=4).map(|k| (k, Figure::of(&[alone.speed(k, 1, x)]).unwrap())).collect();
        let (file, _) = twin(&cal).unwrap();
        assert_eq!(file.devices[0].batch_penalty, 0.0);
        let tol = tolerance(&file).unwrap();
        let (slow, attention) = (tol.slow[0], tol.slow_attention[0]);
        assert!(attention.attention_batch_penalty > 0.0 && attention.batch_penalty == 0.0, "{tol:?}");
        for k in 2..=4 {
            let moved = 0.85 * alone.speed(k, 1, x);
            for end in [slow, attention] {
                let got = end.speed(k, 1, x);
                assert!((got - moved).abs() < 0.12 * moved, "k = {k}: {got} against {moved} ({end:?})");
            }
        }
        assert!(attention.speed(4, 1, 3.0 * x) < 0.95 * slow.speed(4, 1, 3.0 * x), "{tol:?}");
        // The fast end is one reading only, as before.
        assert_eq!(tol.fast[0].attention_batch_penalty, 0.0);
        // A run's slow end is the slower reading's, whichever it is: here a share that falls
        // with the batching part (the first reading's is the lower), then one that falls with
        // the attention's (the second's).
        let by_batching = |ends: &[DeviceSharing]| 0.3 - ends[0].batch_penalty;
        let by_attention = |ends: &[DeviceSharing]| 0.3 - ends[0].attention_batch_penalty;
        assert_eq!(tol.slow_share(by_batching), by_batching(&tol.slow));
        assert_eq!(tol.slow_share(by_attention), by_attention(&tol.slow_attention));
        assert!(by_batching(&tol.slow) < 0.3 && by_attention(&tol.slow_attention) < 0.3, "{tol:?}");
    }

    #[test]
    fn a_twins_tolerance_moves_its_fitted_figures_by_the_checks_fifteen_percent() {
        // Streams at 0.8 and 2/3 beside 1 and 2 others (p = 0.25), servers at 0.6 together
        // (efficiency 1.2): moved by 15 %, 0.68 and 0.567 fit p = 0.40, 0.92 and 0.767 fit
        // p = 0.14; 0.51 and 0.69 together, 1.02 and 1.38.
        let (file, _) = twin(&measured()).unwrap();
        let tol = tolerance(&file).expect("a twin with batching and sharing has a tolerance");
        let close = |got: f64, want: f64| (got - want).abs() < 0.01;
        assert!(close(tol.slow[0].batch_penalty, 0.40) && close(tol.fast[0].batch_penalty, 0.14), "{tol:?}");
        assert!(
            close(tol.slow[0].cross_process_efficiency, 1.02) && close(tol.fast[0].cross_process_efficiency, 1.38),
            "{tol:?}"
        );
        // Streams that kept their solo speed beside others: the device's least penalty, 0, yet
        // the fast end faster (1.15 of solo beside 1 and 2 others: p = -0.08 by least
        // squares), as the moved speeds need, and the slow end at 0.85 (p = 0.11).
        let mut perfect = measured();
        let whole = Figure { median: 1.0, min: 0.95, max: 1.05, samples: 3 };
        perfect.batch = vec![(2, whole), (3, whole)];
        let (file, _) = twin(&perfect).unwrap();
        let tol = tolerance(&file).unwrap();
        assert_eq!(file.devices[0].batch_penalty, 0.0);
        assert!(close(tol.fast[0].batch_penalty, -0.08) && close(tol.slow[0].batch_penalty, 0.11), "{tol:?}");
        // A server that decoded one call at a time, alone: nothing to move.
        let mut one = measured();
        one.batch.clear();
        one.together = None;
        one.pairs.clear();
        one.endpoints.truncate(1);
        one.slots.truncate(1);
        assert_eq!(tolerance(&twin(&one).unwrap().0), None);
        // Servers on devices of their own keep them: only the batching moves.
        let mut apart = measured();
        let near = Figure { median: 0.97, min: 0.95, max: 0.99, samples: 3 };
        apart.together = Some(near);
        apart.pairs[0].speed = near;
        let tol = tolerance(&twin(&apart).unwrap().0).unwrap();
        assert_eq!(
            tol.slow.iter().chain(&tol.fast).map(|e| e.cross_process_efficiency).collect::<Vec<_>>(),
            vec![1.0; 4]
        );
        // Three servers, two of them slowing each other: their device's sharing moves, the
        // third's device (its own) keeps 1.
        let mut mixed = measured();
        let f = |m: f64| Figure { median: m, min: m, max: m, samples: 3 };
        mixed.endpoints.push("http://127.0.0.1:3".into());
        mixed.slots.push(Slots { endpoint: "http://127.0.0.1:3".into(), slots: 3, at_least: false });
        mixed.decode_per_server.push(f(1000.0));
        mixed.together = None;
        mixed.pairs = vec![
            Pair { a: 0, b: 1, speed: f(0.6), after_long: None },
            Pair { a: 0, b: 2, speed: f(0.97), after_long: None },
            Pair { a: 1, b: 2, speed: f(0.98), after_long: None },
        ];
        let (file, why) = twin(&mixed).unwrap();
        let on: Vec<_> = file.instances.iter().map(|i| i.device.clone().unwrap()).collect();
        assert_eq!(on, vec!["shared", "shared", "device2"]);
        let text = to_toml(&mixed, &file, &why).unwrap();
        assert!(
            text.replace("\n# ", " ").contains("http://127.0.0.1:3: one call with one on each other server"),
            "{text}"
        );
        let tol = tolerance(&file).unwrap();
        assert!(
            close(tol.slow[0].cross_process_efficiency, 1.02) && close(tol.fast[0].cross_process_efficiency, 1.38),
            "{tol:?}"
        );
        assert_eq!((tol.slow[1].cross_process_efficiency, tol.fast[1].cross_process_efficiency), (1.0, 1.0), "{tol:?}");
        // Not a twin: no tolerance.
        assert_eq!(tolerance(&ConfigFile::default()), None);
    }

    #[test]
    fn a_check_names_the_figures_that_moved() {
        let twin = measured();
        let mut now = measured();
        assert!(check(&twin, &now).iter().all(|d| !d.moved));
        now.decode_tokens_per_s = Some(Figure { median: 700.0, min: 690.0, max: 710.0, samples: 3 });
        now.slots[1].slots = 1;
        now.load_burst = Some(LoadBurst { sent: 12, refused: 7 });
        // The longest prompt's first token 25 ms where it came at 12 (a prompt that now bends,
        // or is slower); 15 ms would be within the check's 5 ms.
        now.prompt.as_mut().unwrap().points = vec![(10.0, 25.0), (10.0, 26.0)];
        // The tokenizer and the answers' ends: the same, held; another count of the same
        // prompt, and answers that now end on their own where none did, moved.
        let mut twin = twin;
        twin.tokenizer =
            Some(TokenizerFit { letters_per_token: 1.45, template_tokens: 23, longest: (3002, 1941.0, 732.0) });
        twin.answers = Some(Answers { calls: 9, stopped: 0, lengths: None });
        now.tokenizer = twin.tokenizer.clone();
        now.answers = twin.answers;
        assert!(
            check(&twin, &now)
                .iter()
                .filter(|d| d.figure.starts_with("tokens the server") || d.figure.contains("answers"))
                .all(|d| !d.moved)
        );
        now.tokenizer =
            Some(TokenizerFit { letters_per_token: 6.0, template_tokens: 5, longest: (3002, 740.0, 732.0) });
        now.answers = Some(Answers { calls: 9, stopped: 4, lengths: Figure::of(&[100.0, 120.0]) });
        let moved: Vec<String> = check(&twin, &now).into_iter().filter(|d| d.moved).map(|d| d.figure).collect();
        assert_eq!(
            moved,
            vec![
                "decode tokens/s".to_string(),
                "time to first token of the longest prompt, ms".to_string(),
                "requests that may wait for a load".to_string(),
                "tokens the server counts in the longest prompt".to_string(),
                "share of answers that ended before num_predict".to_string(),
                "slots of http://127.0.0.1:2".to_string()
            ]
        );
    }

    #[test]
    fn a_figure_is_moved_only_where_it_moves_again() {
        let d = |figure: &str, moved: bool| Drift { figure: figure.into(), twin: 1.0, now: 2.0, moved };
        let first = [d("speed", true), d("load", true), d("slots", false)];
        let again = [d("speed", false), d("load", true), d("slots", true)];
        let moved: Vec<bool> = confirm(&first, &again).iter().map(|x| x.moved).collect();
        assert_eq!(moved, [false, true, false]);
    }
}
