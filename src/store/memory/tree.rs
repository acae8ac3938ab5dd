//! The in-memory tree every session of one store shares: its nodes and revision counter, the notifications
//! it publishes to every session (in commit order), and transactions with an undo log, so that a batch that
//! fails leaves no trace.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::store::fanout::{node_change, Fanout};
use crate::store::path::{parent_or_root, sequence_suffix};
use crate::store::{Error, Notification, NotificationType, Op, Result, CREATE_ONLY};

#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) value: Vec<u8>,
    pub(super) version: i64,
    pub(super) created_rev: i64,
    pub(super) modified_rev: i64,
    pub(super) created_ms: i64,
    pub(super) modified_ms: i64,
    pub(super) owner: Option<u64>,
    /// Child creations so far: the next sequential suffix.
    pub(super) cversion: i64,
}

#[derive(Debug)]
pub(super) struct Data {
    pub(super) nodes: BTreeMap<String, Node>,
    pub(super) revision: i64,
    pub(super) next_session: u64,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) name: Option<String>,
    pub(super) data: Mutex<Data>,
    /// Every session's notification fan-out (not the sessions: see `Session::notifications`).
    pub(super) sessions: Mutex<Vec<Weak<Fanout<Notification>>>>,
    pub(super) epoch_ms: i64,
    pub(super) started: Instant,
}

impl Shared {
    pub(super) fn new(name: Option<String>) -> Arc<Shared> {
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_string(),
            Node {
                value: Vec::new(),
                version: 0,
                created_rev: 0,
                modified_rev: 0,
                created_ms: epoch_ms,
                modified_ms: epoch_ms,
                owner: None,
                cversion: 0,
            },
        );
        Arc::new(Shared {
            name,
            data: Mutex::new(Data {
                nodes,
                revision: 0,
                next_session: 1,
            }),
            sessions: Mutex::new(Vec::new()),
            epoch_ms,
            started: Instant::now(),
        })
    }

    pub(super) fn now_ms(&self) -> i64 {
        self.epoch_ms + self.started.elapsed().as_millis() as i64
    }

    /// Delivers notifications to every live session's subscribers; called with the data lock held so that
    /// every subscriber sees writes in commit order.
    pub(super) fn publish(&self, notifications: &[Notification]) {
        if notifications.is_empty() {
            return;
        }
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|w| w.strong_count() > 0);
        for fanout in sessions.iter().filter_map(Weak::upgrade) {
            for n in notifications {
                fanout.notify(n.clone());
            }
        }
    }

    /// Deletes every ephemeral of `owner`, publishing the deletions. Called with the data lock held.
    pub(super) fn delete_ephemerals(&self, data: &mut Data, owner: u64) {
        let paths: Vec<String> = data
            .nodes
            .iter()
            .filter(|(_, n)| n.owner == Some(owner))
            .map(|(p, _)| p.clone())
            .collect();
        let mut events = Vec::new();
        for path in paths {
            data.nodes.remove(&path);
            data.revision += 1;
            events.extend(node_change(NotificationType::Deleted, &path));
        }
        self.publish(&events);
    }
}

pub(super) enum TxnResult {
    Put(String),
    Delete,
    Check,
}

/// Mutations with an undo log, so a failing batch leaves no trace.
pub(super) struct Txn<'a> {
    pub(super) data: &'a mut Data,
    pub(super) undo: Vec<(String, Option<Node>)>,
    pub(super) events: Vec<Notification>,
    pub(super) now: i64,
    pub(super) session: u64,
    pub(super) revision_before: i64,
}

impl Txn<'_> {
    pub(super) fn set(&mut self, path: &str, node: Option<Node>) {
        let previous = match node {
            Some(n) => self.data.nodes.insert(path.to_string(), n),
            None => self.data.nodes.remove(path),
        };
        self.undo.push((path.to_string(), previous));
    }

    pub(super) fn rollback(&mut self) {
        while let Some((path, previous)) = self.undo.pop() {
            match previous {
                Some(n) => self.data.nodes.insert(path, n),
                None => self.data.nodes.remove(&path),
            };
        }
        self.data.revision = self.revision_before;
        self.events.clear();
    }

    pub(super) fn has_children(&self, path: &str) -> bool {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.data
            .nodes
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix) && k != "/")
    }

    /// Creates `path` (its parent must exist), bumping the parent's child counter.
    pub(super) fn create(&mut self, path: &str, value: &[u8], owner: Option<u64>) -> Result<()> {
        let parent_path = parent_or_root(path).expect("not the root").to_string();
        let mut parent_node = self
            .data
            .nodes
            .get(&parent_path)
            .cloned()
            .expect("parent exists");
        if parent_node.owner.is_some() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "{path}: the parent {parent_path} is ephemeral and cannot have children"
                ),
            });
        }
        parent_node.cversion += 1;
        self.set(&parent_path, Some(parent_node));
        self.data.revision += 1;
        let node = Node {
            value: value.to_vec(),
            version: 0,
            created_rev: self.data.revision,
            modified_rev: self.data.revision,
            created_ms: self.now,
            modified_ms: self.now,
            owner,
            cversion: 0,
        };
        self.set(path, Some(node));
        self.events
            .extend(node_change(NotificationType::Created, path));
        Ok(())
    }

    /// Creates missing ancestors of `path` as empty persistent nodes.
    pub(super) fn create_parents(&mut self, path: &str) -> Result<()> {
        let mut missing = Vec::new();
        let mut p = path;
        while let Some(parent) = parent_or_root(p) {
            if self.data.nodes.contains_key(parent) {
                break;
            }
            missing.push(parent.to_string());
            p = parent;
        }
        for m in missing.into_iter().rev() {
            self.create(&m, b"", None)?;
        }
        Ok(())
    }

    /// Applies one op; also returns the path of an ephemeral it created.
    pub(super) fn op(&mut self, op: &Op) -> Result<(TxnResult, Option<String>)> {
        match op {
            Op::Check(guard) => match self.data.nodes.get(&guard.path) {
                Some(n)
                    if n.created_rev == guard.creation_revision && n.version == guard.version =>
                {
                    Ok((TxnResult::Check, None))
                }
                _ => Err(Error::Fenced {
                    path: guard.path.clone(),
                }),
            },
            Op::Delete {
                path,
                expected_version,
            } => {
                if path == "/" {
                    return Err(Error::InvalidArgument {
                        reason: "the root cannot be deleted".into(),
                    });
                }
                let Some(node) = self.data.nodes.get(path) else {
                    return Err(Error::not_found(path));
                };
                if let Some(v) = expected_version {
                    if node.version != *v {
                        return Err(Error::bad_version(path, *v));
                    }
                }
                if self.has_children(path) {
                    return Err(Error::NotEmpty { path: path.clone() });
                }
                self.set(path, None);
                self.data.revision += 1;
                self.events
                    .extend(node_change(NotificationType::Deleted, path));
                Ok((TxnResult::Delete, None))
            }
            Op::Put {
                path,
                value,
                expected_version,
                options,
            } => {
                if path == "/" {
                    return Err(Error::InvalidArgument {
                        reason: "the root cannot be written".into(),
                    });
                }
                let mut target = path.clone();
                if options.sequential {
                    self.create_parents(path)?;
                    let parent_path = parent_or_root(path).expect("not the root");
                    let seq = self.data.nodes[parent_path].cversion;
                    target = format!("{path}{}", sequence_suffix(seq));
                }
                let existing = self.data.nodes.get(&target).cloned();
                match (existing, expected_version) {
                    (Some(_), Some(CREATE_ONLY)) => Err(Error::bad_version(path, CREATE_ONLY)),
                    (None, Some(v)) if *v != CREATE_ONLY => Err(Error::bad_version(path, *v)),
                    (Some(n), Some(v)) if n.version != *v => Err(Error::bad_version(path, *v)),
                    (Some(mut n), _) => {
                        self.data.revision += 1;
                        n.value = value.clone();
                        n.version += 1;
                        n.modified_rev = self.data.revision;
                        n.modified_ms = self.now;
                        self.set(&target, Some(n));
                        self.events.push(Notification::new(
                            NotificationType::Modified,
                            target.clone(),
                        ));
                        Ok((TxnResult::Put(target), None))
                    }
                    (None, _) => {
                        self.create_parents(&target)?;
                        let owner = options.ephemeral.then_some(self.session);
                        self.create(&target, value, owner)?;
                        let eph = options.ephemeral.then(|| target.clone());
                        Ok((TxnResult::Put(target), eph))
                    }
                }
            }
        }
    }
}
