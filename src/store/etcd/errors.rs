//! Classification of `etcd-client` errors: what a failed request means for retrying, and which store
//! [`Error`] it is when it is an answer.
//!
//! # Contract
//!
//! [`classify`] is pure and total. A request that surely did not reach a server (a transport error, no
//! connection, "no leader", "not capable") is [`Failure::NotSent`] and may be retried on another endpoint;
//! one that may have been applied (a broken stream, a deadline, an internal error) is
//! [`Failure::Ambiguous`] and only reads are retried; everything else is a definite [`Failure::Fatal`]
//! answer: authentication and permission failures are `Unauthorized`, a lease the server no longer knows is
//! `SessionLost`, refused arguments are `InvalidArgument` (the message is kept: callers look for
//! "key not found" in it), the rest `Backend`.

use etcd_client as etcd;

use crate::store::Error;

/// What a failed request means for retrying.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// Surely not applied (no connection, no leader): retry elsewhere.
    NotSent(String),
    /// Perhaps applied (the connection broke mid-request): retry reads only.
    Ambiguous(String),
    /// A definite answer.
    Fatal(Error),
}

/// The meaning of `e`, raised by `operation` against `address`; see the module docs.
pub(super) fn classify(e: etcd::Error, operation: &str, address: &str) -> Failure {
    match e {
        etcd::Error::GRpcStatus(status) => {
            classify_status(status.code() as i32, status.message(), operation, address)
        }
        etcd::Error::TransportError(e) => Failure::NotSent(e.to_string()),
        etcd::Error::IoError(e) => Failure::Ambiguous(e.to_string()),
        etcd::Error::LeaseKeepAliveError(m) if m.contains("not found") => {
            Failure::Fatal(Error::SessionLost {
                reason: format!("{operation}: {m}"),
            })
        }
        etcd::Error::WatchError(m) | etcd::Error::LeaseKeepAliveError(m) => Failure::Ambiguous(m),
        other => Failure::Fatal(Error::Backend {
            backend: "etcd",
            message: format!("{operation}: {other}"),
        }),
    }
}

/// Whether `e` is the server saying it is too busy to answer now: its apply loop is behind ("request timed
/// out", "waiting for the applied index took too long") or too many requests wait. The connection works, so
/// it is kept: dialling again would break this store's streams and add their re-creation to the busy server's
/// load. What the failure means for the request itself is [`classify`]'s answer.
pub(super) fn is_busy(e: &etcd::Error) -> bool {
    matches!(e, etcd::Error::GRpcStatus(s) if busy_message(s.message()))
}

fn busy_message(msg: &str) -> bool {
    // "request timed out, possibly due to previous leader failure" (or "…connection lost") is about the
    // member's leader, not its load: another member may do better, so those still move on.
    (msg.starts_with("etcdserver: request timed out") && !msg.contains("possibly due to"))
        || msg.starts_with("etcdserver: too many requests")
}

/// The meaning of a gRPC status with code `code` (a `tonic::Code` discriminant) and message `msg`.
fn classify_status(code: i32, msg: &str, operation: &str, address: &str) -> Failure {
    let msg = msg.to_string();
    if msg.contains("authentication failed")
        || msg.contains("permission denied")
        || msg.contains("user name is empty")
        || msg.contains("invalid auth token")
    {
        return Failure::Fatal(Error::Unauthorized {
            address: address.to_string(),
            reason: format!("{operation}: {msg}"),
        });
    }
    match code {
        tonic_code::UNAVAILABLE
            if msg.contains("connect")
                || msg.contains("no leader")
                || msg.contains("not capable") =>
        {
            Failure::NotSent(msg)
        }
        tonic_code::UNAVAILABLE
        | tonic_code::DEADLINE_EXCEEDED
        | tonic_code::UNKNOWN
        | tonic_code::CANCELLED
        | tonic_code::ABORTED
        | tonic_code::INTERNAL => Failure::Ambiguous(msg),
        tonic_code::PERMISSION_DENIED | tonic_code::UNAUTHENTICATED => {
            Failure::Fatal(Error::Unauthorized {
                address: address.to_string(),
                reason: format!("{operation}: {msg}"),
            })
        }
        tonic_code::NOT_FOUND if msg.contains("lease not found") => {
            Failure::Fatal(Error::SessionLost {
                reason: format!("{operation}: {msg}"),
            })
        }
        tonic_code::INVALID_ARGUMENT
        | tonic_code::FAILED_PRECONDITION
        | tonic_code::OUT_OF_RANGE
        | tonic_code::RESOURCE_EXHAUSTED => Failure::Fatal(Error::InvalidArgument {
            reason: format!("{operation}: {msg}"),
        }),
        _ => Failure::Fatal(Error::Backend {
            backend: "etcd",
            message: format!("{operation}: {msg}"),
        }),
    }
}

/// gRPC status codes (`tonic::Code` discriminants; etcd-client does not re-export tonic).
mod tonic_code {
    pub(super) const CANCELLED: i32 = 1;
    pub(super) const UNKNOWN: i32 = 2;
    pub(super) const INVALID_ARGUMENT: i32 = 3;
    pub(super) const DEADLINE_EXCEEDED: i32 = 4;
    pub(super) const NOT_FOUND: i32 = 5;
    pub(super) const PERMISSION_DENIED: i32 = 7;
    pub(super) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(super) const FAILED_PRECONDITION: i32 = 9;
    pub(super) const ABORTED: i32 = 10;
    pub(super) const OUT_OF_RANGE: i32 = 11;
    pub(super) const INTERNAL: i32 = 13;
    pub(super) const UNAVAILABLE: i32 = 14;
    pub(super) const UNAUTHENTICATED: i32 = 16;
}

#[cfg(test)]
mod tests {
    use super::tonic_code::*;
    use super::*;

    fn status(code: i32, msg: &str) -> Failure {
        classify_status(code, msg, "put /a", "etcd:h:2379")
    }

    #[test]
    fn unreachable_or_leaderless_servers_did_not_get_the_request() {
        for msg in [
            "error trying to connect: refused",
            "etcdserver: no leader",
            "not capable",
        ] {
            assert_eq!(status(UNAVAILABLE, msg), Failure::NotSent(msg.into()));
        }
        assert_eq!(
            classify(
                etcd::Error::IoError(std::io::Error::other("reset")),
                "put /a",
                "x"
            ),
            Failure::Ambiguous("reset".into())
        );
    }

    #[test]
    fn a_broken_request_may_have_been_applied() {
        for code in [
            UNAVAILABLE,
            DEADLINE_EXCEEDED,
            UNKNOWN,
            CANCELLED,
            ABORTED,
            INTERNAL,
        ] {
            assert_eq!(
                status(code, "stream reset"),
                Failure::Ambiguous("stream reset".into())
            );
        }
        assert_eq!(
            classify(etcd::Error::WatchError("gone".into()), "watch /", "x"),
            Failure::Ambiguous("gone".into())
        );
        assert_eq!(
            classify(
                etcd::Error::LeaseKeepAliveError("stream closed".into()),
                "keep-alive",
                "x"
            ),
            Failure::Ambiguous("stream closed".into())
        );
    }

    #[test]
    fn auth_failures_are_unauthorized_whatever_the_code() {
        let unauthorized = |msg: &str| {
            Failure::Fatal(Error::Unauthorized {
                address: "etcd:h:2379".into(),
                reason: format!("put /a: {msg}"),
            })
        };
        assert_eq!(
            status(
                INVALID_ARGUMENT,
                "etcdserver: authentication failed, invalid user ID or password"
            ),
            unauthorized("etcdserver: authentication failed, invalid user ID or password")
        );
        assert_eq!(
            status(UNAVAILABLE, "etcdserver: invalid auth token"),
            unauthorized("etcdserver: invalid auth token")
        );
        assert_eq!(status(PERMISSION_DENIED, "nope"), unauthorized("nope"));
        assert_eq!(status(UNAUTHENTICATED, "who"), unauthorized("who"));
    }

    #[test]
    fn a_lease_the_server_does_not_know_is_a_lost_session() {
        assert_eq!(
            status(NOT_FOUND, "etcdserver: requested lease not found"),
            Failure::Fatal(Error::SessionLost {
                reason: "put /a: etcdserver: requested lease not found".into()
            })
        );
        assert_eq!(
            classify(
                etcd::Error::LeaseKeepAliveError("lease not found".into()),
                "keep-alive",
                "x"
            ),
            Failure::Fatal(Error::SessionLost {
                reason: "keep-alive: lease not found".into()
            })
        );
        // Another NOT_FOUND is a backend error.
        assert_eq!(
            status(NOT_FOUND, "no such member"),
            Failure::Fatal(Error::Backend {
                backend: "etcd",
                message: "put /a: no such member".into()
            })
        );
    }

    #[test]
    fn a_busy_server_is_told_from_a_broken_connection() {
        for msg in [
            "etcdserver: request timed out",
            "etcdserver: request timed out, waiting for the applied index took too long",
            "etcdserver: too many requests",
        ] {
            assert!(busy_message(msg), "{msg}");
        }
        for msg in [
            "error trying to connect: refused",
            "etcdserver: no leader",
            "transport error",
            "etcdserver: requested lease not found",
            "etcdserver: request timed out, possibly due to previous leader failure",
            "etcdserver: request timed out, possibly due to connection lost",
        ] {
            assert!(!busy_message(msg), "{msg}");
        }
        assert!(!is_busy(&etcd::Error::IoError(std::io::Error::other(
            "etcdserver: request timed out"
        ))));
    }

    #[test]
    fn refused_arguments_keep_the_message() {
        for code in [
            INVALID_ARGUMENT,
            FAILED_PRECONDITION,
            OUT_OF_RANGE,
            RESOURCE_EXHAUSTED,
        ] {
            assert_eq!(
                status(code, "etcdserver: key not found"),
                Failure::Fatal(Error::InvalidArgument {
                    reason: "put /a: etcdserver: key not found".into()
                })
            );
        }
        assert_eq!(
            classify(etcd::Error::InvalidArgs("bad".into()), "put /a", "x"),
            Failure::Fatal(Error::Backend {
                backend: "etcd",
                message: "put /a: invalid arguments: bad".into()
            })
        );
    }
}
