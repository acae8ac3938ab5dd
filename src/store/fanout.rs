//! Delivery of notifications and session events to subscribers: one unbounded queue per subscriber, so a
//! slow consumer never makes another miss events, and dropping a stream unsubscribes it.

use std::sync::Mutex;

use tokio::sync::mpsc;

use super::path::is_under;
use super::path::parent;
use super::{EventStream, NodeAfter, Notification, NotificationType};

/// Subscribers of one kind of event; `filter` is a path prefix for notifications and empty otherwise.
#[derive(Debug)]
pub(crate) struct Fanout<T> {
    subscribers: Mutex<Vec<(String, mpsc::UnboundedSender<T>)>>,
}

impl<T> Default for Fanout<T> {
    fn default() -> Self {
        Fanout {
            subscribers: Mutex::new(Vec::new()),
        }
    }
}

impl<T: Clone> Fanout<T> {
    /// A new subscriber with a filter (a path prefix, or `""`).
    pub(crate) fn subscribe(&self, filter: &str) -> EventStream<T> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers
            .lock()
            .unwrap()
            .push((filter.to_string(), tx));
        EventStream::new(rx)
    }

    /// Sends to every subscriber whose filter accepts the item, forgetting closed ones.
    pub(crate) fn send_filtered(&self, item: &T, accept: impl Fn(&str) -> bool) {
        self.subscribers.lock().unwrap().retain(|(filter, tx)| {
            if tx.is_closed() {
                return false;
            }
            if accept(filter) {
                tx.send(item.clone()).is_ok()
            } else {
                true
            }
        });
    }

    /// Sends to every subscriber.
    pub(crate) fn send(&self, item: &T) {
        self.send_filtered(item, |_| true);
    }

    /// Ends every stream.
    pub(crate) fn close(&self) {
        self.subscribers.lock().unwrap().clear();
    }
}

/// The notifications of one change of node `path`: the change itself and, for a creation or a deletion,
/// `ChildrenChanged` for its parent (none for a top-level node: Pulsar emits none for the root).
pub(crate) fn node_change(kind: NotificationType, path: &str) -> Vec<Notification> {
    let mut out = vec![Notification::new(kind, path)];
    if matches!(kind, NotificationType::Created | NotificationType::Deleted) {
        if let Some(p) = parent(path) {
            out.push(Notification::new(NotificationType::ChildrenChanged, p));
        }
    }
    out
}

impl Fanout<Notification> {
    /// Sends a notification to every subscriber whose prefix covers its path.
    pub(crate) fn notify(&self, notification: Notification) {
        let path = notification.path.clone();
        self.send_filtered(&notification, |prefix| is_under(&path, prefix));
    }

    /// Sends the notifications of one change of node `path` (see [`node_change`]).
    pub(crate) fn notify_change(&self, kind: NotificationType, path: &str) {
        self.notify_change_with(kind, path, NodeAfter::Unknown);
    }

    /// [`Self::notify_change`], with the node's state after the change on the node's own notification (the
    /// parent's `ChildrenChanged` carries none).
    pub(crate) fn notify_change_with(&self, kind: NotificationType, path: &str, after: NodeAfter) {
        let mut changes = node_change(kind, path).into_iter();
        if let Some(mut own) = changes.next() {
            own.after = after;
            self.notify(own);
        }
        for n in changes {
            self.notify(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_and_deletions_also_change_the_parents_children() {
        use NotificationType::*;
        assert_eq!(
            node_change(Created, "/a/b"),
            [
                Notification::new(Created, "/a/b"),
                Notification::new(ChildrenChanged, "/a")
            ]
        );
        assert_eq!(
            node_change(Deleted, "/a/b/c"),
            [
                Notification::new(Deleted, "/a/b/c"),
                Notification::new(ChildrenChanged, "/a/b")
            ]
        );
        assert_eq!(
            node_change(Created, "/a"),
            [Notification::new(Created, "/a")]
        );
        assert_eq!(
            node_change(Modified, "/a/b"),
            [Notification::new(Modified, "/a/b")]
        );
        assert_eq!(
            node_change(ChildrenChanged, "/a/b"),
            [Notification::new(ChildrenChanged, "/a/b")]
        );
    }

    #[test]
    fn subscribers_get_what_is_under_their_prefix() {
        let fanout = Fanout::default();
        let mut a = fanout.subscribe("/a");
        let mut other = fanout.subscribe("/other");
        fanout.notify_change(NotificationType::Created, "/a/b");
        assert_eq!(
            a.try_next(),
            Some(Notification::new(NotificationType::Created, "/a/b"))
        );
        assert_eq!(
            a.try_next(),
            Some(Notification::new(NotificationType::ChildrenChanged, "/a"))
        );
        assert_eq!(a.try_next(), None);
        assert_eq!(other.try_next(), None);
    }
}
