//! Batches on ZooKeeper: one atomic `multi` per part, planned op by op and re-planned when the server
//! reports a missing or existing node.
//!
//! # Contract
//!
//! * [`split_by_size`]: a batch whose payload stays under [`MAX_MULTI_BYTES`] is one multi in the caller's
//!   order; a larger one is split into parts under the limit, each led by every guard of the batch.
//! * [`Plan::first`]: an unconditional non-sequential put is first tried as `setData(-1)` (the common
//!   update, one round trip), a compare-and-set as `setData(n)`, any other put as a `create`, a delete as
//!   `delete(n or -1)`, a guard as `check(version)`.
//! * [`recover`] decides what a failed op of a multi means: an unconditional put switches between `setData`
//!   and `create` as the node turns out missing or existing, a create on a missing parent first creates the
//!   parents (once), and otherwise the failure is the op's answer (`BadVersion` for a lost create or
//!   compare-and-set, `Fenced` for a guard). Re-planning is bounded by the caller (`2 × ops + 2` attempts).
//! * A guard on an ephemeral this store created must also match the `czxid` it created (see the module docs
//!   of [`super`]); a recursive watch on that node is installed first (unless a watched root covers it)
//!   so that its deletion is learnt, and the node is checked once more when its watch is new.

use std::sync::Arc;

use zookeeper_client as zk;

use super::Inner;
use crate::store::path::validate_batch;
use crate::store::{Error, Op, OpResult, Result, CREATE_ONLY};

/// Largest payload of one multi; ZooKeeper's packet limit (jute.maxbuffer) is just under 1 MiB.
pub(super) const MAX_MULTI_BYTES: usize = 900 * 1024;

/// A multi with more unconditional puts or creates than this is planned from the nodes' existence first
/// ([`Inner::preplan`]).
const PREPLAN_ABOVE: usize = 8;

/// Most parents remembered as existing by [`Inner::preplan`] (about 100 bytes each).
const MAX_KNOWN_PARENTS: usize = 100_000;

/// How one op of a multi is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// `setData` with this expected version (`None`: any).
    Set(Option<i32>),
    /// `create`; `true` once the missing parents were created for it.
    Create(bool),
    /// `delete` with this expected version (`None`: any).
    Delete(Option<i32>),
    /// `check` of this version.
    Check(i32),
}

impl Plan {
    /// The first plan for `op`; see the module docs.
    pub(super) fn first(op: &Op) -> Plan {
        match op {
            Op::Put {
                expected_version: None,
                options,
                ..
            } if !options.sequential => Plan::Set(None),
            Op::Put {
                expected_version: Some(v),
                ..
            } if *v != CREATE_ONLY => Plan::Set(Some(*v as i32)),
            Op::Put { .. } => Plan::Create(false),
            Op::Delete {
                expected_version, ..
            } => Plan::Delete(expected_version.map(|v| v as i32)),
            Op::Check(g) => Plan::Check(g.version as i32),
        }
    }
}

/// What to do after an op of a multi failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Recovery {
    /// Send the multi again with this plan for the op.
    Replan(Plan),
    /// Create the op's missing parents, then send it again as `Create(true)`.
    CreateParents,
    /// The batch fails with this error.
    Fail(Error),
    /// The batch fails with the client error as mapped for the op's path.
    Unexpected(zk::Error),
}

/// The recovery from `error` of `op` sent as `plan`; `retry` is false once the attempts are used up.
pub(super) fn recover(op: &Op, plan: Plan, error: zk::Error, retry: bool) -> Recovery {
    let path = op.path();
    match (op, plan, error) {
        (
            Op::Put {
                expected_version: None,
                ..
            },
            Plan::Set(None),
            zk::Error::NoNode,
        ) if retry => Recovery::Replan(Plan::Create(false)),
        (
            Op::Put {
                expected_version: None,
                options,
                ..
            },
            Plan::Create(_),
            zk::Error::NodeExists,
        ) if retry && !options.sequential => Recovery::Replan(Plan::Set(None)),
        (_, Plan::Create(false), zk::Error::NoNode) if retry => Recovery::CreateParents,
        (_, Plan::Create(_), zk::Error::NodeExists) => {
            Recovery::Fail(Error::bad_version(path, CREATE_ONLY))
        }
        (_, Plan::Set(Some(v)), zk::Error::NoNode | zk::Error::BadVersion) => {
            Recovery::Fail(Error::bad_version(path, i64::from(v)))
        }
        (_, Plan::Delete(v), zk::Error::BadVersion) => {
            Recovery::Fail(Error::bad_version(path, v.map(i64::from).unwrap_or(-1)))
        }
        (_, Plan::Check(_), zk::Error::NoNode | zk::Error::BadVersion) => {
            Recovery::Fail(Error::Fenced {
                path: path.to_string(),
            })
        }
        (_, _, e) => Recovery::Unexpected(e),
    }
}

impl Inner {
    pub(super) async fn batch(self: &Arc<Self>, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        validate_batch(&ops)?;
        if ops.is_empty() {
            self.client()?;
            return Ok(Vec::new());
        }
        let mut results = Vec::with_capacity(ops.len());
        for chunk in split_by_size(&ops) {
            results.extend(self.multi(chunk).await?);
        }
        Ok(results)
    }

    /// For a multi with more than [`PREPLAN_ABOVE`] unconditional puts or creates: finds out which of the
    /// unconditional puts' nodes exist, and which parents of the creates exist (creating the missing ones),
    /// all reads in flight together. Otherwise each missing node or parent would fail the whole multi once and
    /// be re-planned one at a time, sending it again each time: a first flush of 10,000 new bundle-data nodes
    /// in many namespaces took longer than the operation timeout.
    ///
    /// A create-only put is not read: if its node exists the multi fails whatever the plan. A parent seen to
    /// exist is remembered ([`Inner::parents`]) and not read again; if the server reaped it meanwhile (an
    /// empty container), the usual recovery creates it.
    async fn preplan(&self, client: &zk::Client, ops: &[&Op], plans: &mut [Plan]) -> Result<()> {
        // An unconditional non-sequential put first planned as an update: it may have to be a create.
        let unconditional = |op: &Op, plan: Plan| {
            matches!(
                (op, plan),
                (Op::Put { expected_version: None, options, .. }, Plan::Set(None)) if !options.sequential
            )
        };
        let candidates = ops
            .iter()
            .zip(plans.iter())
            .filter(|(op, plan)| unconditional(op, **plan) || matches!(plan, Plan::Create(false)))
            .count();
        if candidates <= PREPLAN_ABOVE {
            return Ok(());
        }
        let unconditional: Vec<usize> = (0..ops.len())
            .filter(|&i| unconditional(ops[i], plans[i]))
            .collect();
        let stats = futures::future::join_all(
            unconditional
                .iter()
                .map(|&i| client.check_stat(ops[i].path())),
        )
        .await;
        for (&i, stat) in unconditional.iter().zip(stats) {
            let exists = stat
                .map_err(|e| self.map_err(e, "batch", ops[i].path()))?
                .is_some();
            if !exists {
                plans[i] = Plan::Create(false);
            }
        }
        let parents: std::collections::BTreeSet<&str> = (0..ops.len())
            .filter(|&i| matches!(plans[i], Plan::Create(false)))
            .filter_map(|i| crate::store::path::parent_or_root(ops[i].path()))
            .filter(|p| *p != "/")
            .collect();
        let parents: Vec<&str> = {
            let known = self.parents.lock().unwrap();
            parents
                .into_iter()
                .filter(|p| !known.contains(*p))
                .collect()
        };
        let found = futures::future::join_all(parents.iter().map(|p| client.check_stat(p))).await;
        for (parent, stat) in parents.iter().zip(found) {
            let exists = stat
                .map_err(|e| self.map_err(e, "batch", parent))?
                .is_some();
            if !exists {
                // `create_parents` makes the ancestors of a path: of a child of `parent`, so `parent` too.
                self.create_parents(client, &format!("{parent}/x")).await?;
            }
            self.parent_exists(parent);
        }
        // The creates stay `Create(false)`: a parent removed meanwhile (an empty container the server reaped)
        // is created again by the usual recovery.
        Ok(())
    }

    /// The results of a committed multi, with the stat of every node it created. Some servers answer a
    /// `create2` inside a multi without its stat (ZOOKEEPER-4026 and ZOOKEEPER-4667; Debian 12's 3.8.0 does);
    /// those nodes are read back together, in one `multiRead` (pipelined `exists` calls on a server without
    /// it), instead of one round trip each. Read one at a time, a leader's multi of 16 records and their inbox
    /// entries waited for 32 sequential reads: 300 ms in all under a lookup storm, against 45 ms for the
    /// commit. A node gone meanwhile keeps its invalid stat, and [`Inner::created`] reports it.
    async fn fill_create_stats(
        &self,
        client: &zk::Client,
        mut done: Vec<zk::MultiWriteResult>,
    ) -> Result<Vec<zk::MultiWriteResult>> {
        let missing: Vec<(usize, String)> = done
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                zk::MultiWriteResult::Create { path, stat } if stat.is_invalid() => {
                    Some((i, path.clone()))
                }
                _ => None,
            })
            .collect();
        if missing.is_empty() {
            return Ok(done);
        }
        let mut reader = client.new_multi_reader();
        for (_, path) in &missing {
            reader
                .add_get_data(path)
                .map_err(|e| self.map_err(e, "stat", path))?;
        }
        let stats: Vec<Option<zk::Stat>> = match reader.commit().await {
            Ok(read) if read.len() == missing.len() => read
                .into_iter()
                .map(|r| match r {
                    zk::MultiReadResult::Data { stat, .. } => Some(stat),
                    _ => None,
                })
                .collect(),
            Ok(_) | Err(zk::Error::Unimplemented) => {
                futures::future::join_all(missing.iter().map(|(_, p)| client.check_stat(p)))
                    .await
                    .into_iter()
                    .zip(&missing)
                    .map(|(r, (_, p))| r.map_err(|e| self.map_err(e, "stat", p)))
                    .collect::<Result<Vec<_>>>()?
            }
            Err(e) => return Err(self.map_err(e, "stat", &missing[0].1)),
        };
        for ((i, _), found) in missing.into_iter().zip(stats) {
            if let (Some(found), zk::MultiWriteResult::Create { stat, .. }) = (found, &mut done[i])
            {
                *stat = found;
            }
        }
        Ok(done)
    }

    /// Remembers that `parent` exists, forgetting everything once [`MAX_KNOWN_PARENTS`] are remembered.
    fn parent_exists(&self, parent: &str) {
        let mut known = self.parents.lock().unwrap();
        if known.len() >= MAX_KNOWN_PARENTS {
            known.clear();
        }
        known.insert(parent.to_owned());
    }

    /// One atomic multi.
    async fn multi(self: &Arc<Self>, ops: Vec<&Op>) -> Result<Vec<OpResult>> {
        for op in &ops {
            // Deletions of owned nodes are learnt from a recursive watch on them (or on a watched root
            // above them); a guard on any other node needs none. A node watched only from now on is checked
            // once more: it may have been deleted (and created again) before.
            if let Op::Check(g) = op {
                let owned = self.owned.lock().unwrap().get(&g.path).copied();
                if let Some(czxid) = owned.filter(|c| *c != -1) {
                    if self.ensure_watch(&g.path).await? {
                        self.verify_owned_node(&self.client()?, &g.path, czxid)
                            .await?;
                    }
                }
            }
        }
        for op in &ops {
            if let Op::Check(g) = op {
                match self.owned.lock().unwrap().get(&g.path) {
                    Some(czxid) if *czxid != g.creation_revision => {
                        return Err(Error::Fenced {
                            path: g.path.clone(),
                        })
                    }
                    _ => {}
                }
            }
        }
        let client = self.client()?;
        let session = client.session_id().0;
        let mut plans: Vec<Plan> = ops.iter().map(|op| Plan::first(op)).collect();
        self.preplan(&client, &ops, &mut plans).await?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut writer = client.new_multi_writer();
            for (op, plan) in ops.iter().zip(&plans) {
                let added = match (op, plan) {
                    (Op::Put { path, value, .. }, Plan::Set(v)) => {
                        writer.add_set_data(path, value, *v)
                    }
                    (
                        Op::Put {
                            path,
                            value,
                            options,
                            ..
                        },
                        Plan::Create(_),
                    ) => writer.add_create(path, value, &self.mode(*options)),
                    (Op::Delete { path, .. }, Plan::Delete(v)) => writer.add_delete(path, *v),
                    (Op::Check(g), Plan::Check(v)) => writer.add_check_version(&g.path, *v),
                    _ => unreachable!("plan matches op"),
                };
                added.map_err(|e| self.map_err(e, "batch", op.path()))?;
            }
            match writer.commit().await {
                Ok(done) => {
                    let done = self.fill_create_stats(&client, done).await?;
                    let mut out = Vec::with_capacity(done.len());
                    for (op, result) in ops.iter().zip(done) {
                        out.push(match (op, result) {
                            (
                                Op::Put { value, options, .. },
                                zk::MultiWriteResult::Create { path, stat },
                            ) => OpResult::Put(
                                self.created(&client, &path, value, *options, stat, session)
                                    .await?,
                            ),
                            (
                                Op::Put { path, value, .. },
                                zk::MultiWriteResult::SetData { stat },
                            ) => {
                                if let Some(v) =
                                    self.ephemerals.lock().unwrap().get_mut(path.as_str())
                                {
                                    *v = value.clone();
                                }
                                OpResult::Put(self.stat(path, &stat, session))
                            }
                            (Op::Delete { path, .. }, zk::MultiWriteResult::Delete) => {
                                self.ephemerals.lock().unwrap().remove(path.as_str());
                                self.disown(path);
                                OpResult::Delete
                            }
                            (Op::Check(_), zk::MultiWriteResult::Check) => OpResult::Check,
                            (op, r) => {
                                return Err(Error::Backend {
                                    backend: "zookeeper",
                                    message: format!("multi answered {r:?} for {op:?}"),
                                })
                            }
                        });
                    }
                    return Ok(out);
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => {
                    return Err(self.map_err(source, "batch", ops[0].path()))
                }
                Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                    let op = ops[index];
                    let path = op.path();
                    let retry = attempts <= 2 * ops.len() + 2;
                    match recover(op, plans[index], source, retry) {
                        Recovery::Replan(plan) => plans[index] = plan,
                        Recovery::CreateParents => {
                            self.create_parents(&client, path).await?;
                            plans[index] = Plan::Create(true);
                        }
                        Recovery::Fail(e) => return Err(e),
                        Recovery::Unexpected(e) => return Err(self.map_err(e, "batch", path)),
                    }
                }
            }
        }
    }
}

/// Splits a batch into multis under the packet limit.
pub(super) fn split_by_size(ops: &[Op]) -> Vec<Vec<&Op>> {
    let checks: Vec<&Op> = ops.iter().filter(|op| matches!(op, Op::Check(_))).collect();
    let size = |op: &Op| {
        op.path().len()
            + 64
            + match op {
                Op::Put { value, .. } => value.len(),
                _ => 0,
            }
    };
    let base: usize = checks.iter().map(|op| size(op)).sum();
    let mut chunks: Vec<Vec<&Op>> = Vec::new();
    let mut current: Vec<&Op> = Vec::new();
    let mut bytes = base;
    for op in ops.iter().filter(|op| !matches!(op, Op::Check(_))) {
        if !current.is_empty() && bytes + size(op) > MAX_MULTI_BYTES {
            chunks.push(std::mem::take(&mut current));
            bytes = base;
        }
        bytes += size(op);
        current.push(op);
    }
    chunks.push(current);
    if chunks.len() == 1 {
        // Keep the caller's order (checks where they were).
        return vec![ops.iter().collect()];
    }
    chunks
        .into_iter()
        .map(|chunk| checks.iter().copied().chain(chunk).collect())
        .collect()
}

#[cfg(test)]
mod tests;
