//! Locality-aware, load-aware choice of a downstream target, after Apache Storm's
//! `LoadAwareShuffleGrouping` (bang-bang control over locality scopes).
//!
//! # What it does
//!
//! A sender (one process, the *source*) spreads messages over a set of targets. Each target has a
//! [`Location`] relative to the source, which puts it in one of four [`Scope`]s: the same worker, the same
//! host, the same rack, or anywhere. Scopes are cumulative: the host scope contains the worker-local targets
//! too, and so on. The router sends only to the targets of its *current* scope, preferring the less loaded
//! ones, and moves the scope outward when the scope is overloaded and back inward when the narrower scope has
//! become idle. Traffic therefore stays as close to the sender as the load allows.
//!
//! # Load signal ([`Load`], [`LoadMapping`])
//!
//! A load is a fraction in `0.0..=1.0` (0 idle, 1 full). For a target on the sender's own worker it is the
//! fill fraction of the target's receive queue (`len / capacity`). For any other target it is
//! `max(queue fraction reported by the target's worker, min(pending, 1024) / 1024)`, where `pending` counts
//! messages this sender has written to the target's connection that the target has not taken yet. A target
//! for which nothing is known reads as fully loaded (1.0, the *not-connected* rule). [`LoadMapping`] keeps
//! the local and the remote maps separately and replaces each one atomically.
//!
//! # One refresh ([`LoadAwareRouter::refresh`])
//!
//! 1. **Scope transition**, at most one step. With `avg` the mean load over the current scope: if
//!    `avg > higher_bound` (default 0.8) move one step outward; otherwise, if the next narrower scope's *own*
//!    mean load is `< lower_bound` (default 0.2), move one step inward. Both comparisons are strict. A scope
//!    change resets the weight of every target to 100.
//! 2. **Weights**, for the targets of the (new) current scope only. With `min` the smallest load in the
//!    scope, a target with `load <= min + 0.05` gains 1 (at most 100), any other loses 10 (at least 0). The
//!    0.05 margin is absolute, in load units. Weights of targets outside the scope are neither changed nor
//!    used.
//! 3. **Choice ring**: an array of `capacity` slots (`max(1000, 5 × targets)`, or 1 for a single target).
//!    Each in-scope target gets a number of slots proportional to its weight, the array is shuffled, and it
//!    replaces the published one. [`LoadAwareRouter::choose`] walks the published array with a cursor, so
//!    over any `capacity` consecutive picks of one cursor each target is picked exactly as often as it has
//!    slots. The cursor is striped so that concurrent choosers do not contend: a thread that chooses alone
//!    uses cursor 0 (exactly the single-cursor walk), concurrent choosers settle on their own cursors, and
//!    the guarantee holds per cursor (see [`LoadAwareRouter`] for what it means overall).
//!
//! Refreshes are periodic: every `refresh_period` (1 s) plus a uniform random jitter below `refresh_jitter`
//! (500 ms), the first one immediately ([`run_refresh_loop`], [`RefreshSchedule`]). With
//! `disable_load_aware` the router is a plain shuffle over all targets and refreshes change nothing.
//!
//! # Concurrency contract
//!
//! [`LoadAwareRouter::choose`] takes no lock and allocates nothing: one compare-exchange on the calling
//! thread's cursor stripe plus a few atomic loads, with no cache line written by two choosing threads once
//! they have settled on their stripes ([`ring`] describes the stripes). The choice array is double-buffered: a refresh writes the spare buffer and publishes it with
//! a sequence number; a reader that finds its buffer was rewritten while it read simply reads again (see
//! [`ring`] for the protocol). Refreshes and topology changes are serialised by an internal mutex that
//! `choose` never touches.
//!
//! # Where this differs from Storm, on purpose
//!
//! Storm's behaviour is kept wherever it is the algorithm (the constants above, unknown = fully loaded,
//! reset on scope change, strict bounds, narrowing judged by the narrower scope's own average as since
//! STORM-3602). Where it is a defect it is fixed:
//!
//! * **Cursor wrap.** Storm resets its cursor to 0 when one thread hits the end of the array; threads that
//!   raced past the end spin until that reset happens, so a sender descheduled at that moment stalls every
//!   other sender. Here each cursor is a wrapping counter reduced modulo the capacity: a pick never waits
//!   for another thread.
//! * **Reusing a buffer that is still being read.** Storm rewrites the previous array in the next refresh
//!   even if a slow reader still indexes it, so a pick can come from a half-built array (harmless in Java
//!   only because every entry is a valid index). Here a read that overlaps a rewrite is detected and retried,
//!   so every pick comes from a complete, published ring.
//! * **Rounding.** Storm fills the slots lost to rounding by copying randomly chosen filled slots, which skews
//!   the shares by chance. Here the slots are apportioned by largest remainder: every target gets the floor
//!   or the ceiling of its exact share.
//! * **Degenerate weights and bad numbers.** A NaN load makes Storm's minimum NaN, every target then looks
//!   congested, and once all weights reach 0 Storm's fallback spreads traffic round-robin over *all* targets,
//!   including those outside the scope. Here NaN loads count as not connected (1.0), loads are clamped to
//!   `0.0..=1.0`, and the all-zero fallback (unreachable with clean loads) spreads evenly over the in-scope
//!   targets only.
//! * **Scopes that add no target.** Storm steps through a scope whose target set equals the narrower one
//!   (for example "host" when the host runs only the sender's worker), resetting every weight and spending a
//!   refresh period per such step. Here such scopes are skipped: a step moves to the next scope with a
//!   different target set, and a scope is always named by the narrowest scope with its target set.
//! * **No targets / unknown placement.** Storm throws at refresh time when it has no target, and older
//!   versions dereference a missing placement while mapping hosts to racks. Here an empty target set is
//!   rejected up front ([`RoutingError::NoTargets`]) and a target without placement is simply in
//!   [`Scope::Everything`].
//! * **Multi-task executors.** Storm publishes an executor's queue load under its first task id only, so the
//!   other tasks of the executor read as not connected (1.0). Here every target is looked up by its own id;
//!   a feeder whose targets share a queue must publish the fraction under each target id.
//!
//! Kept and worth knowing: the queue part of a remote load is only as fresh as the remote side's reports
//! (Storm pushes them every 5 s, while the pending part is fresh at every refresh).
//!
//! # Brokers as targets
//!
//! [`broker_loads`] turns Pulsar broker reports (`LocalBrokerData`, or a Simple `LoadReport`) plus a
//! failure-domain map into the topology and loads this router consumes. [`store_source`] feeds it from the
//! metadata store: [`StoreLoadSource`] reads `/loadbalance/brokers/<id>` and the cluster's failure domains
//! (`/admin/clusters/<cluster>/failureDomain/<domain>`), follows their notifications (re-reading only the
//! changed node, everything after a reconnection), and pushes topology changes with
//! [`LoadAwareRouter::set_topology`] and loads through the [`LoadMapping`].
//!
//! # Simulation
//!
//! [`simulate`] runs a deterministic, virtual-time traffic simulation comparing this router with a plain
//! shuffle; `loadmgr route simulate` prints it.

pub mod broker_loads;
mod load;
mod refresh;
pub mod ring;
mod router;
pub mod simulate;
pub mod store_source;
mod topology;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use broker_loads::{BrokerReport, BrokerRouting, BrokerSnapshot, PULSAR_DEFAULT_DOMAIN};
pub use load::{Load, LoadMapping, LoadSnapshot, PENDING_SATURATION};
pub use refresh::{run_refresh_loop, RefreshSchedule};
pub use router::{LoadAwareRouter, Refreshed, RouterConfig, MAX_TARGETS, MAX_WEIGHT, MIN_MARGIN};
pub use store_source::{
    SourceStatus, StoreLoadSource, StoreSourceError, StoreSourceOptions, BROKERS_PATH,
};
pub use topology::{Location, TargetPlacement, Topology, DEFAULT_RACK};

/// The identity of a target, chosen by the caller (a Storm task id, or a number the caller maps to a broker;
/// see [`BrokerRouting`]). Ids must be unique within a [`Topology`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TargetId(pub u32);

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where targets are, relative to the source; ordered from the narrowest to the widest.
///
/// The targets *in* a scope are cumulative: every target classified in that scope or a narrower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// Same host and same worker process as the source.
    WorkerLocal,
    /// Same host, another worker.
    HostLocal,
    /// Another host on the same rack (failure domain).
    RackLocal,
    /// Anywhere, including targets whose placement is unknown.
    Everything,
}

impl Scope {
    /// All scopes, narrowest first.
    pub const ALL: [Scope; 4] = [
        Scope::WorkerLocal,
        Scope::HostLocal,
        Scope::RackLocal,
        Scope::Everything,
    ];

    /// Position in [`Scope::ALL`] (0 = worker-local).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// One step outward; `Everything` stays `Everything`.
    pub const fn wider(self) -> Scope {
        match self {
            Scope::WorkerLocal => Scope::HostLocal,
            Scope::HostLocal => Scope::RackLocal,
            Scope::RackLocal | Scope::Everything => Scope::Everything,
        }
    }

    /// One step inward; `WorkerLocal` stays `WorkerLocal`.
    pub const fn narrower(self) -> Scope {
        match self {
            Scope::WorkerLocal | Scope::HostLocal => Scope::WorkerLocal,
            Scope::RackLocal => Scope::HostLocal,
            Scope::Everything => Scope::RackLocal,
        }
    }

    /// Kebab-case name, as printed by the CLI (`worker-local`, …, `everything`).
    pub const fn name(self) -> &'static str {
        match self {
            Scope::WorkerLocal => "worker-local",
            Scope::HostLocal => "host-local",
            Scope::RackLocal => "rack-local",
            Scope::Everything => "everything",
        }
    }

    const fn from_index(index: u8) -> Scope {
        match index {
            0 => Scope::WorkerLocal,
            1 => Scope::HostLocal,
            2 => Scope::RackLocal,
            _ => Scope::Everything,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Invalid input to the router. Every variant names the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoutingError {
    /// A topology without any target: there is nothing to route to.
    #[error("the topology has no target")]
    NoTargets,
    /// The same target id appears twice in a topology.
    #[error("target {0} appears more than once in the topology")]
    DuplicateTarget(TargetId),
    /// More targets than the choice ring can hold.
    #[error("{count} targets is more than the supported {max}")]
    TooManyTargets {
        /// Targets given.
        count: usize,
        /// [`MAX_TARGETS`].
        max: usize,
    },
    /// Bounds that are not finite, not positive, or with `lower > higher`.
    #[error("invalid locality bounds: lower {lower}, higher {higher} (need 0 < lower <= higher, both finite)")]
    InvalidBounds {
        /// `lower_bound` given.
        lower: f64,
        /// `higher_bound` given.
        higher: f64,
    },
    /// A simulation spec that cannot run; the text says why.
    #[error("invalid simulation: {0}")]
    InvalidSimulation(String),
}

/// A per-router seed when none is configured (the `rand` build here has no OS entropy source).
pub(crate) fn entropy_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_steps_saturate_at_both_ends() {
        assert_eq!(Scope::WorkerLocal.narrower(), Scope::WorkerLocal);
        assert_eq!(Scope::Everything.wider(), Scope::Everything);
        for (i, s) in Scope::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(Scope::from_index(i as u8), *s);
            if i + 1 < Scope::ALL.len() {
                assert_eq!(s.wider(), Scope::ALL[i + 1]);
                assert_eq!(Scope::ALL[i + 1].narrower(), *s);
            }
        }
        assert_eq!(
            serde_json::to_string(&Scope::RackLocal).unwrap(),
            "\"rackLocal\""
        );
        assert_eq!(Scope::HostLocal.to_string(), "host-local");
    }
}
