//! Delivery of notifications and session events to subscribers: one unbounded queue per subscriber, so a
//! slow consumer never makes another miss events, and dropping a stream unsubscribes it.

use std::sync::Mutex;

use tokio::sync::mpsc;

use super::path::is_under;
use super::{EventStream, Notification};

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

impl Fanout<Notification> {
    /// Sends a notification to every subscriber whose prefix covers its path.
    pub(crate) fn notify(&self, notification: Notification) {
        let path = notification.path.clone();
        self.send_filtered(&notification, |prefix| is_under(&path, prefix));
    }
}
