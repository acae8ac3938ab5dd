//! The session bookkeeping that the ZooKeeper and the etcd backends share: whether the store is connected,
//! whether it has announced the session lost, the send time of the last request the server acknowledged,
//! and the [`SessionEvent`]s that follow from changes of these.
//!
//! # Contract
//!
//! * **The deadline rule.** A session counts as lost [`lost_after`] (5/6 of the session timeout, in whole
//!   milliseconds, rounded down) after the *send time* of the last request the server answered within the
//!   session (a ZooKeeper probe, an etcd keep-alive the server acknowledged with a live lease): the server
//!   heard from the session after that moment, so it cannot expire it before that moment + the timeout, and a
//!   broker cut off from the store hears `SessionLost` at least 1/6 of the timeout before the server can hand
//!   its ephemerals to someone else. [`SessionState::acknowledged`] only ever moves that moment forward.
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
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::fanout::Fanout;
use super::{SessionEvent, SessionEventStream};

/// How long after the send time of the last acknowledged request the session counts as lost: 5/6 of
/// `timeout`, in whole milliseconds (rounded down).
pub(crate) fn lost_after(timeout: Duration) -> Duration {
    let millis = timeout.as_millis() * 5 / 6;
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// Connection and session flags of one store, with the subscribers of its session events; see the module
/// docs.
#[derive(Debug)]
pub(crate) struct SessionState {
    events: Fanout<SessionEvent>,
    connected: AtomicBool,
    lost: AtomicBool,
    /// Send time of the last request the server answered in the current session.
    acknowledged: Mutex<Instant>,
}

impl SessionState {
    /// A state that starts `connected` (or not), with the session not lost and the last acknowledgement now.
    pub(crate) fn new(connected: bool) -> SessionState {
        SessionState {
            events: Fanout::default(),
            connected: AtomicBool::new(connected),
            lost: AtomicBool::new(false),
            acknowledged: Mutex::new(Instant::now()),
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
        let mut last = self.acknowledged.lock().unwrap();
        *last = (*last).max(sent);
    }

    /// The server answered just now (the session was established or found again on a new connection).
    pub(crate) fn acknowledged_now(&self) {
        self.acknowledged(Instant::now());
    }

    /// When the session counts as lost if nothing more is acknowledged (see [`lost_after`]).
    pub(crate) fn lost_at(&self, timeout: Duration) -> Instant {
        *self.acknowledged.lock().unwrap() + lost_after(timeout)
    }

    /// The time since the last acknowledgement, if it has reached [`lost_after`] of `timeout`.
    pub(crate) fn overdue(&self, timeout: Duration) -> Option<Duration> {
        let since = self.acknowledged.lock().unwrap().elapsed();
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

    /// The session is declared lost: sends `SessionLost` and returns true unless it was already.
    pub(crate) fn session_lost(&self) -> bool {
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
    /// disconnected, followed by `SessionReestablished` if `SessionLost` was sent meanwhile.
    pub(crate) fn reconnected(&self) -> bool {
        let was_down = !self.connected.swap(true, Ordering::SeqCst);
        if was_down {
            self.events.send(&SessionEvent::Reconnected);
            if self.lost.swap(false, Ordering::SeqCst) {
                self.events.send(&SessionEvent::SessionReestablished);
            }
        }
        was_down
    }

    /// A new session is in place: connected, not lost (no event; see [`SessionState::reestablished`]).
    pub(crate) fn mark_up(&self) {
        self.connected.store(true, Ordering::SeqCst);
        self.lost.store(false, Ordering::SeqCst);
    }

    /// The store lets go of its connection (it is closed; no event).
    pub(crate) fn mark_down(&self) {
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

    #[test]
    fn lost_after_is_five_sixths_in_whole_milliseconds() {
        assert_eq!(
            lost_after(Duration::from_secs(6)),
            Duration::from_millis(5000)
        );
        assert_eq!(
            lost_after(Duration::from_secs(2)),
            Duration::from_millis(1666)
        );
        assert_eq!(
            lost_after(Duration::from_millis(5000)),
            Duration::from_millis(4166)
        );
        assert_eq!(lost_after(Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_counts_from_the_latest_acknowledged_send_time() {
        let s = SessionState::new(true);
        let start = Instant::now();
        let timeout = Duration::from_secs(6);
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(5));
        s.acknowledged(start + Duration::from_secs(2));
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(7));
        // An answer to an older request does not move the deadline back.
        s.acknowledged(start + Duration::from_secs(1));
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(7));
        tokio::time::advance(Duration::from_millis(6999)).await;
        assert_eq!(s.overdue(timeout), None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(s.overdue(timeout), Some(Duration::from_secs(5)));
        s.acknowledged_now();
        assert_eq!(s.lost_at(timeout), start + Duration::from_secs(12));
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
        s.connection_lost();
        assert!(s.session_lost());
        assert!(!s.session_lost());
        s.reconnected();
        assert!(s.is_up());
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
