//! Mapping of `zookeeper-client` errors onto the store's [`Error`].
//!
//! # Contract
//!
//! [`map_error`] is total and pure: every client error becomes one store error naming the operation and the
//! path. Absence and conflicts keep their meaning (`NoNode` → `NotFound`, `NodeExists` → `AlreadyExists`,
//! `NotEmpty` → `NotEmpty`); an ended session (`SessionExpired`, `SessionMoved`, a closed client of a store
//! that is not closed) is `SessionLost`; errors during failover (`ConnectionLoss`, a custom I/O error, no
//! hosts) are `ConnectionLost`; ACL and authentication failures are `Unauthorized`; anything else is
//! `Backend`. Callers that give an error another meaning in context (a `NoNode` of a compare-and-set is a
//! `BadVersion`) match on it before calling this.

use std::sync::atomic::Ordering;
use std::time::Duration;

use zookeeper_client as zk;

use super::Inner;
use crate::store::Error;

/// What a mapped error says about the store it came from.
#[derive(Debug, Clone)]
pub(super) struct ErrorContext {
    /// The store's address (`zk:servers/chroot`).
    pub(super) address: String,
    /// Whether the store is closed (a closed client then means `Closed`, not a lost session).
    pub(super) closed: bool,
    /// The operation timeout, reported with a client timeout.
    pub(super) operation_timeout: Duration,
}

/// The store error for `e`, raised by `operation` on `path`; see the module docs.
pub(super) fn map_error(e: zk::Error, operation: &str, path: &str, ctx: &ErrorContext) -> Error {
    match e {
        zk::Error::NoNode => Error::not_found(path),
        zk::Error::NodeExists => Error::AlreadyExists {
            path: path.to_string(),
        },
        zk::Error::NotEmpty => Error::NotEmpty {
            path: path.to_string(),
        },
        zk::Error::NoChildrenForEphemerals => Error::InvalidArgument {
            reason: format!("{path}: the parent is ephemeral and cannot have children"),
        },
        zk::Error::SessionExpired | zk::Error::SessionMoved => Error::SessionLost {
            reason: format!("ZooKeeper session expired during {operation} {path}"),
        },
        zk::Error::ClientClosed if ctx.closed => Error::Closed,
        zk::Error::ClientClosed => Error::SessionLost {
            reason: format!("the ZooKeeper client for {} is closed", ctx.address),
        },
        zk::Error::NoAuth | zk::Error::AuthFailed | zk::Error::InvalidAcl => Error::Unauthorized {
            address: ctx.address.clone(),
            reason: format!("{operation} {path}: {e}"),
        },
        zk::Error::BadArguments(reason) => Error::InvalidArgument {
            reason: format!("{operation} {path}: {reason}"),
        },
        zk::Error::Timeout => Error::Timeout {
            operation: format!("{operation} {path}"),
            after: ctx.operation_timeout,
        },
        zk::Error::ConnectionLoss | zk::Error::Custom(_) | zk::Error::NoHosts => {
            Error::ConnectionLost {
                address: ctx.address.clone(),
                operation: format!("{operation} {path}"),
                reason: e.to_string(),
            }
        }
        other => Error::Backend {
            backend: "zookeeper",
            message: format!("{operation} {path}: {other}"),
        },
    }
}

/// ZooKeeper's default `jute.maxbuffer`: the largest request a server accepts unless configured otherwise.
pub(super) const DEFAULT_MAX_BUFFER: usize = 0xfffff;

/// A write of `len` bytes that lost its connection: a server drops the connection of a request larger than its
/// `jute.maxbuffer` instead of answering, so for a value that large that is the likely cause, and retrying
/// cannot help.
pub(super) fn too_large(e: Error, path: &str, len: usize) -> Error {
    match e {
        Error::ConnectionLost { address, .. } if len >= DEFAULT_MAX_BUFFER => Error::InvalidArgument {
            reason: format!(
                "{path}: {address} dropped the connection on a value of {len} bytes: ZooKeeper refuses a request \
                 larger than its jute.maxbuffer ({DEFAULT_MAX_BUFFER} bytes by default)"
            ),
        },
        other => other,
    }
}

impl Inner {
    /// [`map_error`] with this store's context.
    pub(super) fn map_err(&self, e: zk::Error, operation: &str, path: &str) -> Error {
        let ctx = ErrorContext {
            address: self.address(),
            closed: self.closed.load(Ordering::SeqCst),
            operation_timeout: self.options.operation_timeout,
        };
        map_error(e, operation, path, &ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_lost_on_a_huge_value_is_named_as_too_large() {
        let lost = || Error::ConnectionLost {
            address: "zk:h:2181".into(),
            operation: "set /a".into(),
            reason: "connection loss".into(),
        };
        let e = too_large(lost(), "/a", 5_000_000);
        assert!(
            e.to_string().contains("value of 5000000 bytes")
                && e.to_string().contains("jute.maxbuffer"),
            "{e}"
        );
        assert!(matches!(
            too_large(lost(), "/a", 100),
            Error::ConnectionLost { .. }
        ));
    }

    fn ctx(closed: bool) -> ErrorContext {
        ErrorContext {
            address: "zk:h:2181/c".into(),
            closed,
            operation_timeout: Duration::from_secs(3),
        }
    }

    fn map(e: zk::Error) -> Error {
        map_error(e, "set", "/a/b", &ctx(false))
    }

    #[test]
    fn absence_and_conflicts_keep_their_meaning() {
        assert_eq!(map(zk::Error::NoNode), Error::not_found("/a/b"));
        assert_eq!(
            map(zk::Error::NodeExists),
            Error::AlreadyExists {
                path: "/a/b".into()
            }
        );
        assert_eq!(
            map(zk::Error::NotEmpty),
            Error::NotEmpty {
                path: "/a/b".into()
            }
        );
        assert_eq!(
            map(zk::Error::NoChildrenForEphemerals),
            Error::InvalidArgument {
                reason: "/a/b: the parent is ephemeral and cannot have children".into()
            }
        );
        assert_eq!(
            map(zk::Error::BadArguments(&"no such thing")),
            Error::InvalidArgument {
                reason: "set /a/b: no such thing".into()
            }
        );
    }

    #[test]
    fn an_ended_session_is_session_lost_unless_the_store_is_closed() {
        let lost = Error::SessionLost {
            reason: "ZooKeeper session expired during set /a/b".into(),
        };
        assert_eq!(map(zk::Error::SessionExpired), lost);
        assert_eq!(map(zk::Error::SessionMoved), lost);
        assert_eq!(
            map(zk::Error::ClientClosed),
            Error::SessionLost {
                reason: "the ZooKeeper client for zk:h:2181/c is closed".into()
            }
        );
        assert_eq!(
            map_error(zk::Error::ClientClosed, "set", "/a/b", &ctx(true)),
            Error::Closed
        );
    }

    #[test]
    fn failover_errors_are_connection_lost_and_timeouts_name_the_limit() {
        // (A custom error, the crate's I/O failures, cannot be built outside the crate.)
        for e in [zk::Error::ConnectionLoss, zk::Error::NoHosts] {
            let reason = e.to_string();
            assert_eq!(
                map(e),
                Error::ConnectionLost {
                    address: "zk:h:2181/c".into(),
                    operation: "set /a/b".into(),
                    reason,
                }
            );
        }
        assert_eq!(
            map(zk::Error::Timeout),
            Error::Timeout {
                operation: "set /a/b".into(),
                after: Duration::from_secs(3),
            }
        );
    }

    #[test]
    fn acl_failures_are_unauthorized_and_the_rest_backend_errors() {
        for e in [
            zk::Error::NoAuth,
            zk::Error::AuthFailed,
            zk::Error::InvalidAcl,
        ] {
            let reason = format!("set /a/b: {e}");
            assert_eq!(
                map(e),
                Error::Unauthorized {
                    address: "zk:h:2181/c".into(),
                    reason,
                }
            );
        }
        let e = zk::Error::BadVersion;
        assert_eq!(
            map(e.clone()),
            Error::Backend {
                backend: "zookeeper",
                message: format!("set /a/b: {e}"),
            }
        );
    }
}
