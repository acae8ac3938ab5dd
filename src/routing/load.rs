//! The load signal: one [`Load`] per target, kept in a local and a remote map that are each replaced
//! atomically ([`LoadMapping`]).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::TargetId;

/// Pending messages at which the connection part of a remote load saturates at 1.0.
pub const PENDING_SATURATION: u64 = 1024;

/// The load of one target: `0.0` idle … `1.0` full.
///
/// Built with [`Load::local`] (same-worker target: queue fraction only) or [`Load::remote`] (queue fraction
/// reported by the target's worker, and the sender's pending messages on the connection). A load without
/// metrics ([`Load::NOT_CONNECTED`]) reads as 1.0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    has_metrics: bool,
    queue: f64,
    connection: f64,
}

impl Load {
    /// Nothing is known about the target: it reads as fully loaded.
    pub const NOT_CONNECTED: Load = Load {
        has_metrics: false,
        queue: 1.0,
        connection: 1.0,
    };

    /// A target on the sender's own worker: `queue_fraction` is its receive queue's `len / capacity`.
    /// There is no connection component.
    pub fn local(queue_fraction: f64) -> Load {
        Load {
            has_metrics: true,
            queue: sanitize(queue_fraction),
            connection: 0.0,
        }
    }

    /// A target on another worker: `queue_fraction` as reported by that worker, `pending` the messages this
    /// sender has written to the target's connection that the target has not taken yet. The load is
    /// `max(queue_fraction, min(pending, 1024) / 1024)`.
    pub fn remote(queue_fraction: f64, pending: u64) -> Load {
        Load {
            has_metrics: true,
            queue: sanitize(queue_fraction),
            connection: pending.min(PENDING_SATURATION) as f64 / PENDING_SATURATION as f64,
        }
    }

    /// The load as a fraction in `0.0..=1.0`: 1.0 without metrics, else the larger of the two parts.
    pub fn value(&self) -> f64 {
        if self.has_metrics {
            self.queue.max(self.connection)
        } else {
            1.0
        }
    }

    /// Whether the load carries metrics (false only for [`Load::NOT_CONNECTED`]).
    pub fn has_metrics(&self) -> bool {
        self.has_metrics
    }
}

/// Clamps a fraction into `0.0..=1.0`; NaN means "unknown", which reads as fully loaded.
pub(crate) fn sanitize(fraction: f64) -> f64 {
    if fraction.is_nan() {
        1.0
    } else {
        fraction.clamp(0.0, 1.0)
    }
}

/// The loads of all targets as the router sees them: a map for same-worker targets and a map for the
/// others, each replaced as a whole and atomically, so a refresh never sees half of an update.
///
/// Lookup order is local, then remote, then [`Load::NOT_CONNECTED`] (1.0). Setting a map never blocks
/// readers; readers take a [`LoadSnapshot`] (two reference-count increments) and look up without locking.
#[derive(Debug, Default)]
pub struct LoadMapping {
    local: ArcSwap<HashMap<TargetId, Load>>,
    remote: ArcSwap<HashMap<TargetId, Load>>,
}

impl LoadMapping {
    /// Empty maps: every target reads as not connected.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the local map with the receive-queue fractions of same-worker targets
    /// (each becomes [`Load::local`]).
    pub fn set_local(&self, queue_fractions: impl IntoIterator<Item = (TargetId, f64)>) {
        let map: HashMap<TargetId, Load> = queue_fractions
            .into_iter()
            .map(|(id, q)| (id, Load::local(q)))
            .collect();
        self.local.store(Arc::new(map));
    }

    /// Replaces the remote map (build the values with [`Load::remote`]).
    pub fn set_remote(&self, loads: impl IntoIterator<Item = (TargetId, Load)>) {
        self.remote.store(Arc::new(loads.into_iter().collect()));
    }

    /// The current load of `target` as a fraction (see [`LoadSnapshot::get`]).
    pub fn get(&self, target: TargetId) -> f64 {
        self.snapshot().get(target)
    }

    /// Both maps as they are now; later `set_*` calls do not change the snapshot.
    pub fn snapshot(&self) -> LoadSnapshot {
        LoadSnapshot {
            local: self.local.load_full(),
            remote: self.remote.load_full(),
        }
    }
}

/// An immutable view of a [`LoadMapping`] at one instant.
#[derive(Debug, Clone)]
pub struct LoadSnapshot {
    local: Arc<HashMap<TargetId, Load>>,
    remote: Arc<HashMap<TargetId, Load>>,
}

impl LoadSnapshot {
    /// The load of `target` in `0.0..=1.0`: the local entry, else the remote one, else 1.0 (not connected).
    pub fn get(&self, target: TargetId) -> f64 {
        self.local
            .get(&target)
            .or_else(|| self.remote.get(&target))
            .unwrap_or(&Load::NOT_CONNECTED)
            .value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_load_is_the_larger_of_queue_and_pending() {
        assert_eq!(Load::remote(0.25, 0).value(), 0.25);
        assert_eq!(Load::remote(0.25, 512).value(), 0.5);
        assert_eq!(Load::remote(0.1, 1024).value(), 1.0);
        assert_eq!(
            Load::remote(0.1, 1_000_000).value(),
            1.0,
            "pending saturates"
        );
        assert_eq!(Load::local(0.3).value(), 0.3);
        assert_eq!(Load::NOT_CONNECTED.value(), 1.0);
        assert!(!Load::NOT_CONNECTED.has_metrics());
    }

    #[test]
    fn bad_fractions_are_clamped_and_nan_is_fully_loaded() {
        assert_eq!(Load::local(f64::NAN).value(), 1.0);
        assert_eq!(Load::local(-0.5).value(), 0.0);
        assert_eq!(Load::local(7.0).value(), 1.0);
        assert_eq!(Load::remote(f64::NAN, 0).value(), 1.0);
    }

    #[test]
    fn lookup_is_local_then_remote_then_not_connected() {
        let m = LoadMapping::new();
        assert_eq!(m.get(TargetId(1)), 1.0, "unknown target is fully loaded");
        m.set_local([(TargetId(1), 0.2)]);
        m.set_remote([
            (TargetId(1), Load::remote(0.9, 0)),
            (TargetId(2), Load::remote(0.4, 0)),
        ]);
        assert_eq!(m.get(TargetId(1)), 0.2, "local wins");
        assert_eq!(m.get(TargetId(2)), 0.4);
        assert_eq!(m.get(TargetId(3)), 1.0);

        let before = m.snapshot();
        m.set_local([]);
        assert_eq!(before.get(TargetId(1)), 0.2, "a snapshot does not change");
        assert_eq!(m.get(TargetId(1)), 0.9, "the whole local map was replaced");
    }
}
