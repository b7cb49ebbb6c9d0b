//! Paces a stream against absolute deadlines. Step 0 is the end of the unaccounted overhead,
//! step 1 the end of prompt evaluation, step `i >= 2` is token `i - 1`. Each step's deadline is where the device says the stream's
//! cumulative work ends, so delays never accumulate: a late token does not delay the next.

use crate::device::Member;
use crate::latency::Timing;
use crate::metrics::Lateness;
use crate::timer::Timer;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A step that has happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    /// 0 = overhead over, 1 = prompt evaluated, `i >= 2` = token `i - 1` emitted.
    pub(crate) index: usize,
    /// When it happened.
    pub(crate) at: Instant,
    /// Its offset in the intended (solo) schedule from the moment the stream got its slot.
    pub(crate) intended: Duration,
    /// When it was due (`at` is later when the step was late).
    pub(crate) due: Instant,
}

#[derive(Debug)]
pub(crate) struct Pacer {
    member: Member,
    timing: Timing,
    /// Cumulative solo work at the end of the next step.
    target: Duration,
    next: usize,
    steps: usize,
    timer: Arc<Timer>,
    /// The deadline armed in the timer, the waker it will wake, and the timer entry's id.
    armed: Option<(Instant, std::task::Waker, u64)>,
    /// The waker the device wakes on a speed-up (registered once, again if it changes).
    speedup_waker: Option<std::task::Waker>,
    lateness: Arc<Lateness>,
    /// Lateness samples not yet added to the shared histogram (one lock per batch).
    late: Vec<Duration>,
    /// Added to every deadline (injected stalls).
    delay: Duration,
    /// Taken from every deadline: how long before joining its batch the stream had its slot
    /// in the modelled timeline (the simulator was late to handle its request), at most the
    /// time before its first token.
    head_start: Duration,
    /// The gap before the first token, drawn when the pacer was made.
    first_gap: Option<Duration>,
}

/// Lateness samples are added to the shared histogram this many at a time.
const LATE_BATCH: usize = 64;

impl Pacer {
    /// A pacer for `tokens` tokens. The schedule starts at `start`: now, when the member has
    /// just joined its batch, or earlier, when the request had its slot (in the modelled
    /// timeline) before the simulator got round to it. That head start is taken from the time
    /// before the first token only: the first token is due no earlier than now, so the
    /// simulator's own delay is absorbed by the wait for it when there is room, and otherwise
    /// shifts the stream, never crowding the gaps between its tokens (a stream that started
    /// late does not catch up in a burst the real server would never send).
    pub(crate) fn new(
        mut member: Member,
        start: Instant,
        mut timing: Timing,
        tokens: usize,
        timer: Arc<Timer>,
        lateness: Arc<Lateness>,
    ) -> Pacer {
        // The first gap is drawn now, in the order it always was (it is the first draw).
        let first_gap = (tokens > 0).then(|| timing.next_gap());
        let before_first = timing.overhead + timing.prompt + first_gap.unwrap_or_default();
        let room = member.deadline(before_first).saturating_duration_since(member.joined);
        let head_start = member.joined.saturating_duration_since(start).min(room);
        let target = timing.overhead;
        Pacer {
            member,
            timing,
            target,
            next: 0,
            steps: tokens + 2,
            timer,
            armed: None,
            speedup_waker: None,
            lateness,
            late: Vec::with_capacity(LATE_BATCH),
            delay: Duration::ZERO,
            head_start,
            first_gap,
        }
    }

    /// Polls for the next step.
    pub(crate) fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Step>> {
        if self.next >= self.steps {
            return Poll::Ready(None);
        }
        let deadline = self.member.deadline(self.target) + self.delay;
        let deadline = deadline.checked_sub(self.head_start).unwrap_or(deadline);
        let now = Instant::now();
        {
            // The timer wakes up to `SLACK` early; such a step is due.
            if deadline <= now + crate::timer::SLACK {
                // Tokens are counted for lateness; the first two steps are not tokens.
                if self.next > 1 {
                    self.late.push(now.saturating_duration_since(deadline));
                    if self.late.len() >= LATE_BATCH {
                        self.lateness.record_all(&self.late);
                        self.late.clear();
                    }
                }
                // An entry armed for a deadline that has come has fired, or fires within the
                // slack: forget it without the cost of cancelling it.
                if self.armed.as_ref().is_some_and(|(at, _, _)| *at <= now + crate::timer::SLACK) {
                    self.armed = None;
                }
                let step = Step { index: self.next, at: now, intended: self.target, due: deadline };
                self.next += 1;
                if self.next == 1 {
                    self.target += self.timing.prompt;
                } else if self.next < self.steps {
                    self.target += self.first_gap.take().unwrap_or_else(|| self.timing.next_gap());
                }
                return Poll::Ready(Some(step));
            }
            // Arm the timer once per deadline; a deadline that moved (the device got slower)
            // is armed again, and one that moved earlier is announced by the device.
            let armed = self.armed.as_ref().is_some_and(|(at, w, _)| *at == deadline && w.will_wake(cx.waker()));
            if !armed {
                if let Some((_, _, old)) = self.armed.take() {
                    self.timer.cancel(old);
                }
                let id = self.timer.wake_at(deadline, cx.waker());
                self.armed = Some((deadline, cx.waker().clone(), id));
            }
            if !self.speedup_waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                self.member.wake_on_speedup(cx.waker());
                self.speedup_waker = Some(cx.waker().clone());
            }
            Poll::Pending
        }
    }

    /// When the schedule starts: the member's join less its head start.
    pub(crate) fn start(&self) -> Instant {
        self.member.joined.checked_sub(self.head_start).unwrap_or(self.member.joined)
    }

    /// The intended offset of the next step (equal to the last step's when they fall at the
    /// same instant of the schedule: a zero-latency profile); none after the last step.
    pub(crate) fn next_intended(&self) -> Option<Duration> {
        (self.next < self.steps).then_some(self.target)
    }

    /// The stream's device membership.
    pub(crate) fn member(&self) -> &Member {
        &self.member
    }

    /// Leaves the device's batch once every step is out (the answer held by a probe run).
    pub(crate) fn retire(&mut self) {
        self.member.leave();
    }

    /// Shifts every later deadline by `d`.
    pub(crate) fn delay(&mut self, d: Duration) {
        // Bounded, so deadlines stay representable: a year is as good as forever here.
        self.delay = self.delay.saturating_add(d).min(Duration::from_secs(365 * 24 * 3600));
    }

    /// Waits for the next step.
    pub(crate) async fn step(&mut self) -> Option<Step> {
        std::future::poll_fn(|cx| self.poll_step(cx)).await
    }

    /// The stream's current speed as a fraction of its solo speed.
    pub(crate) fn speed(&mut self) -> f64 {
        self.member.speed()
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        if let Some((_, _, id)) = self.armed.take() {
            self.timer.cancel(id);
        }
        self.lateness.record_all(&self.late);
    }
}
