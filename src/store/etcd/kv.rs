//! Reads and writes of the etcd store: `get`, `get_children`, `exists`, `put`, `delete` and batches, each
//! batch part run as one txn planned by [`super::txn`].
//!
//! # Contract
//!
//! * The layout of the module docs of [`super`]: the key is the node path and the value its bytes; parents
//!   are not keys, so [`child_names`] derives a node's children from the keys under `path/` (first segments,
//!   sorted, without duplicates), and `exists` is true only for a key written explicitly (and for `/`).
//! * An unconditional put is first one plain put with `ignore_lease` and `prev_kv` (the common update: one
//!   round trip, the lease kept, the new stat derived from the previous key-value); a missing key ("key not
//!   found") falls through to a create planned as a batch of one.
//! * A batch part is re-planned (at most 8 attempts, with a short growing pause) when unconditional puts meet
//!   keys whose existence differs from the plan's or a sequential name meets a sibling; the first failing op
//!   otherwise decides the error (see [`super::txn::diagnose`]).
//! * The ephemerals registry follows every successful write: created ephemerals are registered with their
//!   value, updates refresh it, deletes forget it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use etcd_client as etcd;
use etcd_client::{GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};

use super::txn::{diagnose, read_backs, split, Plan, Retry};
use super::Inner;
use crate::store::path::{validate_batch, validate_target};
use crate::store::{validate_path, CreateOptions, Error, GetResult, Op, OpResult, Result, Stat};

/// The names of the children of the node whose keys start with `prefix` (the node's path + `/`, or `/`):
/// the first segment after the prefix of every key, sorted and without duplicates.
pub(super) fn child_names<'a>(prefix: &[u8], keys: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    let mut children: Vec<String> = Vec::new();
    for key in keys {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let first = rest.split(|b| *b == b'/').next().unwrap_or_default();
        if first.is_empty() {
            continue;
        }
        let name = String::from_utf8_lossy(first).into_owned();
        if children.last() != Some(&name) {
            children.push(name);
        }
    }
    children.sort();
    children.dedup();
    children
}

/// Reads per txn of [`Inner::get_many`] (etcd allows 128 operations in one txn by default).
pub(super) const READS_PER_TXN: usize = 100;

/// Keys per page of [`Inner::get_children`]: keys here are short (a bundle record's is about 80 bytes), so a page
/// of 5,000 stays far below the client's 4 MiB answer limit. etcd 3.4 walks its index over everything from a
/// page's start to the end of the folder for every page, whatever the limit (3.5 stops at the limit): a folder
/// of 100,000 descendants costs 20 such walks at this size, 100 at 1,000 keys a page.
pub(super) const LIST_PAGE: i64 = 5_000;

/// The key range of everything below `path`: the prefix every such key starts with (`path/`, or `/` for the
/// root), and the first key after all of them (the prefix with its last `/` turned into `0`, which follows
/// `/`).
pub(super) fn subtree(path: &str) -> (String, String) {
    let prefix = if path == "/" {
        "/".to_string()
    } else {
        format!("{path}/")
    };
    let end = format!("{}0", &prefix[..prefix.len() - 1]);
    (prefix, end)
}

/// Where the page after the one that ended at `last` starts, when listing the children of `prefix`: after the
/// subtree of `last`'s child if `last` is inside it (every key from `<child>/` up to `<child>0` is in it), else
/// right after `last` (the child's own key: siblings such as `<child>-x` sort before its subtree).
pub(super) fn next_page(prefix: &[u8], last: &[u8]) -> Vec<u8> {
    let rest = last.strip_prefix(prefix).unwrap_or_default();
    match rest.iter().position(|b| *b == b'/') {
        Some(i) => {
            let mut next = last[..prefix.len() + i].to_vec();
            next.push(b'0');
            next
        }
        None => {
            let mut next = last.to_vec();
            next.push(0);
            next
        }
    }
}

impl Inner {
    /// The stat of key-value `kv` at `path`.
    pub(super) fn stat(&self, path: &str, kv: &etcd::KeyValue) -> Stat {
        let lease = self.lease.load(Ordering::SeqCst);
        Stat {
            path: path.to_string(),
            version: kv.version() - 1,
            creation_revision: kv.create_revision(),
            modification_revision: kv.mod_revision(),
            created_ms: 0,
            modified_ms: 0,
            ephemeral: kv.lease() != 0,
            created_by_self: kv.lease() != 0 && kv.lease() == lease,
        }
    }

    /// The stat of `path` after an update at `revision` whose previous key-value was `prev` (the update
    /// keeps the lease and bumps the version).
    fn updated_stat(&self, path: &str, prev: &etcd::KeyValue, revision: i64) -> Stat {
        let lease = self.lease.load(Ordering::SeqCst);
        Stat {
            path: path.to_string(),
            version: prev.version(),
            creation_revision: prev.create_revision(),
            modification_revision: revision,
            created_ms: 0,
            modified_ms: 0,
            ephemeral: prev.lease() != 0,
            created_by_self: prev.lease() != 0 && prev.lease() == lease,
        }
    }

    pub(super) async fn txn(
        &self,
        operation: &str,
        path: &str,
        txn: Txn,
    ) -> Result<etcd::TxnResponse> {
        let resp = self
            .call(operation, path, false, |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        self.seen(resp.header());
        Ok(resp)
    }

    pub(super) async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat> {
        validate_target(path, "written")?;
        if expected.is_none() && !options.sequential {
            // The common case, an update: one plain put that keeps the lease and returns the previous
            // key-value (etcd reads it for ignore_lease anyway); a missing key falls through to a create.
            let put = self
                .call("put", path, false, |mut c| async move {
                    c.put(
                        path,
                        value,
                        Some(PutOptions::new().with_ignore_lease().with_prev_key()),
                    )
                    .await
                })
                .await;
            match put {
                Ok(resp) => {
                    self.seen(resp.header());
                    if let Some(prev) = resp.prev_key() {
                        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
                        let stat = self.updated_stat(path, prev, revision);
                        if let Some(v) = self.ephemerals.lock().unwrap().get_mut(path) {
                            *v = value.to_vec();
                        }
                        return Ok(stat);
                    }
                }
                Err(Error::InvalidArgument { reason }) if reason.contains("key not found") => {}
                Err(e) => return Err(e),
            }
        }
        let results = self
            .batch(vec![Op::Put {
                path: path.to_string(),
                value: value.to_vec(),
                expected_version: expected,
                options,
            }])
            .await?;
        match results.into_iter().next() {
            Some(OpResult::Put(stat)) => Ok(stat),
            other => Err(Error::Backend {
                backend: "etcd",
                message: format!("put answered {other:?}"),
            }),
        }
    }

    pub(super) async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        validate_batch(&ops)?;
        self.conn()?;
        let mut out = Vec::with_capacity(ops.len());
        for chunk in split(&ops) {
            out.extend(self.run_chunk(&chunk).await?);
        }
        Ok(out)
    }

    /// One atomic txn (see [`split`] for the limits), re-planned when unconditional puts meet missing keys or
    /// sequential names meet a race.
    async fn run_chunk(&self, ops: &[&Op]) -> Result<Vec<OpResult>> {
        // Existence of unconditional-put keys: unknown at first (optimistic `ignore_lease`).
        let mut known: Option<HashMap<String, bool>> = None;
        for attempt in 0..8 {
            let candidate = self.revision.load(Ordering::Relaxed) + 1;
            let plan = Plan::build(ops, known.as_ref(), candidate, &|| self.lease_for_create())?;
            let first = ops.first().map(|o| o.path()).unwrap_or("");
            let resp = match self.txn("batch", first, plan.txn()).await {
                Ok(r) => r,
                Err(Error::InvalidArgument { reason })
                    if reason.contains("key not found") && known.is_none() =>
                {
                    known = Some(self.existence(ops).await?);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if resp.succeeded() {
                return self.decode_success(ops, &plan, &resp);
            }
            match diagnose(ops, &plan, &read_backs(&resp))? {
                Retry::Replan => {
                    known = Some(self.existence(ops).await?);
                }
                Retry::Sequence => {}
            }
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
            }
        }
        Err(Error::Backend {
            backend: "etcd",
            message: "batch kept conflicting with concurrent writers".into(),
        })
    }

    /// Which unconditional-put keys exist now.
    async fn existence(&self, ops: &[&Op]) -> Result<HashMap<String, bool>> {
        let keys: Vec<String> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Put {
                    path,
                    expected_version: None,
                    options,
                    ..
                } if !options.sequential => Some(path.clone()),
                _ => None,
            })
            .collect();
        let gets: Vec<TxnOp> = keys
            .iter()
            .map(|k| TxnOp::get(k.as_str(), Some(GetOptions::new().with_count_only())))
            .collect();
        let resp = self
            .call(
                "read",
                keys.first().map(String::as_str).unwrap_or(""),
                true,
                |mut c| {
                    let t = Txn::new().and_then(gets.clone());
                    async move { c.txn(t).await }
                },
            )
            .await?;
        self.seen(resp.header());
        Ok(keys
            .into_iter()
            .zip(resp.op_responses())
            .map(|(k, r)| {
                let exists = matches!(r, TxnOpResponse::Get(g) if g.count() > 0);
                (k, exists)
            })
            .collect())
    }

    fn decode_success(
        &self,
        ops: &[&Op],
        plan: &Plan,
        resp: &etcd::TxnResponse,
    ) -> Result<Vec<OpResult>> {
        let responses = resp.op_responses();
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut out = Vec::with_capacity(ops.len());
        let mut eph = self.ephemerals.lock().unwrap();
        for (i, op) in ops.iter().enumerate() {
            match (op, &plan.success_index[i]) {
                (Op::Check(_), _) => out.push(OpResult::Check),
                (Op::Delete { path, .. }, Some(_)) => {
                    eph.remove(path.as_str());
                    out.push(OpResult::Delete);
                }
                (Op::Put { value, options, .. }, Some(at)) => {
                    let key = &plan.keys[i];
                    let stat = if plan.created[i] {
                        Stat {
                            path: key.clone(),
                            version: 0,
                            creation_revision: revision,
                            modification_revision: revision,
                            created_ms: 0,
                            modified_ms: 0,
                            ephemeral: options.ephemeral,
                            created_by_self: options.ephemeral,
                        }
                    } else {
                        let prev = match responses.get(*at) {
                            Some(TxnOpResponse::Put(p)) => p.prev_key().cloned(),
                            _ => None,
                        };
                        let prev = prev.ok_or_else(|| Error::Backend {
                            backend: "etcd",
                            message: format!("no previous value of {key} in the txn answer"),
                        })?;
                        self.updated_stat(key, &prev, revision)
                    };
                    if plan.created[i] && options.ephemeral {
                        eph.insert(key.clone(), value.clone());
                    } else if let Some(v) = eph.get_mut(key.as_str()) {
                        *v = value.clone();
                    }
                    out.push(OpResult::Put(stat));
                }
                (op, None) => {
                    return Err(Error::Backend {
                        backend: "etcd",
                        message: format!("no txn result for {op:?}"),
                    })
                }
            }
        }
        Ok(out)
    }

    pub(super) async fn delete(&self, path: &str, expected: Option<i64>) -> Result<()> {
        validate_target(path, "deleted")?;
        self.batch(vec![Op::Delete {
            path: path.to_string(),
            expected_version: expected,
        }])
        .await
        .map(|_| ())
    }

    pub(super) async fn get(&self, path: &str) -> Result<Option<GetResult>> {
        validate_path(path)?;
        let resp = self
            .call(
                "get",
                path,
                true,
                |mut c| async move { c.get(path, None).await },
            )
            .await?;
        self.seen(resp.header());
        Ok(resp.kvs().first().map(|kv| GetResult {
            value: kv.value().to_vec(),
            stat: self.stat(path, kv),
        }))
    }

    /// Each path's node, [`READS_PER_TXN`] keys per read-only txn: one request per hundred nodes instead of one
    /// each. A new leader reads 195,000 nodes at 100 brokers × 65,000 bundles; as single gets, 1,600 at a time,
    /// they left the server too busy to renew the brokers' leases. A read-only txn is served like a range read
    /// (linearizable, no log entry); each key is read as the server finds it, as with `get`.
    pub(super) async fn get_many(&self, paths: &[String]) -> Result<Vec<Option<GetResult>>> {
        for p in paths {
            validate_path(p)?;
        }
        let mut out = Vec::with_capacity(paths.len());
        for chunk in paths.chunks(READS_PER_TXN) {
            let resp = self
                .call("get_many", &chunk[0], true, |mut c| {
                    let ops: Vec<TxnOp> =
                        chunk.iter().map(|p| TxnOp::get(p.as_str(), None)).collect();
                    async move { c.txn(Txn::new().and_then(ops)).await }
                })
                .await?;
            self.seen(resp.header());
            let answers = resp.op_responses();
            if answers.len() != chunk.len() {
                return Err(Error::Backend {
                    backend: "etcd",
                    message: format!(
                        "a txn of {} reads answered {} results",
                        chunk.len(),
                        answers.len()
                    ),
                });
            }
            for (path, answer) in chunk.iter().zip(answers) {
                match answer {
                    TxnOpResponse::Get(g) => out.push(g.kvs().first().map(|kv| GetResult {
                        value: kv.value().to_vec(),
                        stat: self.stat(path, kv),
                    })),
                    other => {
                        return Err(Error::Backend {
                            backend: "etcd",
                            message: format!("a read of {path} in a txn answered {other:?}"),
                        })
                    }
                }
            }
        }
        Ok(out)
    }

    /// The direct children's names, read [`LIST_PAGE`] keys at a time: an answer over the client's 4 MiB
    /// message limit fails (65,000 records under one folder are 4.8 MB of keys). Once a page ends inside a
    /// child's subtree, the next page starts after that subtree, so a folder of a few children with many
    /// descendants costs a few pages, not one per page of descendants. No sort order is asked for: etcd
    /// answers a range in key order anyway, and a request with one reads every key-value to the end of the
    /// range from its database before it applies the limit (a folder of 100,000 records read whole for each
    /// page: what made a new leader's listings the largest part of its load).
    pub(super) async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        validate_path(path)?;
        let (prefix, end) = subtree(path);
        let mut start = prefix.clone().into_bytes();
        let mut children: Vec<String> = Vec::new();
        loop {
            let resp = self
                .call("children", path, true, |mut c| {
                    let (start, end) = (start.clone(), end.clone());
                    async move {
                        c.get(
                            start,
                            Some(
                                GetOptions::new()
                                    .with_range(end)
                                    .with_keys_only()
                                    .with_limit(LIST_PAGE),
                            ),
                        )
                        .await
                    }
                })
                .await?;
            self.seen(resp.header());
            children.extend(child_names(
                prefix.as_bytes(),
                resp.kvs().iter().map(|kv| kv.key()),
            ));
            match resp.kvs().last() {
                Some(last) if resp.more() => start = next_page(prefix.as_bytes(), last.key()),
                _ => break,
            }
        }
        children.sort();
        children.dedup();
        Ok(children)
    }

    pub(super) async fn exists(&self, path: &str) -> Result<bool> {
        validate_path(path)?;
        if path == "/" {
            return Ok(true);
        }
        let resp = self
            .call("exists", path, true, |mut c| async move {
                c.get(path, Some(GetOptions::new().with_count_only())).await
            })
            .await?;
        self.seen(resp.header());
        Ok(resp.count() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_inside_a_subtree_skips_the_rest_of_it_and_a_child_s_own_key_does_not() {
        let p = b"/f/";
        assert_eq!(next_page(p, b"/f/t/ns/0x00_0x10"), b"/f/t0".to_vec());
        assert_eq!(next_page(p, b"/f/t"), b"/f/t\0".to_vec());
        // Keys between a subtree's start and its child plus '0' all lie in the subtree.
        assert!(b"/f/t/zzz".as_slice() < b"/f/t0".as_slice());
        assert!(b"/f/t-x".as_slice() < b"/f/t/".as_slice());
    }

    #[test]
    fn the_prefix_below_a_path() {
        assert_eq!(subtree("/").0, "/");
        assert_eq!(subtree("/a/b").0, "/a/b/");
    }

    fn names(prefix: &str, keys: &[&str]) -> Vec<String> {
        child_names(prefix.as_bytes(), keys.iter().map(|k| k.as_bytes()))
    }

    #[test]
    fn children_are_the_first_segments_under_the_prefix() {
        assert_eq!(
            names(
                "/a/",
                &[
                    "/a/x",
                    "/a/x/deep",
                    "/a/y/only-deep",
                    "/a/b",
                    "/ab",
                    "/a/x/z"
                ]
            ),
            ["b", "x", "y"]
        );
        assert_eq!(names("/", &["/a", "/b/c", "/a/d"]), ["a", "b"]);
        // A key equal to the prefix or with an empty first segment is no child.
        assert_eq!(names("/a/", &["/a/", "/a//x"]), Vec::<String>::new());
        assert_eq!(names("/a/", &[]), Vec::<String>::new());
    }
}
