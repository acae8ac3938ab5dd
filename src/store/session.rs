//! The session bookkeeping that the ZooKeeper and the etcd backends share: whether the store is connected,
//! whether it has announced the session lost, the send time of the last request the server acknowledged,
//! and the [`SessionEvent`]s that follow from changes of these.
//!
//! # Contract
//!
//! * **The deadline rule.** A session counts as lost [`lost_after`] (9/10 of the session timeout, in whole
//!   milliseconds, rounded down) after the *send time* of the last request the server answered within the
//!   session (a ZooKeeper probe, an etcd keep-alive the server acknowledged with a live lease): the server
//!   heard from the session after that moment, so it cannot expire it before that moment + the timeout.
//!   Hosts stop serving at that instant through their leases ([`SessionValidity`], read from the clock, not
//!   from this type's events), so a broker cut off from the store has stopped at least 1/10 of the timeout
//!   before the server can hand its ephemerals to someone else. [`SessionState::acknowledged`] only ever
//!   moves that moment forward.
//! * **Terms.** Every session the store establishes (or finds again after declaring it lost) is a new term
//!   with its own [`SessionValidity`]; declaring the session lost ends the term, and with it every handle
//!   taken in it.
//! * **Events, once per change.** `ConnectionLost` is sent when the store goes from connected to
//!   disconnected, `SessionLost` when it first declares the session lost, `Reconnected` when it is connected
//!   again (followed by `SessionReestablished` if `SessionLost` was sent meanwhile); repeated reports of the
//!   same state send nothing. [`SessionState::reestablished`] announces a new session.
//! * [`SessionState::is_up`] (connected and the session not lost) is what `MetadataStore::is_connected`
//!   reports, besides the store not being closed.
//!
//! This type knows no client crate; each backend decides when its client's state means one of these changes
//! (see the session sections of `zookeeper` and `etcd`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::fanout::Fanout;
pub(crate) use super::validity::lost_after;
use super::validity::{SessionValidity, Term};
use super::{SessionEvent, SessionEventStream};

/// Connection and session flags of one store, with the subscribers of its session events; see the module
/// docs.
#[derive(Debug)]
pub(crate) struct SessionState {
    events: Fanout<SessionEvent>,
    connected: AtomicBool,
    lost: AtomicBool,
    /// The current term: the send time of the last request the server answered in it, its deadline, and
    /// whether it ended.
    term: Mutex<Arc<Term>>,
}

impl SessionState {
    /// A state that starts `connected` (or not), with the session not lost, the last acknowledgement now and
    /// no deadline until [`SessionState::set_timeout`].
    pub(crate) fn new(connected: bool) -> SessionState {
        SessionState {
            events: Fanout::default(),
            connected: AtomicBool::new(connected),
            lost: AtomicBool::new(false),
            term: Mutex::new(Term::new(None)),
        }
    }

    fn term(&self) -> Arc<Term> {
        self.term.lock().unwrap().clone()
    }

    /// Sets the session timeout the deadline follows (the negotiated one; [`lost_after`] of it).
    pub(crate) fn set_timeout(&self, timeout: Duration) {
        self.term().set_lifetime(Some(lost_after(timeout)));
    }

    /// The validity of the current term (see [`SessionValidity`]).
    pub(crate) fn validity(&self) -> SessionValidity {
        SessionValidity::of(&self.term())
    }

    /// Starts a new term, acknowledged now, with the lifetime of the last one, unless the current one is
    /// still running.
    fn renew_term(&self) {
        let mut term = self.term.lock().unwrap();
        if term.is_ended() {
            *term = Term::new(term.lifetime());
        }
    }

    /// A new subscriber of the session events.
    pub(crate) fn subscribe(&self) -> SessionEventStream {
        self.events.subscribe("")
    }

    /// Ends every session event stream (the store is closed).
    pub(crate) fn close_streams(&self) {
        self.events.close();
    }

    /// Connected, and the session not announced lost.
    pub(crate) fn is_up(&self) -> bool {
        self.connected.load(Ordering::SeqCst) && !self.lost.load(Ordering::SeqCst)
    }

    /// Whether the store holds a connection now (whatever the session).
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// The server answered a request sent at `sent`; an earlier send time than the one recorded changes
    /// nothing.
    pub(crate) fn acknowledged(&self, sent: Instant) {
        self.term().acknowledged(sent);
    }

    /// The server answered just now (the session was established or found again on a new connection).
    pub(crate) fn acknowledged_now(&self) {
        self.acknowledged(Instant::now());
    }

    /// When the session counts as lost if nothing more is acknowledged (see [`lost_after`]).
    pub(crate) fn lost_at(&self, timeout: Duration) -> Instant {
        self.term().last_acknowledged() + lost_after(timeout)
    }

    /// The time since the last acknowledgement, if it has reached [`lost_after`] of `timeout`.
    pub(crate) fn overdue(&self, timeout: Duration) -> Option<Duration> {
        let since = self.term().last_acknowledged().elapsed();
        (since >= lost_after(timeout)).then_some(since)
    }

    /// The connection dropped: sends `ConnectionLost` and returns true if the store was connected.
    pub(crate) fn connection_lost(&self) -> bool {
        let was = self.connected.swap(false, Ordering::SeqCst);
        if was {
            self.events.send(&SessionEvent::ConnectionLost);
        }
        was
    }

    /// The session is declared lost: ends the term (every validity taken in it turns invalid at once), sends
    /// `SessionLost` and returns true unless it was already.
    pub(crate) fn session_lost(&self) -> bool {
        self.term().end();
        let first = !self.lost.swap(true, Ordering::SeqCst);
        if first {
            self.events.send(&SessionEvent::SessionLost);
        }
        first
    }

    /// Both at once (the session ended or its deadline passed): `ConnectionLost` if still connected, then
    /// `SessionLost` unless already sent.
    pub(crate) fn lost(&self) {
        self.connection_lost();
        self.session_lost();
    }

    /// A connection is back in the same session: sends `Reconnected` and returns true if the store was
    /// disconnected, followed by `SessionReestablished` (and a new term) if `SessionLost` was sent meanwhile.
    pub(crate) fn reconnected(&self) -> bool {
        let was_down = !self.connected.swap(true, Ordering::SeqCst);
        if was_down {
            if self.lost.load(Ordering::SeqCst) {
                self.renew_term();
            }
            self.events.send(&SessionEvent::Reconnected);
            if self.lost.swap(false, Ordering::SeqCst) {
                self.events.send(&SessionEvent::SessionReestablished);
            }
        }
        was_down
    }

    /// A new session is in place: connected, not lost, a new term if the last one ended (no event; see
    /// [`SessionState::reestablished`]).
    pub(crate) fn mark_up(&self) {
        self.renew_term();
        self.connected.store(true, Ordering::SeqCst);
        self.lost.store(false, Ordering::SeqCst);
    }

    /// The store lets go of its connection (it is closed; no event). The term ends: nothing of this session
    /// can be trusted any more.
    pub(crate) fn mark_down(&self) {
        self.term().end();
        self.connected.store(false, Ordering::SeqCst);
    }

    /// Announces a new session, once its state is restored: `Reconnected`, `SessionReestablished`.
    pub(crate) fn reestablished(&self) {
        self.events.send(&SessionEvent::Reconnected);
        self.events.send(&SessionEvent::SessionReestablished);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(stream: &mut SessionEventStream) -> Vec<SessionEvent> {
        std::iter::from_fn(|| stream.try_next()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_counts_from_the_latest_acknowledged_send_time() {
        let s = SessionState::new(true);
        let start = Instant::now();
        let timeout = Duration::from_secs(10);
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(9));
        s.acknowledged(start + Duration::from_secs(2));
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(11));
        // An answer to an older request does not move the deadline back.
        s.acknowledged(start + Duration::from_secs(1));
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(11));
        tokio::time::advance(Duration::from_millis(10999)).await;
        assert_eq!(s.overdue(timeout), None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(s.overdue(timeout), Some(Duration::from_secs(9)));
        s.acknowledged_now();
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(20));
    }

    #[test]
    fn a_short_outage_is_connection_lost_then_reconnected_once_each() {
        let s = SessionState::new(true);
        let mut events = s.subscribe();
        assert!(s.is_up());
        assert!(s.connection_lost());
        assert!(!s.connection_lost());
        assert!(!s.is_up() && !s.is_connected());
        assert!(s.reconnected());
        assert!(!s.reconnected());
        assert!(s.is_up());
        assert_eq!(
            drain(&mut events),
            [SessionEvent::ConnectionLost, SessionEvent::Reconnected]
        );
    }

    #[test]
    fn a_long_outage_in_the_same_session_ends_with_session_reestablished() {
        let s = SessionState::new(true);
        let mut events = s.subscribe();
        let before = s.validity();
        s.connection_lost();
        assert!(before.is_valid(), "a lost connection alone ends no term");
        assert!(s.session_lost());
        assert!(!s.session_lost());
        assert!(!before.is_valid() && !s.validity().is_valid());
        s.reconnected();
        assert!(s.is_up());
        assert!(!before.is_valid(), "the old term stays ended");
        assert!(
            s.validity().is_valid(),
            "the session found again is a new term"
        );
        assert_eq!(
            drain(&mut events),
            [
                SessionEvent::ConnectionLost,
                SessionEvent::SessionLost,
                SessionEvent::Reconnected,
                SessionEvent::SessionReestablished
            ]
        );
    }

    #[test]
    fn a_new_session_is_announced_after_the_loss() {
        let s = SessionState::new(true);
        let mut events = s.subscribe();
        s.lost();
        s.lost();
        assert!(!s.is_up());
        s.mark_up();
        assert!(s.is_up());
        // Marking up sends nothing: the backend announces once the session's state is restored.
        assert_eq!(
            drain(&mut events),
            [SessionEvent::ConnectionLost, SessionEvent::SessionLost]
        );
        s.reestablished();
        assert_eq!(
            drain(&mut events),
            [
                SessionEvent::Reconnected,
                SessionEvent::SessionReestablished
            ]
        );
        // A loss while already disconnected sends only SessionLost.
        let s = SessionState::new(false);
        let mut events = s.subscribe();
        s.lost();
        assert_eq!(drain(&mut events), [SessionEvent::SessionLost]);
    }

    #[test]
    fn closing_ends_the_streams_and_marking_down_only_clears_connected() {
        let s = SessionState::new(true);
        let mut events = s.subscribe();
        s.mark_down();
        assert!(!s.is_connected());
        s.close_streams();
        s.session_lost();
        assert!(drain(&mut events).is_empty());
    }
}
