//! The latency model: how long a load, a prompt evaluation and each token take for a model
//! profile, drawn from seeded distributions and multiplied by the global time scale.
//!
//! Durations here are *solo work*: what the phase would take alone on its device. The
//! [`device`](crate::device) turns work into wall-clock deadlines under contention.

use crate::config::Profile;
use crate::context::SlotContext;
use crate::dist::{DistSpec, Sampler};
use crate::seed::SimRng;
use std::time::Duration;

pub(crate) fn scaled_ms(ms: f64, time_scale: f64) -> Duration {
    let ns = ms * 1e6 * time_scale;
    if ns.is_finite() && ns > 0.0 { Duration::from_nanos(ns as u64) } else { Duration::ZERO }
}

/// Load time of a model: cold for the first load in this process, warm afterwards.
pub(crate) fn load_time(profile: &Profile, cold: bool, time_scale: f64, rng: &mut SimRng) -> Duration {
    let spec = match (&profile.cold_load_ms, cold) {
        (Some(c), true) => c,
        _ => &profile.load_ms,
    };
    scaled_ms(spec.sampler().sample(rng), time_scale)
}

/// The per-call overhead of a request that finds its runner loaded (the real scheduler's
/// health ping, [`Profile::call_overhead_ms`]). None for a replayed profile: a recorded time to
/// first token already holds everything the real server did before it.
pub(crate) fn call_overhead(profile: &Profile, time_scale: f64, rng: &mut SimRng) -> Duration {
    if profile.replay.is_some() {
        return Duration::ZERO;
    }
    scaled_ms(profile.call_overhead_ms.sampler().sample(rng), time_scale)
}

/// The model's natural answer length when the request does not bound it.
pub(crate) fn output_len(profile: &Profile, rng: &mut SimRng) -> usize {
    let s = match &profile.replay {
        Some(r) => Sampler::empirical(&r.tokens, 1.0),
        None => profile.output_tokens.sampler(),
    };
    (s.sample(rng).round() as usize).max(1)
}

/// The intended schedule of one stream, in solo work: an overhead no duration field accounts
/// for, prompt evaluation, then one gap per token. Gaps are drawn lazily, in order, from the
/// stream's own RNG, so the schedule is a pure function of its seed.
#[derive(Debug)]
pub(crate) struct Timing {
    /// Latency before prompt evaluation that the real server reports in no duration field
    /// but `total_duration` (request setup, sampler warm-up): part of TTFT.
    pub(crate) overhead: Duration,
    /// Solo work of the prompt evaluation.
    pub(crate) prompt: Duration,
    gap: Sampler,
    rng: SimRng,
    /// The first token costs no gap of its own (replayed TTFTs already include it).
    first_free: bool,
    /// Multiplies every gap (noise, [`Timing::slow_down`]).
    factor: f64,
    /// Tokens of context before the next token (the prompt, then each token generated, less
    /// what a full slot's shifts discarded).
    context: f64,
    /// [`Profile::decode_slowdown_per_1k`] per token.
    slowdown: f64,
    /// The slot the stream decodes in, once it has one ([`Timing::in_slot`]).
    slot: SlotContext,
}

/// Before a stream has its slot: one that never fills.
const NO_SLOT: SlotContext = SlotContext { tokens: usize::MAX, shift: false };

impl Timing {
    pub(crate) fn new(profile: &Profile, prompt_tokens: u32, time_scale: f64, mut rng: SimRng) -> Timing {
        if let Some(r) = &profile.replay {
            // A recorded TTFT covers the overhead, the prompt evaluation and the first token
            // together: the first token leaves when it ends.
            let overhead = scaled_ms(Sampler::empirical(&r.ttft_ms, 1.0).sample(&mut rng), time_scale);
            let gap = Sampler::empirical(&r.gaps_ms, 1e6 * time_scale);
            return Timing {
                overhead,
                prompt: Duration::ZERO,
                gap,
                rng,
                first_free: true,
                factor: 1.0,
                context: 0.0,
                slowdown: 0.0,
                slot: NO_SLOT,
            };
        }
        let prompt = scaled_ms(profile.prompt_ms(0.0, f64::from(prompt_tokens)), time_scale);
        let overhead = scaled_ms(profile.first_token_ms.sampler().sample(&mut rng), time_scale);
        let mean_gap_ms = 1000.0 / profile.decode_tokens_per_s; // 0 for an infinite rate
        let gap_spec = DistSpec {
            dist: profile.inter_token.dist,
            mean: mean_gap_ms * 1e6 * time_scale,
            cv: profile.inter_token.cv,
            min: None,
            max: None,
        };
        Timing {
            overhead,
            prompt,
            gap: gap_spec.sampler(),
            rng,
            first_free: false,
            factor: 1.0,
            context: f64::from(prompt_tokens),
            slowdown: profile.decode_slowdown_per_1k / 1000.0,
            slot: NO_SLOT,
        }
    }

    /// The slot the stream decodes in, holding `held` tokens before its first (the prompt as
    /// the slot took it: a cut prompt holds fewer than planned); a full slot's shifts discard
    /// context from then on ([`SlotContext`]).
    pub(crate) fn in_slot(&mut self, slot: SlotContext, held: usize) {
        self.slot = slot;
        self.context = held as f64;
    }

    /// Multiplies all of the stream's work by `factor` (noise on purpose, [`crate::noise`]).
    pub(crate) fn slow_down(&mut self, factor: f64) {
        self.slow_down_parts(factor, factor);
    }

    /// Multiplies the stream's start (its overhead and its prompt) by `start` and its tokens'
    /// gaps by `gaps` (a device whose prompt processing and decoding differ by other factors).
    pub(crate) fn slow_down_parts(&mut self, start: f64, gaps: f64) {
        if start.is_finite() && start > 0.0 && gaps.is_finite() && gaps > 0.0 {
            self.overhead = self.overhead.mul_f64(start);
            self.prompt = self.prompt.mul_f64(start);
            self.factor *= gaps;
        }
    }

    /// Solo work from the previous token (or the end of prompt evaluation) to the next token.
    pub(crate) fn next_gap(&mut self) -> Duration {
        self.context -= self.slot.discard(self.context as usize) as f64;
        let context = self.context;
        self.context += 1.0;
        if std::mem::take(&mut self.first_free) {
            return Duration::ZERO;
        }
        let g = self.gap.sample(&mut self.rng) * self.factor * (1.0 + self.slowdown * context);
        if g.is_finite() && g > 0.0 { Duration::from_nanos(g as u64) } else { Duration::ZERO }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_catalogue;
    use rand::SeedableRng;

    fn gemma() -> Profile {
        default_catalogue().into_iter().find(|m| m.name == "gemma3:latest").unwrap().profile
    }

    #[test]
    fn decode_gaps_average_to_the_profile_rate() {
        let mut t = Timing::new(&gemma(), 50, 1.0, SimRng::seed_from_u64(9));
        let n = 5000;
        let total: Duration = (0..n).map(|_| t.next_gap()).sum();
        let rate = n as f64 / total.as_secs_f64();
        assert!((rate - 114.5).abs() < 1.5, "rate {rate}");
    }

    #[test]
    fn a_speed_that_falls_with_context_slows_later_tokens() {
        let mut p = gemma();
        p.inter_token.cv = 0.0;
        p.decode_slowdown_per_1k = 2.0;
        let mut t = Timing::new(&p, 500, 1.0, SimRng::seed_from_u64(3));
        let first = t.next_gap();
        let later: Vec<Duration> = (0..1000).map(|_| t.next_gap()).collect();
        let solo = Duration::from_secs_f64(1.0 / 114.5);
        // 500 tokens of prompt at 2x per 1,000: twice the solo gap; 1,000 tokens on, four times.
        assert_eq!(first.as_micros(), solo.mul_f64(2.0).as_micros());
        assert_eq!(later[999].as_micros(), solo.mul_f64(4.0).as_micros());
        p.decode_slowdown_per_1k = 0.0;
        assert_eq!(Timing::new(&p, 500, 1.0, SimRng::seed_from_u64(3)).next_gap().as_micros(), solo.as_micros());
    }

    #[test]
    fn a_device_slower_only_at_decoding_keeps_the_start_and_stretches_the_gaps() {
        let mut p = gemma();
        p.inter_token.cv = 0.0;
        let base = Timing::new(&p, 1000, 1.0, SimRng::seed_from_u64(4));
        let mut t = Timing::new(&p, 1000, 1.0, SimRng::seed_from_u64(4));
        t.slow_down_parts(1.0, 2.0);
        assert_eq!((t.overhead, t.prompt), (base.overhead, base.prompt), "the start as the profile's");
        assert_eq!(t.next_gap().as_micros(), Duration::from_secs_f64(2.0 / 114.5).as_micros(), "the gaps twice");
        // Slower at both by one factor: slow_down.
        let mut both = Timing::new(&p, 1000, 1.0, SimRng::seed_from_u64(4));
        both.slow_down(2.0);
        assert_eq!(both.prompt, base.prompt * 2);
    }

    #[test]
    fn prompt_evaluation_grows_with_prompt_length_and_scales_with_time() {
        let p = gemma();
        let short = Timing::new(&p, 100, 1.0, SimRng::seed_from_u64(1)).prompt;
        let long = Timing::new(&p, 1000, 1.0, SimRng::seed_from_u64(1)).prompt;
        let scaled = Timing::new(&p, 1000, 0.01, SimRng::seed_from_u64(1)).prompt;
        assert_eq!(short, Duration::from_millis(25));
        assert_eq!(long, Duration::from_millis(250));
        assert_eq!(scaled, Duration::from_micros(2500));
    }

    #[test]
    fn a_prompt_whose_tokens_slow_with_context_takes_longer_than_its_length_says() {
        let mut p = gemma();
        p.prompt_slowdown_per_1k = 1.0;
        // gemma3's 4,000 prompt tokens a second: 1,000 tokens are 250 ms at an empty context,
        // each at its position's speed (mean position 499.5): 1.4995 times that.
        assert_eq!(Timing::new(&p, 1000, 1.0, SimRng::seed_from_u64(1)).prompt, Duration::from_micros(374_875));
        // The last 100 tokens of a 1,000-token prompt (a slot that held the first 900) cost
        // more than a prompt of 100 alone: they attend to the 900 before them.
        let (tail, alone) = (p.prompt_ms(900.0, 100.0), p.prompt_ms(0.0, 100.0));
        assert!((tail / alone - 1.9495 / 1.0495).abs() < 1e-9, "{tail} {alone}");
        p.prompt_slowdown_per_1k = 0.0;
        assert_eq!(p.prompt_ms(900.0, 100.0), 25.0, "in proportion to its length");
    }

    #[test]
    fn a_replayed_profile_draws_from_the_recorded_values() {
        let mut p = gemma();
        p.replay =
            Some(crate::config::Replay { ttft_ms: vec![100.0, 300.0], gaps_ms: vec![5.0, 15.0], tokens: vec![42.0] });
        let mut t = Timing::new(&p, 500, 1.0, SimRng::seed_from_u64(2));
        assert!(t.overhead == Duration::from_millis(100) || t.overhead == Duration::from_millis(300));
        assert_eq!(t.prompt, Duration::ZERO);
        assert_eq!(t.next_gap(), Duration::ZERO, "the recorded TTFT includes the first token");
        for _ in 0..50 {
            let g = t.next_gap();
            assert!(g == Duration::from_millis(5) || g == Duration::from_millis(15), "{g:?}");
        }
        assert_eq!(output_len(&p, &mut SimRng::seed_from_u64(1)), 42);
    }

    #[test]
    fn a_first_load_costs_cold_load_ms_only_when_the_profile_has_one() {
        let mut p = gemma();
        let mut rng = SimRng::seed_from_u64(3);
        // gemma3's data gives one figure for every runner start, first or reload.
        assert!(p.cold_load_ms.is_none());
        let first: Duration = (0..100).map(|_| load_time(&p, true, 1.0, &mut rng)).sum();
        assert!(first > Duration::from_secs(100 * 5), "runner starts of ~6.5 s: {first:?}");
        p.cold_load_ms = Some(DistSpec::constant(20_000.0));
        assert_eq!(load_time(&p, true, 1.0, &mut rng), Duration::from_secs(20));
        assert!(load_time(&p, false, 1.0, &mut rng) < Duration::from_secs(15));
    }

    #[test]
    fn the_per_call_overhead_follows_the_profile_and_scales() {
        let p = gemma();
        let mut rng = SimRng::seed_from_u64(4);
        let v: Vec<Duration> = (0..200).map(|_| call_overhead(&p, 1.0, &mut rng)).collect();
        let mean = v.iter().sum::<Duration>() / 200;
        assert!(v.iter().all(|d| *d >= Duration::from_millis(150)), "min 150 ms");
        assert!((260..320).contains(&mean.as_millis()), "mean {mean:?}");
        assert!(call_overhead(&p, 0.01, &mut rng) < Duration::from_millis(10), "scaled like every duration");
        let mut none = p.clone();
        none.call_overhead_ms = DistSpec::constant(0.0);
        assert_eq!(call_overhead(&none, 1.0, &mut rng), Duration::ZERO);
        let mut replayed = p.clone();
        replayed.replay = Some(crate::config::Replay { ttft_ms: vec![100.0], gaps_ms: vec![5.0], tokens: vec![9.0] });
        assert_eq!(call_overhead(&replayed, 1.0, &mut rng), Duration::ZERO, "a recorded TTFT holds it already");
    }
}
