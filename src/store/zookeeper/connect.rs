//! Opening a ZooKeeper store: the ACL that its nodes get, the create modes, and the first session (with the
//! chroot created if missing).
//!
//! # Contract
//!
//! * [`acls_for`]: `world:anyone` all (Pulsar's OPEN_ACL_UNSAFE) for [`ZkAcl::Open`]; with digest
//!   credentials, creator-only or creator-all + world-read; a creator ACL without credentials is
//!   `InvalidArgument`.
//! * [`create_mode`]: the znode mode of [`CreateOptions`] (ephemeral and/or sequential).
//! * [`ZkStore::connect`] returns once a session exists, or fails with [`Error::Unavailable`] naming the
//!   address after the first-connect timeout. Server rotation within an ensemble is the client's: it is given
//!   every `host:port` and moves between them itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};

use tokio::time::Instant;
use zookeeper_client as zk;

use super::session::{install_client, new_client, Install};
use super::{Inner, Tracking, Watches, ZkStore};
use crate::store::fanout::Fanout;
use crate::store::session::SessionState;
use crate::store::{CreateOptions, Error, Result, StoreOptions, ZkAcl};

/// The ACL of every node this store creates; see the module docs.
pub(super) fn acls_for(options: &StoreOptions) -> Result<Vec<zk::Acl>> {
    Ok(match (&options.credentials, options.zk_acl) {
        (_, ZkAcl::Open) => vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())],
        (None, _) => {
            return Err(Error::InvalidArgument {
                reason: "a creator ACL needs credentials".into(),
            })
        }
        (Some(_), ZkAcl::CreatorAllWorldRead) => vec![
            zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("auth", "")),
            zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone()),
        ],
        (Some(_), ZkAcl::CreatorOnly) => vec![zk::Acl::new(
            zk::Permission::ALL,
            zk::AuthId::new("auth", ""),
        )],
    })
}

/// The znode mode for `options`.
pub(super) fn create_mode(options: CreateOptions) -> zk::CreateMode {
    match (options.ephemeral, options.sequential) {
        (false, false) => zk::CreateMode::Persistent,
        (false, true) => zk::CreateMode::PersistentSequential,
        (true, false) => zk::CreateMode::Ephemeral,
        (true, true) => zk::CreateMode::EphemeralSequential,
    }
}

impl Inner {
    pub(super) fn acls(&self) -> zk::Acls<'_> {
        zk::Acls::new(&self.acls)
    }

    /// The create options (mode and ACL) for a node created with `options`.
    pub(super) fn mode(&self, options: CreateOptions) -> zk::CreateOptions<'_> {
        create_mode(options).with_acls(self.acls())
    }
}

impl ZkStore {
    /// Connects to `servers` (`host:port,...`), creating the chroot if missing. Fails with
    /// [`Error::Unavailable`] after the connect timeout.
    pub async fn connect(
        servers: &str,
        chroot: Option<&str>,
        options: StoreOptions,
    ) -> Result<ZkStore> {
        let chroot = chroot.map(str::to_string);
        let acls = acls_for(&options)?;
        let inner = Arc::new(Inner {
            servers: servers.to_string(),
            chroot,
            options,
            acls,
            client: RwLock::new(None),
            session_task: Mutex::new(None),
            generation: AtomicU64::new(0),
            watches: tokio::sync::Mutex::new(Watches::default()),
            tracking: Mutex::new(Tracking::default()),
            scans: tokio::sync::watch::Sender::new(0),
            hwm: AtomicI64::new(0),
            resync_floor: Mutex::new(None),
            notifications: Fanout::default(),
            session: SessionState::new(false),
            ephemerals: Mutex::new(BTreeMap::new()),
            owned: Mutex::new(HashMap::new()),
            sessions: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
            replaced: tokio::sync::Notify::new(),
            parents: Mutex::default(),
        });
        let started = Instant::now();
        let timeout = inner.options.first_connect_timeout();
        let failed = match tokio::time::timeout(timeout, new_client(&inner)).await {
            Ok(Ok((c, task))) => {
                install_client(&inner, c, task, Install::New);
                return Ok(ZkStore { inner });
            }
            Ok(Err(Error::ConnectionLost { reason, .. }))
            | Ok(Err(Error::Timeout {
                operation: reason, ..
            })) => reason,
            Ok(Err(other)) => return Err(other),
            Err(_) => "no server answered".to_owned(),
        };
        let elapsed = started.elapsed();
        // Say why: a refused port, an unknown host and a silent network need different fixes.
        let probe = timeout.min(std::time::Duration::from_secs(2));
        let servers = inner.servers.split(',').map(str::to_owned).collect();
        let why = crate::store::reach::diagnose(servers, probe).await;
        Err(Error::Unavailable {
            address: inner.address(),
            elapsed,
            reason: format!("{failed} ({why})"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Credentials;

    fn options(acl: ZkAcl, credentials: bool) -> StoreOptions {
        StoreOptions {
            zk_acl: acl,
            credentials: credentials.then(|| Credentials {
                user: "u".into(),
                password: "p".into(),
            }),
            ..StoreOptions::default()
        }
    }

    #[test]
    fn the_open_acl_is_world_all_with_or_without_credentials() {
        let open = vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())];
        assert_eq!(acls_for(&options(ZkAcl::Open, false)).unwrap(), open);
        assert_eq!(acls_for(&options(ZkAcl::Open, true)).unwrap(), open);
    }

    #[test]
    fn creator_acls_need_credentials() {
        for acl in [ZkAcl::CreatorOnly, ZkAcl::CreatorAllWorldRead] {
            assert_eq!(
                acls_for(&options(acl, false)),
                Err(Error::InvalidArgument {
                    reason: "a creator ACL needs credentials".into()
                })
            );
        }
        assert_eq!(
            acls_for(&options(ZkAcl::CreatorOnly, true)).unwrap(),
            vec![zk::Acl::new(
                zk::Permission::ALL,
                zk::AuthId::new("auth", "")
            )]
        );
        assert_eq!(
            acls_for(&options(ZkAcl::CreatorAllWorldRead, true)).unwrap(),
            vec![
                zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("auth", "")),
                zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone()),
            ]
        );
    }

    #[test]
    fn create_modes_follow_the_options() {
        let mode = |ephemeral, sequential| {
            create_mode(CreateOptions {
                ephemeral,
                sequential,
            })
        };
        assert_eq!(mode(false, false), zk::CreateMode::Persistent);
        assert_eq!(mode(false, true), zk::CreateMode::PersistentSequential);
        assert_eq!(mode(true, false), zk::CreateMode::Ephemeral);
        assert_eq!(mode(true, true), zk::CreateMode::EphemeralSequential);
        assert_eq!(
            create_mode(CreateOptions::EPHEMERAL),
            zk::CreateMode::Ephemeral
        );
    }
}
