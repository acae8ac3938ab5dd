//! Single-node writes of the ZooKeeper store: `put` (create, compare-and-set, unconditional write with the
//! create fallback), `delete`, and the bookkeeping of the ephemerals this store created.
//!
//! # Contract
//!
//! * The mapping of the module docs of [`super`]: an unconditional put is a `setData(-1)`, turned into a
//!   `create` (with missing parents as containers) on NONODE, and back into a `setData` when it loses a
//!   create race (at most 5 attempts); `put -1` is a `create` (NODEEXISTS → `BadVersion`); `put n` a
//!   `setData(n)` (NONODE or BADVERSION → `BadVersion`).
//! * Every ephemeral this store creates is registered with its value (re-created after a session loss) and,
//!   with its `czxid`, as owned by the current session (guards on it must match); a delete by this store
//!   forgets both.
//! * [`to_stat`] converts a znode stat: ephemeral = `ephemeralOwner ≠ 0`, created-by-self = the owner is the
//!   given session.

use std::sync::atomic::Ordering;

use zookeeper_client as zk;

use super::Inner;
use crate::store::path::{parent_or_root, validate_target};
use crate::store::{CreateOptions, Error, Result, Stat, CREATE_ONLY};

/// The store's [`Stat`] of znode `path` with stat `s`, as seen from session `session`.
pub(super) fn to_stat(path: &str, s: &zk::Stat, session: i64) -> Stat {
    Stat {
        path: path.to_string(),
        version: i64::from(s.version),
        creation_revision: s.czxid,
        modification_revision: s.mzxid,
        created_ms: s.ctime,
        modified_ms: s.mtime,
        ephemeral: s.ephemeral_owner != 0,
        created_by_self: s.ephemeral_owner != 0 && s.ephemeral_owner == session,
    }
}

impl Inner {
    /// Reads `paths` (already validated) in one `multiRead` request, in order, `None` for a missing node;
    /// `Ok(None)` when the server does not know the request (before 3.6).
    pub(super) async fn multi_read(
        &self,
        paths: &[String],
    ) -> Result<Option<Vec<Option<crate::store::GetResult>>>> {
        let Some(first) = paths.first() else {
            return Ok(Some(Vec::new()));
        };
        self.timed("get", first, async {
            let client = self.client()?;
            let session = client.session_id().0;
            let mut reader = client.new_multi_reader();
            for p in paths {
                reader
                    .add_get_data(p)
                    .map_err(|e| self.map_err(e, "get", p))?;
            }
            let results = match reader.commit().await {
                Ok(r) => r,
                Err(zk::Error::Unimplemented) => return Ok(None),
                Err(e) => return Err(self.map_err(e, "get", first)),
            };
            if results.len() != paths.len() {
                return Err(Error::Backend {
                    backend: "zookeeper",
                    message: format!(
                        "multiRead of {} nodes from {first} answered {} results",
                        paths.len(),
                        results.len()
                    ),
                });
            }
            paths
                .iter()
                .zip(results)
                .map(|(p, r)| match r {
                    zk::MultiReadResult::Data { data, stat } => Ok(Some(crate::store::GetResult {
                        value: data,
                        stat: self.stat(p, &stat, session),
                    })),
                    zk::MultiReadResult::Error {
                        err: zk::Error::NoNode,
                    } => Ok(None),
                    zk::MultiReadResult::Error { err } => Err(self.map_err(err, "get", p)),
                    _ => Err(Error::Backend {
                        backend: "zookeeper",
                        message: format!("multiRead answered something else than data for {p}"),
                    }),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some)
        })
        .await
    }

    /// [`to_stat`], raising the zxid high-water mark to the node's zxids.
    pub(super) fn stat(&self, path: &str, s: &zk::Stat, session: i64) -> Stat {
        self.hwm.fetch_max(s.mzxid.max(s.czxid), Ordering::Relaxed);
        to_stat(path, s, session)
    }

    /// Creates missing ancestors of `path` as containers, deepest first: usually only the parent is missing,
    /// and every create of an ancestor that exists is a failed transaction the server logs (the crate's
    /// `mkdir` tries them all from the root).
    pub(super) async fn create_parents(&self, client: &zk::Client, path: &str) -> Result<()> {
        let mode = zk::CreateMode::Container.with_acls(self.acls());
        let mut missing = Vec::new();
        let mut dir = parent_or_root(path);
        while let Some(d) = dir.filter(|d| *d != "/") {
            match client.create(d, &[], &mode).await {
                Ok(_) | Err(zk::Error::NodeExists) => break,
                Err(zk::Error::NoNode) => {
                    missing.push(d);
                    dir = parent_or_root(d);
                }
                Err(e) => return Err(self.map_err(e, "create parents of", path)),
            }
        }
        // Back down: each one's parent exists now.
        for d in missing.into_iter().rev() {
            match client.create(d, &[], &mode).await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(self.map_err(e, "create parents of", path)),
            }
        }
        Ok(())
    }

    /// `create` with parents; returns the created path and its stat.
    pub(super) async fn create(
        &self,
        client: &zk::Client,
        path: &str,
        value: &[u8],
        options: CreateOptions,
    ) -> std::result::Result<(String, zk::Stat), zk::Error> {
        let mut parents_made = false;
        loop {
            match client.create(path, value, &self.mode(options)).await {
                Ok((stat, seq)) => {
                    let created = if options.sequential {
                        format!("{path}{seq}")
                    } else {
                        path.to_string()
                    };
                    return Ok((created, stat));
                }
                Err(zk::Error::NoNode) if !parents_made => {
                    parents_made = true;
                    if let Some(p) = parent_or_root(path).filter(|p| *p != "/") {
                        client
                            .mkdir(p, &zk::CreateMode::Container.with_acls(self.acls()))
                            .await?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub(super) async fn put(
        &self,
        path: &str,
        value: &[u8],
        expected: Option<i64>,
        options: CreateOptions,
    ) -> Result<Stat> {
        validate_target(path, "written")?;
        let client = self.client()?;
        let session = client.session_id().0;
        let stat = match expected {
            Some(CREATE_ONLY) => match self.create(&client, path, value, options).await {
                Ok((created, stat)) => {
                    self.created(&client, &created, value, options, stat, session)
                        .await?
                }
                Err(zk::Error::NodeExists) => return Err(Error::bad_version(path, CREATE_ONLY)),
                Err(e) => return Err(self.map_err(e, "create", path)),
            },
            Some(v) => match client.set_data(path, value, Some(v as i32)).await {
                Ok(stat) => self.stat(path, &stat, session),
                Err(zk::Error::NoNode | zk::Error::BadVersion) => {
                    return Err(Error::bad_version(path, v))
                }
                Err(e) => return Err(self.map_err(e, "set", path)),
            },
            None if options.sequential => match self.create(&client, path, value, options).await {
                Ok((created, stat)) => {
                    self.created(&client, &created, value, options, stat, session)
                        .await?
                }
                Err(e) => return Err(self.map_err(e, "create", path)),
            },
            None => {
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    match client.set_data(path, value, None).await {
                        Ok(stat) => break self.stat(path, &stat, session),
                        Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(self.map_err(e, "set", path)),
                    }
                    match self.create(&client, path, value, options).await {
                        Ok((created, stat)) => {
                            break self
                                .created(&client, &created, value, options, stat, session)
                                .await?
                        }
                        Err(zk::Error::NodeExists) if attempts < 5 => continue,
                        Err(e) => return Err(self.map_err(e, "create", path)),
                    }
                }
            }
        };
        let mut eph = self.ephemerals.lock().unwrap();
        if let Some(v) = eph.get_mut(&stat.path) {
            *v = value.to_vec();
        }
        Ok(stat)
    }

    /// The stat of a node this store just created, registering it if ephemeral.
    pub(super) async fn created(
        &self,
        client: &zk::Client,
        path: &str,
        value: &[u8],
        options: CreateOptions,
        stat: zk::Stat,
        session: i64,
    ) -> Result<Stat> {
        if options.ephemeral {
            self.ephemerals
                .lock()
                .unwrap()
                .insert(path.to_string(), value.to_vec());
        }
        let stat = if stat.is_invalid() {
            match client.check_stat(path).await {
                Ok(Some(s)) => s,
                Ok(None) => return Err(Error::not_found(path)),
                Err(e) => return Err(self.map_err(e, "stat", path)),
            }
        } else {
            stat
        };
        if options.ephemeral {
            self.owned
                .lock()
                .unwrap()
                .insert(path.to_string(), stat.czxid);
        }
        Ok(self.stat(path, &stat, session))
    }

    pub(super) async fn delete(&self, path: &str, expected: Option<i64>) -> Result<()> {
        validate_target(path, "deleted")?;
        let client = self.client()?;
        match client.delete(path, expected.map(|v| v as i32)).await {
            Ok(()) => {
                self.ephemerals.lock().unwrap().remove(path);
                self.disown(path);
                Ok(())
            }
            Err(zk::Error::BadVersion) => Err(Error::bad_version(path, expected.unwrap_or(-1))),
            Err(e) => Err(self.map_err(e, "delete", path)),
        }
    }

    /// Marks an owned node as gone, so guards on it fail.
    pub(super) fn disown(&self, path: &str) {
        if let Some(czxid) = self.owned.lock().unwrap().get_mut(path) {
            *czxid = -1;
        }
    }

    /// Deletes this store's registered ephemerals that still belong to its session (used by `close`), up to
    /// [`CLOSE_DELETES_IN_FLIGHT`] at a time: one after the other, a broker's hundred ownership nodes took two
    /// hundred round trips, and a thousand brokers closing together on a busy server outlasted their close
    /// limit.
    pub(super) async fn delete_own_ephemerals(&self) {
        use futures::StreamExt;
        let Ok(client) = self.client() else { return };
        let session = client.session_id().0;
        let paths: Vec<String> = self.ephemerals.lock().unwrap().keys().cloned().collect();
        futures::stream::iter(paths.into_iter().rev())
            .for_each_concurrent(CLOSE_DELETES_IN_FLIGHT, |path| {
                let client = client.clone();
                async move {
                    if let Ok(Some(stat)) = client.check_stat(&path).await {
                        if stat.ephemeral_owner == session {
                            let _ = client.delete(&path, Some(stat.version)).await;
                        }
                    }
                }
            })
            .await;
    }
}

/// Ephemerals a closing store deletes at once.
const CLOSE_DELETES_IN_FLIGHT: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn znode(ephemeral_owner: i64) -> zk::Stat {
        zk::Stat {
            czxid: 10,
            mzxid: 12,
            pzxid: 11,
            ctime: 1000,
            mtime: 2000,
            version: 3,
            cversion: 0,
            aversion: 0,
            ephemeral_owner,
            data_length: 5,
            num_children: 0,
        }
    }

    #[test]
    fn a_znode_stat_becomes_the_store_stat() {
        assert_eq!(
            to_stat("/a", &znode(0), 77),
            Stat {
                path: "/a".into(),
                version: 3,
                creation_revision: 10,
                modification_revision: 12,
                created_ms: 1000,
                modified_ms: 2000,
                ephemeral: false,
                created_by_self: false,
            }
        );
    }

    #[test]
    fn an_ephemeral_is_created_by_self_only_in_its_own_session() {
        let mine = to_stat("/e", &znode(77), 77);
        assert!(mine.ephemeral && mine.created_by_self);
        let theirs = to_stat("/e", &znode(78), 77);
        assert!(theirs.ephemeral && !theirs.created_by_self);
        // A store without a session (id 0) owns no persistent node.
        let persistent = to_stat("/p", &znode(0), 0);
        assert!(!persistent.ephemeral && !persistent.created_by_self);
    }
}
