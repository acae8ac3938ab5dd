//! Txn planning on etcd: how a batch of [`Op`]s becomes one or more txns (compares in `If`, writes in
//! `Then`, reads in `Else` that name the failing op), and how the `Else` reads of a failed txn are read.
//!
//! # Contract
//!
//! * [`split`]: each txn stays within etcd's limits (≤ [`MAX_TXN_OPS`] compares, writes and reads, under
//!   [`MAX_TXN_BYTES`]) and writes no key twice (sequential puts excepted: their keys differ); a batch that
//!   fits is one txn in the caller's order, otherwise every part is led by every guard of the batch.
//! * [`Plan::build`], per op (etcd's `version` counts from 1, the store's from 0):
//!   * guard: `create_revision == guard.creation_revision` and `version == guard.version + 1`;
//!   * delete: the key exists, no key under `path/` (a range compare, so a node with children fails), and
//!     with an expected version `version == n + 1`;
//!   * put -1: `create_revision == 0`, then a create (on the store's lease if ephemeral);
//!   * put n: `version == n + 1`, then an update that keeps the key's lease and returns the previous
//!     key-value;
//!   * unconditional put: while the existence of its key is unknown, an update without compare (etcd refuses
//!     the whole txn with "key not found" if the key is missing, and the caller re-plans with existence
//!     known); known to exist, `create_revision > 0` and an update; known missing, `create_revision == 0`
//!     and a create;
//!   * sequential put: the key is the path plus the candidate revision's suffix, created only if absent and
//!     no key under the path was created at or after the candidate (`create_revision < candidate` over the
//!     prefix).
//!
//!   An ephemeral create without a lease (the session is being re-established) is `SessionLost`.
//! * [`diagnose`] reads the `Else` reads of a txn that did not succeed: the first op (in batch order) whose
//!   condition fails gives the batch's error (`Fenced`, `NotFound`, `BadVersion`, `NotEmpty`); a sequential
//!   put that met a sibling asks for another candidate ([`Retry::Sequence`]); anything else (an existence
//!   assumption that no longer holds, or a change between the txn and its reads) asks to re-plan.

use std::collections::{HashMap, HashSet};

use etcd_client as etcd;
use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};

use crate::store::path::sequence_suffix;
use crate::store::{Error, Op, Result, CREATE_ONLY};

/// etcd's default `--max-txn-ops`.
pub(super) const MAX_TXN_OPS: usize = 128;
/// Stay well under etcd's default `--max-request-bytes` (1.5 MiB).
pub(super) const MAX_TXN_BYTES: usize = 1024 * 1024;

/// How a compare relates the key's value to the given one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cmp {
    Equal,
    Greater,
    Less,
}

/// A compare of the txn's `If`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cond {
    /// `create_revision(key) <cmp> revision` (0: the key is absent), over every key starting with `key`
    /// when `prefix`.
    Created {
        key: String,
        cmp: Cmp,
        revision: i64,
        prefix: bool,
    },
    /// `version(key) == version` (etcd's version, from 1).
    Version { key: String, version: i64 },
}

/// A write of the txn's `Then`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Write {
    /// A put that creates `key`, on `lease` when ephemeral.
    Create {
        key: String,
        value: Vec<u8>,
        lease: Option<i64>,
    },
    /// A put that keeps the key's lease (`ignore_lease`) and returns the previous key-value.
    Update { key: String, value: Vec<u8> },
    /// A delete of `key`.
    Delete { key: String },
}

/// A read of the txn's `Else`, from which [`diagnose`] names the failing op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Read {
    /// The key (keys only).
    Key(String),
    /// How many keys start with `prefix` (count only), counting only those created at `created_since` or
    /// later when given.
    Count {
        prefix: String,
        created_since: Option<i64>,
    },
}

impl Cond {
    fn to_compare(&self) -> Compare {
        match self {
            Cond::Created {
                key,
                cmp,
                revision,
                prefix,
            } => {
                let op = match cmp {
                    Cmp::Equal => CompareOp::Equal,
                    Cmp::Greater => CompareOp::Greater,
                    Cmp::Less => CompareOp::Less,
                };
                let compare = Compare::create_revision(key.as_str(), op, *revision);
                if *prefix {
                    compare.with_prefix()
                } else {
                    compare
                }
            }
            Cond::Version { key, version } => {
                Compare::version(key.as_str(), CompareOp::Equal, *version)
            }
        }
    }
}

impl Write {
    fn to_op(&self) -> TxnOp {
        match self {
            Write::Create { key, value, lease } => TxnOp::put(
                key.as_str(),
                value.clone(),
                lease.map(|l| PutOptions::new().with_lease(l)),
            ),
            Write::Update { key, value } => TxnOp::put(
                key.as_str(),
                value.clone(),
                Some(PutOptions::new().with_ignore_lease().with_prev_key()),
            ),
            Write::Delete { key } => TxnOp::delete(key.as_str(), None),
        }
    }
}

impl Read {
    fn to_op(&self) -> TxnOp {
        match self {
            Read::Key(key) => TxnOp::get(key.as_str(), Some(GetOptions::new().with_keys_only())),
            Read::Count {
                prefix,
                created_since,
            } => {
                let options = GetOptions::new().with_prefix().with_count_only();
                let options = match created_since {
                    Some(revision) => options.with_min_create_revision(*revision),
                    None => options,
                };
                TxnOp::get(prefix.as_str(), Some(options))
            }
        }
    }
}

/// What to do after a txn that did not succeed without naming a failing op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// Learn which unconditional-put keys exist, and plan again.
    Replan,
    /// Plan again with a newer candidate revision (a sequential name met a sibling).
    Sequence,
}

/// A txn built from ops, with where each op's results sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// The `If` compares.
    pub(super) compares: Vec<Cond>,
    /// The `Then` writes.
    pub(super) then: Vec<Write>,
    /// The `Else` reads.
    pub(super) otherwise: Vec<Read>,
    /// The key each op writes (sequential: the chosen name).
    pub(super) keys: Vec<String>,
    /// Index of the op's first response in `Then`.
    pub(super) success_index: Vec<Option<usize>>,
    /// Index of the op's first read in `Else`.
    pub(super) failure_index: Vec<Option<usize>>,
    /// For unconditional puts planned with existence known: what was assumed.
    pub(super) assumed_exists: Vec<Option<bool>>,
    /// Whether each put creates its key (else it updates it, keeping its lease, and returns the previous
    /// key-value, from which the new stat follows).
    pub(super) created: Vec<bool>,
}

impl Plan {
    /// Plans `ops` as one txn; see the module docs. `known` is the existence of unconditional-put keys
    /// (`None`: not asked yet), `candidate` the revision a sequential name is made from, `lease` the lease
    /// for ephemeral creates (asked only when one is planned).
    pub(super) fn build(
        ops: &[&Op],
        known: Option<&HashMap<String, bool>>,
        candidate: i64,
        lease: &dyn Fn() -> Result<i64>,
    ) -> Result<Plan> {
        let mut compares = Vec::new();
        let mut then = Vec::new();
        let mut otherwise = Vec::new();
        let mut keys = Vec::with_capacity(ops.len());
        let mut success_index = Vec::with_capacity(ops.len());
        let mut failure_index = Vec::with_capacity(ops.len());
        let mut assumed_exists = Vec::with_capacity(ops.len());
        let mut created = vec![false; ops.len()];
        let absent = |key: &str| Cond::Created {
            key: key.to_string(),
            cmp: Cmp::Equal,
            revision: 0,
            prefix: false,
        };
        let present = |key: &str| Cond::Created {
            key: key.to_string(),
            cmp: Cmp::Greater,
            revision: 0,
            prefix: false,
        };
        for op in ops {
            let mut assumed = None;
            match op {
                Op::Check(g) => {
                    compares.push(Cond::Created {
                        key: g.path.clone(),
                        cmp: Cmp::Equal,
                        revision: g.creation_revision,
                        prefix: false,
                    });
                    compares.push(Cond::Version {
                        key: g.path.clone(),
                        version: g.version + 1,
                    });
                    keys.push(g.path.clone());
                    success_index.push(None);
                    failure_index.push(Some(otherwise.len()));
                    otherwise.push(Read::Key(g.path.clone()));
                }
                Op::Delete {
                    path,
                    expected_version,
                    ..
                } => {
                    let children = format!("{path}/");
                    compares.push(present(path));
                    compares.push(Cond::Created {
                        key: children.clone(),
                        cmp: Cmp::Equal,
                        revision: 0,
                        prefix: true,
                    });
                    if let Some(v) = expected_version {
                        compares.push(Cond::Version {
                            key: path.clone(),
                            version: v + 1,
                        });
                    }
                    keys.push(path.clone());
                    success_index.push(Some(then.len()));
                    then.push(Write::Delete { key: path.clone() });
                    failure_index.push(Some(otherwise.len()));
                    otherwise.push(Read::Key(path.clone()));
                    otherwise.push(Read::Count {
                        prefix: children,
                        created_since: None,
                    });
                }
                Op::Put {
                    path,
                    value,
                    expected_version,
                    options,
                } => {
                    let key = path_key(op, candidate);
                    let new_put = || -> Result<Write> {
                        Ok(Write::Create {
                            key: key.clone(),
                            value: value.clone(),
                            lease: if options.ephemeral {
                                Some(lease()?)
                            } else {
                                None
                            },
                        })
                    };
                    let keep_put = || Write::Update {
                        key: path.clone(),
                        value: value.clone(),
                    };
                    let mut creates = false;
                    let failure = match (expected_version, options.sequential) {
                        (_, true) => {
                            creates = true;
                            compares.push(absent(&key));
                            compares.push(Cond::Created {
                                key: path.clone(),
                                cmp: Cmp::Less,
                                revision: candidate,
                                prefix: true,
                            });
                            then.push(new_put()?);
                            Some((key.clone(), true))
                        }
                        (Some(CREATE_ONLY), false) => {
                            creates = true;
                            compares.push(absent(path));
                            then.push(new_put()?);
                            Some((path.clone(), false))
                        }
                        (Some(v), false) => {
                            compares.push(Cond::Version {
                                key: path.clone(),
                                version: v + 1,
                            });
                            then.push(keep_put());
                            Some((path.clone(), false))
                        }
                        (None, false) => match known.and_then(|k| k.get(path.as_str())) {
                            None => {
                                then.push(keep_put());
                                None
                            }
                            Some(true) => {
                                assumed = Some(true);
                                compares.push(present(path));
                                then.push(keep_put());
                                Some((path.clone(), false))
                            }
                            Some(false) => {
                                creates = true;
                                assumed = Some(false);
                                compares.push(absent(path));
                                then.push(new_put()?);
                                Some((path.clone(), false))
                            }
                        },
                    };
                    success_index.push(Some(then.len() - 1));
                    match failure {
                        Some((k, sequential)) => {
                            failure_index.push(Some(otherwise.len()));
                            otherwise.push(Read::Key(k));
                            if sequential {
                                otherwise.push(Read::Count {
                                    prefix: path.clone(),
                                    created_since: Some(candidate),
                                });
                            }
                        }
                        None => failure_index.push(None),
                    }
                    keys.push(key);
                    created[keys.len() - 1] = creates;
                }
            }
            assumed_exists.push(assumed);
        }
        Ok(Plan {
            compares,
            then,
            otherwise,
            keys,
            success_index,
            failure_index,
            assumed_exists,
            created,
        })
    }

    /// The etcd txn of this plan.
    pub(super) fn txn(&self) -> Txn {
        Txn::new()
            .when(
                self.compares
                    .iter()
                    .map(Cond::to_compare)
                    .collect::<Vec<_>>(),
            )
            .and_then(self.then.iter().map(Write::to_op).collect::<Vec<_>>())
            .or_else(self.otherwise.iter().map(Read::to_op).collect::<Vec<_>>())
    }
}

/// The key a put writes: its path, or for a sequential put the path plus the candidate suffix.
pub(super) fn path_key(op: &Op, candidate: i64) -> String {
    match op {
        Op::Put { path, options, .. } if options.sequential => {
            format!("{path}{}", sequence_suffix(candidate))
        }
        other => other.path().to_string(),
    }
}

/// Splits a batch so each txn stays within etcd's limits and writes no key twice; guards go into every
/// part.
pub(super) fn split(ops: &[Op]) -> Vec<Vec<&Op>> {
    let checks: Vec<&Op> = ops.iter().filter(|op| matches!(op, Op::Check(_))).collect();
    // Per op: (compares, then-ops, else-ops, bytes).
    let cost = |op: &Op| -> (usize, usize, usize, usize) {
        let bytes = op.path().len() * 3
            + 32
            + match op {
                Op::Put { value, .. } => value.len(),
                _ => 0,
            };
        match op {
            Op::Check(_) => (2, 0, 1, bytes),
            Op::Delete { .. } => (3, 1, 2, bytes),
            Op::Put { .. } => (2, 1, 2, bytes),
        }
    };
    let base = checks.iter().fold((0, 0, 0, 0), |acc, op| {
        let c = cost(op);
        (acc.0 + c.0, acc.1 + c.1, acc.2 + c.2, acc.3 + c.3)
    });
    let mut parts: Vec<Vec<&Op>> = Vec::new();
    let mut current: Vec<&Op> = Vec::new();
    let mut used = base;
    let mut written: HashSet<&str> = HashSet::new();
    for op in ops.iter().filter(|op| !matches!(op, Op::Check(_))) {
        let c = cost(op);
        let over = used.0 + c.0 > MAX_TXN_OPS
            || used.1 + c.1 > MAX_TXN_OPS
            || used.2 + c.2 > MAX_TXN_OPS
            || used.3 + c.3 > MAX_TXN_BYTES;
        let duplicate = written.contains(op.path())
            && !matches!(op, Op::Put { options, .. } if options.sequential);
        if !current.is_empty() && (over || duplicate) {
            parts.push(std::mem::take(&mut current));
            used = base;
            written.clear();
        }
        used = (used.0 + c.0, used.1 + c.1, used.2 + c.2, used.3 + c.3);
        written.insert(op.path());
        current.push(op);
    }
    parts.push(current);
    if parts.len() == 1 {
        return vec![ops.iter().collect()];
    }
    parts
        .into_iter()
        .map(|part| checks.iter().copied().chain(part).collect())
        .collect()
}

/// A key as an `Else` read found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Found {
    pub(super) create_revision: i64,
    /// etcd's version (from 1).
    pub(super) version: i64,
}

/// What one `Else` response says: the first key found and the count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ReadBack {
    pub(super) first: Option<Found>,
    pub(super) count: i64,
}

/// The `Else` responses of a failed txn, in order (a response that is not a read counts as nothing found).
pub(super) fn read_backs(resp: &etcd::TxnResponse) -> Vec<ReadBack> {
    resp.op_responses()
        .iter()
        .map(|r| match r {
            TxnOpResponse::Get(g) => ReadBack {
                first: g.kvs().first().map(|kv| Found {
                    create_revision: kv.create_revision(),
                    version: kv.version(),
                }),
                count: g.count(),
            },
            _ => ReadBack::default(),
        })
        .collect()
}

/// Names the first failing op from the `Else` reads, or asks for a retry; see the module docs.
pub(super) fn diagnose(ops: &[&Op], plan: &Plan, reads: &[ReadBack]) -> Result<Retry> {
    let read = |at: usize| reads.get(at).and_then(|r| r.first);
    let count = |at: usize| reads.get(at).map_or(0, |r| r.count);
    let mut replan = false;
    let mut sequence = false;
    for (i, op) in ops.iter().enumerate() {
        let Some(at) = plan.failure_index[i] else {
            continue;
        };
        let kv = read(at);
        match op {
            Op::Check(g) => {
                let holds = kv.as_ref().is_some_and(|kv| {
                    kv.create_revision == g.creation_revision && kv.version == g.version + 1
                });
                if !holds {
                    return Err(Error::Fenced {
                        path: g.path.clone(),
                    });
                }
            }
            Op::Delete {
                path,
                expected_version,
                ..
            } => match kv {
                None => return Err(Error::not_found(path)),
                Some(kv) if expected_version.is_some_and(|v| kv.version != v + 1) => {
                    return Err(Error::bad_version(path, expected_version.unwrap_or(-1)))
                }
                Some(_) if count(at + 1) > 0 => return Err(Error::NotEmpty { path: path.clone() }),
                Some(_) => {}
            },
            Op::Put {
                path,
                expected_version,
                options,
                ..
            } => match expected_version {
                _ if options.sequential && (kv.is_some() || count(at + 1) > 0) => {
                    sequence = true;
                }
                _ if options.sequential => {}
                Some(CREATE_ONLY) if kv.is_some() => {
                    return Err(Error::bad_version(path, CREATE_ONLY))
                }
                Some(v)
                    if *v != CREATE_ONLY && kv.as_ref().map_or(true, |kv| kv.version != v + 1) =>
                {
                    return Err(Error::bad_version(path, *v))
                }
                None => {
                    let exists = kv.is_some();
                    if plan.assumed_exists[i] != Some(exists) {
                        replan = true;
                    }
                }
                _ => {}
            },
        }
    }
    if sequence {
        return Ok(Retry::Sequence);
    }
    if replan {
        return Ok(Retry::Replan);
    }
    // Every condition read back as holding: a concurrent change between the txn and its Else branch.
    Ok(Retry::Replan)
}

#[cfg(test)]
mod tests;
