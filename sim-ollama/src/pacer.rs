//! Paces a stream against absolute deadlines. Step 0 is the end of prompt evaluation, step
//! `i >= 1` is token `i`. Each step's deadline is where the device says the stream's
//! cumulative work ends, so delays never accumulate: a late token does not delay the next.

use crate::device::Member;
use crate::latency::Timing;
use crate::metrics::Lateness;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::time::Sleep;

/// A step that has happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    /// 0 = prompt evaluated, `i` = token `i` emitted.
    pub(crate) index: usize,
    /// When it happened.
    pub(crate) at: Instant,
    /// Its offset in the intended (solo) schedule from the start of prompt evaluation.
    pub(crate) intended: Duration,
}

#[derive(Debug)]
pub(crate) struct Pacer {
    member: Member,
    timing: Timing,
    /// Cumulative solo work at the end of the next step.
    target: Duration,
    next: usize,
    steps: usize,
    sleep: Pin<Box<Sleep>>,
    armed: Option<Instant>,
    lateness: Arc<Lateness>,
}

impl Pacer {
    /// A pacer for `tokens` tokens, starting now (the member has just joined its batch).
    pub(crate) fn new(member: Member, timing: Timing, tokens: usize, lateness: Arc<Lateness>) -> Pacer {
        let target = timing.prompt;
        let start = member.joined;
        Pacer {
            member,
            timing,
            target,
            next: 0,
            steps: tokens + 1,
            sleep: Box::pin(tokio::time::sleep_until(start.into())),
            armed: None,
            lateness,
        }
    }

    /// Polls for the next step.
    pub(crate) fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Step>> {
        if self.next >= self.steps {
            return Poll::Ready(None);
        }
        loop {
            let deadline = self.member.deadline(self.target);
            let now = Instant::now();
            if deadline <= now {
                // Tokens are counted for lateness; the prompt step is not a token.
                if self.next > 0 {
                    self.lateness.record(now - deadline);
                }
                let step = Step { index: self.next, at: now, intended: self.target };
                self.next += 1;
                if self.next < self.steps {
                    self.target += self.timing.next_gap();
                }
                return Poll::Ready(Some(step));
            }
            if self.armed != Some(deadline) {
                self.sleep.as_mut().reset(deadline.into());
                self.armed = Some(deadline);
            }
            self.member.wake_on_speedup(cx.waker());
            match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => continue,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Waits for the next step.
    pub(crate) async fn step(&mut self) -> Option<Step> {
        std::future::poll_fn(|cx| self.poll_step(cx)).await
    }

    /// The stream's current speed as a fraction of its solo speed.
    pub(crate) fn speed(&self) -> f64 {
        self.member.speed()
    }
}
