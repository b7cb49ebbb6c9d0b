//! The fits `harness calibrate` makes of what it measured: the prompt's line (or curve) of
//! time to first token against length, the lines of speed against context, the batching
//! slowdown, and a shared device's efficiency.

use serde::{Deserialize, Serialize};

/// The fitted line (or curve) of time to first token against prompt length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptFit {
    /// Time to first token of an empty prompt, ms (the line's intercept).
    pub intercept_ms: f64,
    /// Prompt tokens (the simulator's count of the same text) per second at an empty context;
    /// infinite when the longest prompt took no longer than the shortest.
    pub tokens_per_s: f64,
    /// Spread of the points around the line, ms (standard deviation of the residuals).
    pub residual_ms: f64,
    /// How much slower a prompt token evaluates per 1,000 tokens before it (the simulator's
    /// `prompt_slowdown_per_1k`), where the points bend upward beyond their noise
    /// ([`PromptFit::fit`]); 0: a straight line.
    #[serde(default)]
    pub slowdown_per_1k: f64,
    /// The points: (prompt tokens, time to first token in ms).
    pub points: Vec<(f64, f64)>,
}

/// The model's tokenizer as the simulator models it ([`sim_ollama::advanced::Tokenizer`]),
/// fitted to the server's own count (`prompt_eval_count`) of the calibration's prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizerFit {
    /// Letters a token: the default where it counts the prompts within
    /// [`TOKENIZER_TOLERANCE`] of the server (the template's tokens aside), else the count
    /// closest to the server's.
    pub letters_per_token: f64,
    /// Tokens the server counts in every prompt beyond its text (the chat template's): the
    /// median of its count less the tokenizer's over the shortest prompts (where a tokenizer's
    /// miss is fewest tokens).
    pub template_tokens: u32,
    /// The longest prompt: its characters, the server's count of it (the median) and the
    /// default tokenizer's.
    pub longest: (usize, f64, f64),
}

/// How far the default tokenizer's counts (the template's tokens aside) may lie from the
/// server's, the median over the prompts, before the twin gets a tokenizer of its own: a
/// 32k-vocabulary model counts English within a few per cent of it, the real tiny model
/// (301 tokens) three times as many.
pub(crate) const TOKENIZER_TOLERANCE: f64 = 0.10;

impl TokenizerFit {
    /// The fit to `(prompt, the server's count of it)`; `None` without a count. Every
    /// letters-a-token from 1 to 16 in steps of 0.05 is tried, each with its template's tokens,
    /// and the one whose counts lie closest (the median relative miss; of equals, the one
    /// nearest the default) is kept. A run of letters is a whole number of tokens, so on the
    /// calibration's prompts (a sentence repeated) the count moves in steps as the letters a
    /// token pass a common word's length over a whole number; the nearest step is kept.
    pub fn fit<S: AsRef<str>>(samples: &[(S, f64)]) -> Option<TokenizerFit> {
        use sim_ollama::advanced::{LETTERS_PER_TOKEN, Tokenizer};
        let samples: Vec<(&str, f64)> =
            samples.iter().filter(|(_, n)| *n > 0.0).map(|(t, n)| (t.as_ref(), *n)).collect();
        let shortest = samples.iter().map(|(t, _)| t.len()).min()?;
        let try_at = |l: f64| -> (f64, u32) {
            let tok = Tokenizer::new(l);
            let counts: Vec<f64> = samples.iter().map(|(t, _)| f64::from(tok.count(t))).collect();
            let over: Vec<f64> = samples
                .iter()
                .zip(&counts)
                .filter(|((t, _), _)| t.len() == shortest)
                .map(|((_, n), c)| n - c)
                .collect();
            let template = median(over).unwrap_or(0.0).max(0.0).round();
            let miss = median(samples.iter().zip(&counts).map(|((_, n), c)| (c + template - n).abs() / n).collect());
            (miss.unwrap_or(f64::INFINITY), template as u32)
        };
        let (default_miss, default_template) = try_at(LETTERS_PER_TOKEN);
        let (letters_per_token, template_tokens) = if default_miss <= TOKENIZER_TOLERANCE {
            (LETTERS_PER_TOKEN, default_template)
        } else {
            let mut best = (LETTERS_PER_TOKEN, default_miss, default_template);
            for step in 0..=300 {
                let l = 1.0 + 0.05 * f64::from(step);
                let (miss, template) = try_at(l);
                let nearer = (l - LETTERS_PER_TOKEN).abs() < (best.0 - LETTERS_PER_TOKEN).abs();
                if miss < best.1 - 1e-12 || (miss <= best.1 + 1e-12 && nearer) {
                    best = (l, miss, template);
                }
            }
            ((best.0 * 100.0).round() / 100.0, best.2)
        };
        let longest = samples.iter().max_by_key(|(t, _)| t.len())?.0.len();
        let at_longest: Vec<&(&str, f64)> = samples.iter().filter(|(t, _)| t.len() == longest).collect();
        let server = median(at_longest.iter().map(|(_, n)| *n).collect()).unwrap_or(0.0);
        let default = f64::from(Tokenizer::default().count(at_longest[0].0));
        Some(TokenizerFit { letters_per_token, template_tokens, longest: (longest, server, default) })
    }

    /// The tokens of a prompt as the twin counts them: its text's and the template's.
    pub fn count(&self, text: &str) -> f64 {
        f64::from(sim_ollama::advanced::Tokenizer::new(self.letters_per_token).count(text) + self.template_tokens)
    }
}

/// A bend of the prompt's time is fitted where the fastest call of some length between the
/// shortest and the longest lies below the straight line between theirs (the chord) by more
/// than this share of its time and [`BEND_MIN_MS`]. The fastest calls of a straight prompt
/// line lie within a few per cent of its chord on a busy machine (a stall only adds time); a
/// bend of 10 % there (the 34 M-parameter model on the real CPU server: 349 ms at 172 tokens
/// against a chord of 382) is a prompt three times as long taking 33 % more than a line says.
const BEND_SHARE: f64 = 0.05;
const BEND_MIN_MS: f64 = 5.0;

impl PromptFit {
    /// The line through `points` ([`fit_prompt`]), keeping them; or, where the points bend
    /// upward (each prompt token slower the more tokens precede it: attention), the curve
    /// `a + g n (1 + s (n - 1) / 2000)` of the simulator's prompt time, `s` the slowdown per
    /// 1,000 tokens, fitted to every point. Whether they bend is read from each length's
    /// fastest call: a machine's stall only adds time, and one slow stretch over the longest
    /// prompt's calls bends a line through every point, not through the fastest
    /// ([`BEND_SHARE`], [`BEND_MIN_MS`]).
    pub fn fit(points: Vec<(f64, f64)>) -> Option<PromptFit> {
        let (intercept_ms, tokens_per_s, residual_ms) = fit_prompt(&points)?;
        let line = PromptFit { intercept_ms, tokens_per_s, residual_ms, slowdown_per_1k: 0.0, points };
        Some(line.bent().unwrap_or(line))
    }

    /// The curve through the points where their fastest calls bend ([`PromptFit::fit`]).
    fn bent(&self) -> Option<PromptFit> {
        // Each length's fastest call.
        let mut fastest: Vec<(f64, f64)> = Vec::new();
        for &(x, y) in &self.points {
            match fastest.iter_mut().find(|p| p.0 == x) {
                Some(p) => p.1 = p.1.min(y),
                None => fastest.push((x, y)),
            }
        }
        if fastest.len() < 3 {
            return None;
        }
        fastest.sort_by(|p, q| p.0.total_cmp(&q.0));
        let ((x0, y0), (x1, y1)) = (fastest[0], fastest[fastest.len() - 1]);
        let bends = fastest[1..fastest.len() - 1].iter().any(|&(x, y)| {
            let below = y0 + (y1 - y0) * (x - x0) / (x1 - x0) - y;
            below > BEND_MIN_MS && below > BEND_SHARE * y.abs()
        });
        if !bends {
            return None;
        }
        let (a, b, c, residual_ms) = rising_curve(&self.points)?;
        (c > 0.0).then(|| {
            let g = b + c;
            PromptFit {
                intercept_ms: a,
                tokens_per_s: 1000.0 / g,
                residual_ms,
                slowdown_per_1k: 2000.0 * c / g,
                points: self.points.clone(),
            }
        })
    }

    /// The time to first token it gives a prompt of `tokens`, ms: the intercept and the
    /// simulator's prompt time of its speed and bend (`sim_ollama`'s `prompt_ms`; a speed too
    /// fast to measure takes none).
    pub fn at(&self, tokens: f64) -> f64 {
        let rate = if self.tokens_per_s > 0.0 { self.tokens_per_s } else { f64::INFINITY };
        self.intercept_ms + sim_ollama::advanced::config::prompt_ms(rate, self.slowdown_per_1k, 0.0, tokens)
    }

    /// Its prompt speed as a profile's `prompt_tokens_per_s`: a prompt too fast to measure is
    /// a million tokens a second.
    pub(crate) fn profile_tokens_per_s(&self) -> f64 {
        if self.tokens_per_s.is_finite() { self.tokens_per_s } else { 1e6 }
    }
}

/// The line `y = a + x / rate` through the points by least squares: (intercept, rate,
/// residual standard deviation). A slope at or below zero is an infinite rate.
pub fn fit_prompt(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let (a, slope, resid) = rising_line(points)?;
    let rate = if slope > 0.0 { 1000.0 / slope } else { f64::INFINITY };
    Some((a, rate, resid))
}

/// The least-squares line `y = a + b x` through at least three points with some spread in x,
/// never falling (a falling fit is the flat line through the mean): (a, b, residual standard
/// deviation).
pub fn rising_line(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    let (slope, a) = if slope > 0.0 { (slope, my - slope * mx) } else { (0.0, my) };
    let resid = (points.iter().map(|p| (p.1 - a - slope * p.0).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    Some((a, slope, resid))
}

/// The least-squares curve `y = a + b x + c x^2` through at least four points at three or more
/// distinct x, `b` never below zero (such a fit is `y = a + c x^2`): (a, b, c, residual
/// standard deviation over n - 3 degrees of freedom).
pub fn rising_curve(points: &[(f64, f64)]) -> Option<(f64, f64, f64, f64)> {
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if points.len() < 4 || xs.len() < 3 {
        return None;
    }
    // Least squares in the basis `cols` (each a function of x), by the normal equations.
    let solve = |cols: &[fn(f64) -> f64]| -> Option<Vec<f64>> {
        let k = cols.len();
        let mut m = vec![vec![0.0; k + 1]; k];
        for &(x, y) in points {
            for i in 0..k {
                for j in 0..k {
                    m[i][j] += cols[i](x) * cols[j](x);
                }
                m[i][k] += cols[i](x) * y;
            }
        }
        // Gaussian elimination with partial pivoting.
        for col in 0..k {
            let pivot = (col..k).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
            m.swap(col, pivot);
            if m[col][col].abs() < 1e-300 {
                return None;
            }
            for row in 0..k {
                if row != col {
                    let f = m[row][col] / m[col][col];
                    for j in col..=k {
                        m[row][j] -= f * m[col][j];
                    }
                }
            }
        }
        Some((0..k).map(|i| m[i][k] / m[i][i]).collect())
    };
    let full = solve(&[|_| 1.0, |x| x, |x| x * x])?;
    let (a, b, c) = if full[1] >= 0.0 {
        (full[0], full[1], full[2])
    } else {
        let q = solve(&[|_| 1.0, |x| x * x])?;
        (q[0], 0.0, q[1])
    };
    let rss: f64 = points.iter().map(|&(x, y)| (y - a - b * x - c * x * x).powi(2)).sum();
    Some((a, b, c, (rss / (points.len() as f64 - 3.0)).sqrt()))
}

/// The line `y = a + b x` by Theil-Sen: the median of the slopes between every two points
/// (with x apart), the intercept the median of `y - b x`; never falling; (a, b, residual
/// standard deviation). A few points far off the line (an eighth of a call in which the client
/// was descheduled: its mean gap tens of times the others) move it little, where they tilt a
/// least-squares line: the decode line of a known simulator's 100-token calls read a slowdown
/// of 13 per 1,000 tokens for 2 once, in a suite run.
pub fn robust_rising_line(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    if points.len() < 3 {
        return None;
    }
    let spread = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max)
        - points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    if !(spread > 0.0) {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, p) in points.iter().enumerate() {
        for q in &points[i + 1..] {
            let dx = q.0 - p.0;
            if dx.abs() > spread * 1e-9 {
                slopes.push((q.1 - p.1) / dx);
            }
        }
    }
    let slope = median(slopes)?.max(0.0);
    let a = median(points.iter().map(|p| p.1 - slope * p.0).collect())?;
    let n = points.len() as f64;
    let resid = (points.iter().map(|p| (p.1 - a - slope * p.0).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    Some((a, slope, resid))
}

/// The simulator's batching slowdown that best explains the measured relative speeds: a stream
/// beside k-1 others runs at `(1 + x) / (1 + p (k - 1) + k x)` of its solo speed, `x` the
/// calls' attention (`sim_ollama`'s `DeviceSharing::speed`; 0: `1 / (1 + p (k - 1))`); least
/// squares on `(1 + x) / speed - 1 - k x = p (k - 1)`, never below zero (a simulator device's
/// `batch_penalty`).
pub fn fit_batch_penalty(rel: &[(usize, f64)], attention: f64) -> Option<f64> {
    fit_batch_penalty_unbounded(rel, attention).map(|p| p.max(0.0))
}

/// [`fit_batch_penalty`]'s least squares as they come: below zero where the streams beside
/// each other ran faster than attention that never batches allows (the real four-slot
/// server's four streams once kept 0.31 of their solo speed where `p = 0` gives 0.30). Not a
/// device's figure (the simulator refuses a negative one), but the fast end of a twin's
/// tolerance, which must reach the speeds it moves the measurements to.
pub(crate) fn fit_batch_penalty_unbounded(rel: &[(usize, f64)], attention: f64) -> Option<f64> {
    let x = attention.max(0.0);
    slope_through_origin(rel, |k, s| ((k - 1.0), (1.0 + x) / s - 1.0 - k * x))
}

/// The least-squares `b` of `y = b a` over each k-stream speed's point `(a, y) = point(k, speed)`
/// (k >= 2, speeds above zero); `None` where every `a` is 0.
fn slope_through_origin(rel: &[(usize, f64)], point: impl Fn(f64, f64) -> (f64, f64)) -> Option<f64> {
    let pts: Vec<(f64, f64)> =
        rel.iter().filter(|(k, s)| *k >= 2 && *s > 0.0).map(|&(k, s)| point(k as f64, s)).collect();
    let sxx: f64 = pts.iter().map(|p| p.0 * p.0).sum();
    (sxx > 0.0).then(|| pts.iter().map(|p| p.0 * p.1).sum::<f64>() / sxx)
}

/// The other reading of the same speeds: the batching part as fitted (`p`), and each stream's
/// attention dearer by `q` per other stream of its batch, `(1 + x) / (1 + p (k - 1) + k x (1 +
/// q (k - 1)))`; least squares on `(1 + x) / speed - 1 - p (k - 1) - k x = q k x (k - 1)`, never
/// below zero. `None` without attention. At the calls' context both readings give the same
/// speeds; at longer ones, where attention is most of a step, this one is slower (a twin's
/// tolerance takes the slower of the two: [`super::twin::tolerance`]).
pub(crate) fn fit_attention_batch_penalty(rel: &[(usize, f64)], attention: f64, p: f64) -> Option<f64> {
    let x = attention.max(0.0);
    slope_through_origin(rel, |k, s| (k * x * (k - 1.0), (1.0 + x) / s - 1.0 - p * (k - 1.0) - k * x))
        .map(|q| q.max(0.0))
}

/// Whether servers that slowed each other to `together` of their solo speed share a device,
/// and with what efficiency (`m` servers time-slicing one device each get `efficiency / m`).
/// Above 0.9 of solo speed, each server is on a device of its own.
pub fn fit_sharing(together: f64, servers: usize) -> Option<f64> {
    (together < 0.9).then(|| sharing_efficiency(together, servers))
}

/// A device's two shares when `servers` processes time-slice it, `(cross_process_efficiency,
/// cross_process_attention_efficiency)`: the step's part that batches and the streams'
/// attention may be shared otherwise (on this machine's CPU servers the weights slowed 2.2
/// times beside another server, the attention hardly at all). From each stream's speed beside
/// the others relative to alone, `r`, at two mean attentions `x` (the profile's slowdown at
/// the calls' mean contexts): `(1 + x) / r = m / e + m x / e_a` at both
/// ([`sim_ollama::advanced::trace::DeviceSharing::stream_speed`]). `None` where the two
/// attentions are too close to tell the parts apart (under 0.3 apart), or a part comes out at
/// zero or below (the rounds' noise larger than what tells them apart).
pub(crate) fn fit_sharing_parts(short: (f64, f64), long: (f64, f64), servers: usize) -> Option<(f64, f64)> {
    let ((xs, rs), (xl, rl)) = (short, long);
    if !(xl - xs >= 0.3 && rs > 0.0 && rl > 0.0 && xs >= 0.0) {
        return None;
    }
    let (ys, yl) = ((1.0 + xs) / rs, (1.0 + xl) / rl);
    let attention = (yl - ys) / (xl - xs);
    let weights = ys - xs * attention;
    let m = servers as f64;
    (attention > 0.0 && weights > 0.0).then(|| ((m / weights).clamp(0.05, 2.0), (m / attention).clamp(0.05, 16.0)))
}

/// The efficiency of a device `servers` time-slice, each getting `together` of its solo speed.
pub(crate) fn sharing_efficiency(together: f64, servers: usize) -> f64 {
    (together * servers as f64).clamp(0.05, 2.0)
}

/// The median of the finite values; `None` when there are none.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calibration's prompts (a sentence repeated to 60, 600, 1,500 and 3,000 characters)
    /// as a server counts them with `letters` a token and `template` tokens more.
    fn counted(letters: f64, template: u32) -> Vec<(String, f64)> {
        let sentence = "The agents read the report, compare the figures with last week, and write a short note. ";
        let tok = sim_ollama::advanced::Tokenizer::new(letters);
        [60, 600, 1500, 3000]
            .iter()
            .map(|&chars| {
                let text = format!("Calibration1x2: {}", sentence.repeat(chars / sentence.len() + 1));
                let n = f64::from(tok.count(&text) + template);
                (text, n)
            })
            .collect()
    }

    #[test]
    fn a_servers_tokenizer_is_recovered_from_its_counts_and_the_default_kept_within_its_tolerance() {
        // A server of a small vocabulary (the real tiny model: about 1.45 letters a token and a
        // template of 20 tokens).
        let small = TokenizerFit::fit(&counted(1.45, 20)).expect("counts");
        assert_eq!((small.letters_per_token, small.template_tokens), (1.45, 20), "{small:?}");
        assert_eq!(small.longest.0, counted(1.45, 20)[3].0.len());
        // One that counts as the simulator does, with a template of 5: the default.
        let same = TokenizerFit::fit(&counted(6.0, 5)).unwrap();
        assert_eq!((same.letters_per_token, same.template_tokens), (6.0, 5));
        // Within 10 % of the default's counts (a 32k-vocabulary model on English): the default.
        let close: Vec<(String, f64)> = counted(6.0, 5).into_iter().map(|(t, n)| (t, (n * 1.08).round())).collect();
        assert_eq!(TokenizerFit::fit(&close).unwrap().letters_per_token, 6.0);
        // No counts (a server that reports none): nothing fitted.
        assert_eq!(TokenizerFit::fit(&[("hi", 0.0)]), None);
        assert_eq!(TokenizerFit::fit::<&str>(&[]), None);
    }

    #[test]
    fn a_devices_weights_and_attention_shares_come_from_two_contexts() {
        // The real pair on this machine's cores (0.93 and 2.1): at attentions 2.5 and 5.5 each
        // stream keeps 0.77 and 0.87 of its solo speed.
        let m = 2.0;
        let r = |x: f64| (1.0 + x) / (m * (1.0 / 0.93 + x / 2.1));
        let (e, ea) = fit_sharing_parts((2.5, r(2.5)), (5.5, r(5.5)), 2).unwrap();
        assert!((e - 0.93).abs() < 1e-9 && (ea - 2.1).abs() < 1e-9, "{e} {ea}");
        // One share for both (a GPU): the same figure twice.
        let r = |x: f64| 0.78 / m * (1.0 + x) / (1.0 + x);
        let (e, ea) = fit_sharing_parts((0.1, r(0.1)), (1.4, r(1.4)), 2).unwrap();
        assert!((e - 0.78).abs() < 1e-9 && (ea - 0.78).abs() < 1e-9, "{e} {ea}");
        // Too close to tell apart, or noise that makes a part negative: none.
        assert_eq!(fit_sharing_parts((1.0, 0.6), (1.2, 0.62), 2), None);
        assert_eq!(fit_sharing_parts((0.1, 0.3), (2.0, 0.95), 2), None);
    }

    #[test]
    fn the_prompt_line_recovers_its_slope_and_intercept() {
        let pts: Vec<(f64, f64)> =
            [10.0, 100.0, 400.0].iter().flat_map(|&x| [(x, 20.0 + x / 2.0), (x, 20.0 + x / 2.0)]).collect();
        let (a, rate, resid) = fit_prompt(&pts).unwrap();
        assert!((a - 20.0).abs() < 1e-9 && (rate - 2000.0).abs() < 1e-6 && resid < 1e-9, "{a} {rate} {resid}");
        // No slope: an infinite prompt speed, the mean as the intercept.
        let (a, rate, _) = fit_prompt(&[(10.0, 5.0), (100.0, 5.0), (400.0, 5.0)]).unwrap();
        assert_eq!((a, rate), (5.0, f64::INFINITY));
        assert!(fit_prompt(&[(10.0, 5.0), (10.0, 6.0), (10.0, 7.0)]).is_none());
    }

    /// Five one-token calls at each of the calibration's three lengths (about 15, 150 and 375 of
    /// the simulator's tokens), each time `f(tokens)` off by -4 %, -2 %, 0, +2 %, +4 %.
    fn calls(f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        [15.0, 150.0, 375.0].iter().flat_map(|&x| [0.96, 0.98, 1.0, 1.02, 1.04].map(|e| (x, f(x) * e))).collect()
    }

    #[test]
    fn a_prompt_time_that_bends_upward_is_fitted_as_a_curve_and_a_straight_one_as_a_line() {
        // As the 34 M-parameter model on the real CPU server: 150 ms, then 2 ms a token at an
        // empty context, each token slower by 4 per 1,000 before it (195 ms at 15 tokens,
        // about 1,940 at 375).
        let bent = PromptFit::fit(calls(|x| 150.0 + 2.0 * x * (1.0 + 4.0 * (x - 1.0) / 2000.0))).unwrap();
        assert!((bent.slowdown_per_1k - 4.0).abs() < 0.8, "{bent:?}");
        assert!((bent.tokens_per_s - 500.0).abs() < 75.0, "{bent:?}");
        assert!((bent.intercept_ms - 150.0).abs() < 30.0, "{bent:?}");
        // What the curve gives each length is its calls' time within their 4 %.
        for x in [15.0, 150.0, 375.0] {
            let want = 150.0 + 2.0 * x * (1.0 + 4.0 * (x - 1.0) / 2000.0);
            assert!((bent.at(x) / want - 1.0).abs() < 0.04, "{x}: {} {want}", bent.at(x));
        }
        // The line through the same points misses the middle length's calls by a tenth and more.
        let (a, rate, _) = fit_prompt(&bent.points).unwrap();
        assert!(a + 150.0 * 1000.0 / rate > 1.1 * bent.at(150.0), "{a} {rate}");
        // The real tiny model (its medians: 5.2, 15.7 and 31.6 ms): a line; so is a straight
        // one whose middle calls ran 4 % slow.
        let tiny = |x: f64| {
            if x < 100.0 {
                5.2
            } else if x < 200.0 {
                15.7
            } else {
                31.6
            }
        };
        assert_eq!(PromptFit::fit(calls(tiny)).unwrap().slowdown_per_1k, 0.0);
        let slow_middle = |x: f64| (20.0 + x) * if x == 150.0 { 1.04 } else { 1.0 };
        assert_eq!(PromptFit::fit(calls(slow_middle)).unwrap().slowdown_per_1k, 0.0);
        // One of the longest prompt's calls stalled (three times as long): every point bends,
        // the fastest calls do not: a line.
        let mut stalled = calls(|x| 20.0 + x);
        stalled.iter_mut().rfind(|p| p.0 == 375.0).unwrap().1 *= 3.0;
        assert!(rising_curve(&stalled).unwrap().2 > 0.0, "a curve through every point bends");
        assert_eq!(PromptFit::fit(stalled).unwrap().slowdown_per_1k, 0.0);
        // A bend of a few milliseconds changes no verdict: a line (2.5 ms below the chord).
        let slight = |x: f64| 20.0 + 0.05 * x * (1.0 + 2.0 * (x - 1.0) / 2000.0);
        assert_eq!(PromptFit::fit(calls(slight)).unwrap().slowdown_per_1k, 0.0);
    }

    #[test]
    fn a_few_stalled_eighths_do_not_tilt_the_robust_line() {
        // Gaps of 0.5 ms + 1 ms per 1,000 tokens of context, 32 eighths of calls; two of the
        // last ones stalled to 10 ms. Least squares tilts (a slope several times the true one);
        // Theil-Sen keeps it.
        let mut pts: Vec<(f64, f64)> =
            (0..32).map(|i| (20.0 + (i % 8) as f64 * 12.0, 0.5 + (20.0 + (i % 8) as f64 * 12.0) / 1000.0)).collect();
        pts[7].1 = 10.0;
        pts[15].1 = 10.0;
        let (a, b, _) = robust_rising_line(&pts).unwrap();
        assert!((a - 0.5).abs() < 0.01 && (b - 0.001).abs() < 2e-4, "{a} {b}");
        let (_, ls, _) = rising_line(&pts).unwrap();
        assert!(ls > 0.01, "least squares tilts: {ls}");
        assert_eq!(robust_rising_line(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None, "no spread in x");
    }

    #[test]
    fn the_batch_penalty_explains_the_relative_speeds() {
        let p = 0.3;
        let rel: Vec<(usize, f64)> = (2..=4).map(|k| (k, 1.0 / (1.0 + p * (k - 1) as f64))).collect();
        assert!((fit_batch_penalty(&rel, 0.0).unwrap() - p).abs() < 1e-9);
        assert_eq!(fit_batch_penalty(&[(2, 1.1)], 0.0), Some(0.0), "faster together is no penalty, not a negative one");
        assert_eq!(fit_batch_penalty(&[], 0.0), None);
        // With attention: the CPU build's 1,000-token calls (x = 1.7 at a mean context of 500)
        // ran at 0.63, 0.42 and 0.32 of solo speed beside 1, 2 and 3 others: p near 0.2, where
        // without the attention term it reads 0.65.
        let cpu = [(2, 0.63), (3, 0.42), (4, 0.32)];
        let with = fit_batch_penalty(&cpu, 1.7).unwrap();
        assert!((0.1..0.3).contains(&with), "{with}");
        assert!(fit_batch_penalty(&cpu, 0.0).unwrap() > 0.6);
        // Recovered from speeds the model itself gives.
        let dev = sim_ollama::advanced::trace::DeviceSharing {
            batch_penalty: 0.4,
            cross_process_efficiency: 1.0,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        };
        let made: Vec<(usize, f64)> = (2..=5).map(|k| (k, dev.speed(k, 1, 2.5))).collect();
        assert!((fit_batch_penalty(&made, 2.5).unwrap() - 0.4).abs() < 1e-9);
        // The same speeds read as attention batching beside the fitted p: nothing left over.
        assert!(fit_attention_batch_penalty(&made, 2.5, 0.4).unwrap().abs() < 1e-9);
        // Speeds made with attention dearer per stream are read back so.
        let dear = sim_ollama::advanced::trace::DeviceSharing { attention_batch_penalty: 0.05, ..dev };
        let made: Vec<(usize, f64)> = (2..=5).map(|k| (k, dear.speed(k, 1, 2.5))).collect();
        assert!((fit_attention_batch_penalty(&made, 2.5, 0.4).unwrap() - 0.05).abs() < 1e-9);
        assert_eq!(fit_attention_batch_penalty(&made, 0.0, 0.4), None, "no attention, nothing to fit");
    }

    #[test]
    fn servers_that_slow_each_other_share_a_device() {
        assert_eq!(fit_sharing(0.98, 2), None);
        assert!((fit_sharing(0.62, 2).unwrap() - 1.24).abs() < 1e-9);
        assert!((fit_sharing(0.39, 2).unwrap() - 0.78).abs() < 1e-9);
    }
}
