//! Interval arithmetic over the requests (how many were in flight, idle time, unions) and how
//! the judge writes its figures (seconds, percentages, plurals).

/// Sweeps intervals: (max overlap, share of busy time with 2+, idle, longest gap, profile).
pub(super) fn sweep(iv: &[(u64, u64)]) -> (usize, f64, u64, u64, Vec<(f64, usize)>) {
    let mut ev: Vec<(u64, i32)> = iv.iter().flat_map(|(a, b)| [(*a, 1), (*b.max(a), -1)]).collect();
    // Ends before starts at the same instant: touching intervals do not overlap.
    ev.sort();
    let t0 = ev.first().map_or(0, |e| e.0);
    let (mut cur, mut max, mut last) = (0i64, 0i64, t0);
    let (mut busy, mut multi, mut idle, mut gap) = (0u64, 0u64, 0u64, 0u64);
    let mut profile: Vec<(f64, usize)> = Vec::new();
    for (t, d) in ev {
        let dt = t - last;
        if cur >= 1 {
            busy += dt;
        } else {
            idle += dt;
            gap = gap.max(dt);
        }
        if cur >= 2 {
            multi += dt;
        }
        cur += i64::from(d);
        max = max.max(cur);
        last = t;
        let at = secs(t - t0);
        if profile.last().is_some_and(|(pt, _)| (*pt - at).abs() < 1e-9) {
            profile.pop();
        }
        profile.push((at, cur.max(0) as usize));
    }
    let overlap = if busy > 0 { multi as f64 / busy as f64 } else { 0.0 };
    (max.max(0) as usize, overlap, idle, gap, profile)
}

/// Length of the union of intervals.
pub(super) fn union_len(mut iv: Vec<(u64, u64)>) -> u64 {
    iv.sort();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for (a, b) in iv {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// Intervals `(start, end, id)` merged where they overlap: each cluster's start, end and its
/// members' ids, in start order.
pub(super) fn clusters(mut iv: Vec<(u64, u64, usize)>) -> Vec<(u64, u64, Vec<usize>)> {
    iv.sort_unstable();
    let mut out: Vec<(u64, u64, Vec<usize>)> = Vec::new();
    for (start, end, id) in iv {
        match out.last_mut() {
            Some(c) if start < c.1 => {
                c.1 = c.1.max(end);
                c.2.push(id);
            }
            _ => out.push((start, end, vec![id])),
        }
    }
    out
}

/// Microseconds as seconds.
pub(super) fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// A share as a whole percentage.
pub(super) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// `n` and the word for one or many.
pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The median, the mean of the two middle values of an even count.
pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}
