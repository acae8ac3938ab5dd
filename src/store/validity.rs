//! How long the current session of a store can be trusted: [`SessionValidity`], a cheap handle that answers
//! "may the server have expired this session by now?" from the monotonic clock alone, with no call to the
//! store.
//!
//! # Contract
//!
//! * A validity belongs to **one session term**: from the moment a session is established (or found again
//!   after the store declared it lost) until the store declares it lost. A new term never revives an old
//!   handle: leases handed out in a term stay invalid once it ends.
//! * Within a term, the handle is valid until [`lost_after`] of the session timeout after the *send time* of
//!   the last request the server answered in the session (see `store::session`). The server heard from the
//!   session after that send time, so it cannot expire the session before send time + timeout: when the
//!   handle turns invalid there is still a tenth of the timeout before anyone else can take the session's
//!   ephemerals. The check reads the clock, so a process that was paused (SIGSTOP, a long GC pause, a frozen
//!   VM whose monotonic clock kept running) sees the handle invalid the instant it resumes, before it handles
//!   anything else.
//! * A store without session deadlines (the in-memory store while connected) gives a handle that is valid
//!   until the term ends.
//!
//! The clock is tokio's (`tokio::time::Instant`: the monotonic clock, or virtual time in paused tests). A host
//! whose monotonic clock stops while the machine is suspended sees the suspension as no time at all; run
//! brokers where suspending means stopping.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// How long after the send time of the last acknowledged request a session counts as lost: 9/10 of
/// `timeout`, in whole milliseconds (rounded down).
pub(crate) fn lost_after(timeout: Duration) -> Duration {
    let millis = timeout.as_millis() * 9 / 10;
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// No deadline (the term lasts until it is ended).
const NO_DEADLINE: u64 = u64::MAX;

/// One session term, shared by the store's bookkeeping and every handle given out in it.
#[derive(Debug)]
pub(crate) struct Term {
    origin: Instant,
    /// Send time of the last acknowledged request, ns after `origin`.
    acknowledged_ns: AtomicU64,
    /// How long after that the term counts as lost, ns; [`NO_DEADLINE`] for none.
    lifetime_ns: AtomicU64,
    ended: AtomicBool,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
}

impl Term {
    /// A term whose last acknowledgement is now, with `lifetime` (`None`: no deadline).
    pub(crate) fn new(lifetime: Option<Duration>) -> Arc<Term> {
        Arc::new(Term {
            origin: Instant::now(),
            acknowledged_ns: AtomicU64::new(0),
            lifetime_ns: AtomicU64::new(lifetime.map_or(NO_DEADLINE, nanos)),
            ended: AtomicBool::new(false),
        })
    }

    /// The server answered a request sent at `sent`; an earlier send time than the one recorded changes
    /// nothing.
    pub(crate) fn acknowledged(&self, sent: Instant) {
        let at = nanos(sent.saturating_duration_since(self.origin));
        self.acknowledged_ns.fetch_max(at, Ordering::SeqCst);
    }

    /// Sets how long after the last acknowledgement the term counts as lost (`None`: no deadline).
    pub(crate) fn set_lifetime(&self, lifetime: Option<Duration>) {
        self.lifetime_ns
            .store(lifetime.map_or(NO_DEADLINE, nanos), Ordering::SeqCst);
    }

    /// The lifetime set last (`None`: no deadline).
    pub(crate) fn lifetime(&self) -> Option<Duration> {
        match self.lifetime_ns.load(Ordering::SeqCst) {
            NO_DEADLINE => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// The send time of the last acknowledged request.
    pub(crate) fn last_acknowledged(&self) -> Instant {
        self.origin + Duration::from_nanos(self.acknowledged_ns.load(Ordering::SeqCst))
    }

    /// When the term counts as lost if nothing more is acknowledged; `None` without a deadline.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.lifetime().map(|l| self.last_acknowledged() + l)
    }

    /// Ends the term (the store declared the session lost); true the first time.
    pub(crate) fn end(&self) -> bool {
        !self.ended.swap(true, Ordering::SeqCst)
    }

    /// Whether the term was ended.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

/// Whether a store's session, as it was when this handle was taken, can still be trusted; see the module
/// docs. Cheap to clone and to check (two atomic loads and a clock read).
#[derive(Debug, Clone)]
pub struct SessionValidity {
    term: Arc<Term>,
}

impl SessionValidity {
    pub(crate) fn of(term: &Arc<Term>) -> SessionValidity {
        SessionValidity { term: term.clone() }
    }

    /// A validity that never ends (for hosts driven without a store, and tests).
    pub fn unbounded() -> SessionValidity {
        SessionValidity {
            term: Term::new(None),
        }
    }

    /// True while the term has not ended and its deadline (if any) has not passed.
    pub fn is_valid(&self) -> bool {
        !self.term.is_ended() && self.valid_until().map_or(true, |d| Instant::now() < d)
    }

    /// The instant the handle turns invalid if the server answers nothing more; `None` without a deadline
    /// (the handle then turns invalid only when the term ends).
    pub fn valid_until(&self) -> Option<Instant> {
        self.term.deadline()
    }

    /// Whether the term was ended (the store declared the session lost).
    pub fn is_ended(&self) -> bool {
        self.term.is_ended()
    }

    /// Ends the term now: every clone turns invalid at once. For the in-memory store's expiry and tests.
    pub fn end(&self) {
        self.term.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_after_is_nine_tenths_in_whole_milliseconds() {
        assert_eq!(
            lost_after(Duration::from_secs(10)),
            Duration::from_millis(9000)
        );
        assert_eq!(
            lost_after(Duration::from_millis(4001)),
            Duration::from_millis(3600)
        );
        assert_eq!(lost_after(Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handle_turns_invalid_at_the_deadline_and_stays_so_when_the_term_ends() {
        let term = Term::new(Some(Duration::from_secs(9)));
        let v = SessionValidity::of(&term);
        let start = Instant::now();
        assert_eq!(v.valid_until(), Some(start + Duration::from_secs(9)));
        tokio::time::advance(Duration::from_secs(5)).await;
        term.acknowledged(start + Duration::from_secs(4));
        // An older answer does not move it back.
        term.acknowledged(start + Duration::from_secs(1));
        assert_eq!(v.valid_until(), Some(start + Duration::from_secs(13)));
        tokio::time::advance(Duration::from_millis(7999)).await;
        assert!(v.is_valid());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!v.is_valid(), "at the deadline the handle is invalid");
        // An answer after the deadline (the server was reached again) revives the same term...
        term.acknowledged(Instant::now());
        assert!(v.is_valid());
        // ...until the store ends it; then nothing revives it.
        assert!(term.end());
        assert!(!term.end());
        term.acknowledged(Instant::now());
        assert!(!v.is_valid() && v.is_ended());
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_deadline_only_the_end_counts() {
        let v = SessionValidity::unbounded();
        tokio::time::advance(Duration::from_secs(86_400)).await;
        assert!(v.is_valid());
        assert_eq!(v.valid_until(), None);
        let clone = v.clone();
        v.end();
        assert!(!clone.is_valid());
    }
}
