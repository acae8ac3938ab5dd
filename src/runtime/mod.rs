//! The live load manager: the broker agent every broker runs, and the leader tasks of the elected one.
//!
//! (Design notes: see the end of this page — *Design*.)

pub mod admin;
mod agent;
pub mod clock;
pub mod host;
pub mod host_usage;
pub mod identity;
mod leader;
pub mod monitor;
pub mod namespaces;
mod ownership;
pub mod records;
pub mod reporter;
pub mod requests;
pub mod snapshot;
pub mod synthetic;

use std::time::Duration;

pub use agent::{AgentMetrics, AgentOptions, BrokerAgent, LookupClient};
pub use clock::Clock;
pub use host::{BrokerHost, HostError, IdleHost};
pub use identity::BrokerIdentity;
pub use records::{
    AdminRequest, AssignmentCause, AssignmentState, BundleAssignment, LeaderStatus, LookupAnswer,
    RequestOp, RequestResponse,
};
pub use requests::LookupResult;
pub use synthetic::{SyntheticHost, SyntheticProfile};

/// Errors of the runtime and of the admin operations built on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    /// The broker's configuration cannot be used.
    #[error("configuration: {0}")]
    Config(String),
    /// Another live process holds this broker's registration.
    #[error("broker {broker} is already registered in {store} by another live process (same advertisedAddress and webServicePort?)")]
    AlreadyRegistered {
        /// The broker id.
        broker: String,
        /// The store.
        store: String,
    },
    /// A request needs the leader and none is elected.
    #[error("no leader is running: {what} needs one, and {store} has no /loadbalance/leader node (start a `loadmgr broker`)")]
    NoLeader {
        /// The request.
        what: String,
        /// The store.
        store: String,
    },
    /// Waiting for an answer or an owner took too long.
    #[error("timed out after {:.1}s waiting for {what}", .after.as_secs_f64())]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// The answerer refused the request.
    #[error("{what} refused by {by}: {message}")]
    Rejected {
        /// The request.
        what: String,
        /// The broker that answered.
        by: String,
        /// Why.
        message: String,
    },
    /// A stored node does not hold what it should.
    #[error("{path}: malformed content: {reason}")]
    Malformed {
        /// The node.
        path: String,
        /// The decoder's message.
        reason: String,
    },
    /// A request or argument is not valid.
    #[error("{0}")]
    Invalid(String),
}

/// The periods the runtime runs at: the minute-based settings, or their millisecond overrides
/// (`loadmgr*Millis` keys, for tests and demos) when those are above 0.
pub mod intervals {
    use std::time::Duration;

    use crate::config::Settings;

    fn pick(ms_override: i64, minutes: i64) -> Duration {
        if ms_override > 0 {
            Duration::from_millis(ms_override as u64)
        } else {
            Duration::from_secs(minutes.max(1) as u64 * 60)
        }
    }

    /// Shedding (and split check) period.
    pub fn shedding(s: &Settings) -> Duration {
        pick(
            s.loadmgr_shedding_interval_millis,
            s.load_balancer_shedding_interval_minutes as i64,
        )
    }

    /// Flush period of bundle data and time averages.
    pub fn flush(s: &Settings) -> Duration {
        pick(
            s.loadmgr_resource_quota_update_interval_millis,
            s.load_balancer_resource_quota_update_interval_minutes as i64,
        )
    }

    /// Host CPU/NIC sampling period.
    pub fn host_usage(s: &Settings) -> Duration {
        pick(
            s.loadmgr_host_usage_check_interval_millis,
            s.load_balancer_host_usage_check_interval_minutes as i64,
        )
    }

    /// A report is written at least this often.
    pub fn report_max(s: &Settings) -> Duration {
        pick(
            s.loadmgr_report_update_max_interval_millis,
            s.load_balancer_report_update_max_interval_minutes as i64,
        )
    }

    /// Report check period (`loadBalancerReportUpdateMinIntervalMillis`, 5 s).
    pub fn report_check(s: &Settings) -> Duration {
        Duration::from_millis(s.load_balancer_report_update_min_interval_millis.max(1) as u64)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn minutes_unless_overridden() {
            let mut s = Settings::default();
            assert_eq!(shedding(&s), Duration::from_secs(60));
            assert_eq!(flush(&s), Duration::from_secs(15 * 60));
            assert_eq!(report_max(&s), Duration::from_secs(15 * 60));
            assert_eq!(report_check(&s), Duration::from_millis(5000));
            s.loadmgr_shedding_interval_millis = 250;
            s.loadmgr_resource_quota_update_interval_millis = 500;
            s.loadmgr_host_usage_check_interval_millis = 100;
            s.loadmgr_report_update_max_interval_millis = 2000;
            assert_eq!(shedding(&s), Duration::from_millis(250));
            assert_eq!(flush(&s), Duration::from_millis(500));
            assert_eq!(host_usage(&s), Duration::from_millis(100));
            assert_eq!(report_max(&s), Duration::from_millis(2000));
        }
    }
}
