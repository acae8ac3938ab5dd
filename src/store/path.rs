//! Path rules shared by every backend.

use super::{Error, Op, Result};

/// Checks a node path: `/`, or `/` followed by non-empty segments separated by `/`, without a trailing `/`,
/// `.`/`..` segments or NUL characters (ZooKeeper's rules, which Pulsar's `isValidPath` is a subset of).
pub fn validate_path(path: &str) -> Result<()> {
    let invalid = |reason: &str| {
        Err(Error::InvalidPath {
            path: path.to_string(),
            reason: reason.to_string(),
        })
    };
    if path == "/" {
        return Ok(());
    }
    if path.trim().is_empty() {
        return invalid("empty path");
    }
    if !path.starts_with('/') {
        return invalid("must start with '/'");
    }
    if path.ends_with('/') {
        return invalid("must not end with '/'");
    }
    if path.contains('\0') {
        return invalid("contains a NUL character");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return invalid("empty segment ('//')"),
            "." | ".." => return invalid("relative segment ('.' or '..')"),
            _ => {}
        }
    }
    Ok(())
}

/// The parent of a path: `None` for `/` and for top-level nodes such as `/a` (Pulsar emits no
/// `ChildrenChanged` for the root).
pub fn parent(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

/// The parent including `/` for top-level nodes (for tree bookkeeping).
pub(crate) fn parent_or_root(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// `path + "/" + child`, without doubling the root's slash.
pub(crate) fn join(path: &str, child: &str) -> String {
    if path == "/" {
        format!("/{child}")
    } else {
        format!("{path}/{child}")
    }
}

/// Whether `path` is `prefix` or below it.
pub(crate) fn is_under(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// The 10-digit (19 past i32::MAX) suffix ZooKeeper appends to sequential nodes.
pub(crate) fn sequence_suffix(n: i64) -> String {
    if n <= i64::from(i32::MAX) {
        format!("{n:010}")
    } else {
        format!("{n:019}")
    }
}

/// Checks the path of a node to be written or deleted: a valid path other than the root; `action`
/// ("written", "deleted") says what the root cannot be.
pub(crate) fn validate_target(path: &str, action: &str) -> Result<()> {
    validate_path(path)?;
    if path == "/" {
        return Err(Error::InvalidArgument {
            reason: format!("the root cannot be {action}"),
        });
    }
    Ok(())
}

/// Checks the paths of a batch: every one valid, and only guards on the root.
pub(crate) fn validate_batch(ops: &[Op]) -> Result<()> {
    for op in ops {
        validate_path(op.path())?;
        if op.path() == "/" && !matches!(op, Op::Check(_)) {
            return Err(Error::InvalidArgument {
                reason: "the root cannot be written or deleted".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_paths() {
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/loadbalance/brokers/broker-1:8080",
            "/a b",
        ] {
            validate_path(ok).unwrap();
        }
        for bad in [
            "", " ", "a", "a/b", "/a/", "//", "/a//b", "/a/./b", "/..", "/a\0",
        ] {
            assert!(
                matches!(validate_path(bad), Err(Error::InvalidPath { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_root_cannot_be_written_or_deleted() {
        validate_target("/a", "written").unwrap();
        assert_eq!(
            validate_target("/", "deleted"),
            Err(Error::InvalidArgument {
                reason: "the root cannot be deleted".into()
            })
        );
        assert!(matches!(
            validate_target("a", "written"),
            Err(Error::InvalidPath { .. })
        ));
        let guard = Op::Check(super::super::Guard {
            path: "/".into(),
            version: 0,
            creation_revision: 1,
        });
        validate_batch(&[guard, Op::put("/a", "v")]).unwrap();
        assert_eq!(
            validate_batch(&[Op::put("/a", "v"), Op::delete("/")]),
            Err(Error::InvalidArgument {
                reason: "the root cannot be written or deleted".into()
            })
        );
        assert!(matches!(
            validate_batch(&[Op::delete("/a/")]),
            Err(Error::InvalidPath { .. })
        ));
    }

    #[test]
    fn parents_and_prefixes() {
        assert_eq!(parent("/a"), None);
        assert_eq!(parent("/"), None);
        assert_eq!(parent("/a/b/c"), Some("/a/b"));
        assert_eq!(parent_or_root("/a"), Some("/"));
        assert_eq!(parent_or_root("/"), None);
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert!(is_under("/a/b", "/a"));
        assert!(is_under("/a", "/a"));
        assert!(!is_under("/ab", "/a"));
        assert!(is_under("/ab", "/"));
        assert_eq!(sequence_suffix(7), "0000000007");
        assert_eq!(
            sequence_suffix(i64::from(i32::MAX) + 1),
            "0000000002147483648"
        );
    }
}
