//! Back-pressure on one etcd session: how many of its writes are at the server at once, adapted to how fast
//! they come back (additive increase, multiplicative decrease on latency, as TCP does on loss).
//!
//! etcd answers a keep-alive only once it has applied every entry committed when the keep-alive arrived, and
//! gives up after a second ("waiting for the applied index took too long"). So requests sent faster than etcd
//! applies them delay every session's keep-alives, and the leases lapse. Each store backing off on its own
//! keeps the server's queue short for all of them: a slow answer means the queue is long, whoever sent it.
//!
//! # Contract
//!
//! * At most `limit` writes of this store (requests that are not idempotent, [`super::Inner::call`]) are at the
//!   server at once; the others wait in arrival order. Reads do not wait: they add nothing to apply, and
//!   limiting them starved a new leader's load (its reads of 1,000 reports timed out after 30 s behind a
//!   limit cut to 2 at 1,000 brokers × 100,000 bundles).
//! * The limit starts at [`INITIAL`]. It grows by one for every `limit` answers that came within [`TARGET`],
//!   up to [`MAX`], and is halved, down to [`MIN`], when an answer took longer or a request failed, at most
//!   once per [`TARGET`] (the answers of requests sent before a cut would otherwise cut it again).
//! * Keep-alives and the watch stream are streams of their own and never wait here.
//!
//! At 1,000 brokers × 100,000 bundles on etcd (one run each): without it, the full restart lost 147 sessions
//! and took 96.7 s; with every request limited, none, but a new leader's reads waited up to 30 s; with writes
//! limited, none, and the restart took 63.4 s.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// Requests in flight allowed at first.
pub(super) const INITIAL: usize = 64;
/// The fewest requests in flight the limit goes down to.
pub(super) const MIN: usize = 2;
/// The most requests in flight the limit goes up to.
pub(super) const MAX: usize = 1024;
/// An answer slower than this halves the limit: a quarter of the second after which etcd fails a keep-alive
/// that waits for the applied index.
pub(super) const TARGET: Duration = Duration::from_millis(250);

/// The limit of one store; see the module docs.
#[derive(Debug)]
pub(super) struct Throttle {
    permits: Semaphore,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    limit: usize,
    /// Fractions of a step up earned by fast answers.
    growth: f64,
    /// Permits to take out of circulation as they come back (after a cut).
    debt: usize,
    last_cut: Option<Instant>,
}

/// One request's place at the server; hand it back with [`Ticket::done`]. Dropped without it (the request
/// was abandoned), it counts as a slow answer.
pub(super) struct Ticket<'a> {
    throttle: &'a Throttle,
    permit: Option<SemaphorePermit<'a>>,
    sent: Instant,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            permits: Semaphore::new(INITIAL),
            state: Mutex::new(State {
                limit: INITIAL,
                growth: 0.0,
                debt: 0,
                last_cut: None,
            }),
        }
    }
}

impl Throttle {
    /// Waits for a place; the request is timed from the moment it has one.
    pub(super) async fn acquire(&self) -> Ticket<'_> {
        let permit = self
            .permits
            .acquire()
            .await
            .expect("the throttle's semaphore is never closed");
        Ticket {
            throttle: self,
            permit: Some(permit),
            sent: Instant::now(),
        }
    }

    /// The current limit.
    #[cfg(test)]
    fn limit(&self) -> usize {
        self.state.lock().unwrap().limit
    }

    fn settle(&self, permit: SemaphorePermit<'_>, elapsed: Duration, ok: bool, now: Instant) {
        let mut st = self.state.lock().unwrap();
        if !ok || elapsed > TARGET {
            if st
                .last_cut
                .map_or(true, |t| now.duration_since(t) >= TARGET)
            {
                let cut = (st.limit / 2).max(MIN);
                st.debt += st.limit - cut;
                st.limit = cut;
                st.growth = 0.0;
                st.last_cut = Some(now);
            }
        } else if st.limit < MAX {
            st.growth += 1.0 / st.limit as f64;
            if st.growth >= 1.0 {
                st.growth -= 1.0;
                st.limit += 1;
                if st.debt > 0 {
                    st.debt -= 1;
                } else {
                    self.permits.add_permits(1);
                }
            }
        }
        if st.debt > 0 {
            st.debt -= 1;
            permit.forget();
        }
    }
}

impl Ticket<'_> {
    /// The place is handed back unused (nothing was sent): the limit does not change.
    pub(super) fn unused(mut self) {
        drop(self.permit.take());
    }

    /// The request is answered (`ok`: without an error).
    pub(super) fn done(mut self, ok: bool) {
        if let Some(permit) = self.permit.take() {
            self.throttle
                .settle(permit, self.sent.elapsed(), ok, Instant::now());
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.throttle
                .settle(permit, self.sent.elapsed(), false, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settles one request of `throttle` as if it had taken `elapsed`, at `now`.
    fn answer(throttle: &Throttle, elapsed: Duration, ok: bool, now: Instant) {
        let permit = throttle.permits.try_acquire().expect("a place is free");
        throttle.settle(permit, elapsed, ok, now);
    }

    fn in_circulation(throttle: &Throttle) -> usize {
        throttle.permits.available_permits()
    }

    /// With nothing in flight, the places in circulation less those still owed are the limit.
    fn assert_consistent(throttle: &Throttle) {
        let st = throttle.state.lock().unwrap();
        assert_eq!(in_circulation(throttle) - st.debt, st.limit);
    }

    #[test]
    fn fast_answers_raise_the_limit_by_one_per_round() {
        let t = Throttle::default();
        let now = Instant::now();
        for _ in 0..INITIAL {
            answer(&t, Duration::from_millis(5), true, now);
        }
        assert_eq!(t.limit(), INITIAL + 1);
        assert_eq!(in_circulation(&t), INITIAL + 1);
    }

    #[test]
    fn a_slow_answer_or_a_failure_halves_it_once_per_target() {
        let t = Throttle::default();
        let now = Instant::now();
        answer(&t, TARGET * 2, true, now);
        assert_eq!(t.limit(), INITIAL / 2);
        // The other answers of the same burst do not cut again.
        answer(&t, TARGET * 2, true, now + TARGET / 2);
        answer(&t, Duration::from_millis(1), false, now + TARGET / 2);
        assert_eq!(t.limit(), INITIAL / 2);
        answer(&t, Duration::from_millis(1), false, now + TARGET);
        assert_eq!(t.limit(), INITIAL / 4);
        assert_consistent(&t);
        let mut later = now + TARGET;
        for _ in 0..10 {
            later += TARGET;
            answer(&t, TARGET * 3, true, later);
            assert_consistent(&t);
        }
        assert_eq!(t.limit(), MIN);
        // Places leave circulation as they come back, until no more is owed.
        for _ in 0..INITIAL {
            answer(&t, TARGET * 3, true, later);
        }
        assert_eq!(in_circulation(&t), MIN);
        assert_consistent(&t);
    }

    #[tokio::test]
    async fn requests_past_the_limit_wait_for_a_place() {
        let t = Throttle::default();
        let held: Vec<Ticket<'_>> =
            futures::future::join_all((0..INITIAL).map(|_| t.acquire())).await;
        let waiting = tokio::time::timeout(Duration::from_millis(50), t.acquire()).await;
        assert!(waiting.is_err(), "a request past the limit got a place");
        for ticket in held {
            ticket.done(true);
        }
        let ticket = tokio::time::timeout(Duration::from_millis(50), t.acquire())
            .await
            .expect("a place after the others came back");
        // Dropped unanswered: counts as slow.
        drop(ticket);
        assert_eq!(t.limit(), INITIAL / 2);
    }
}
