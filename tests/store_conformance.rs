//! The conformance suite (`loadmgr::testing::conformance`) against every backend: memory always, ZooKeeper and
//! etcd on real servers started once for this test binary (one standalone ZooKeeper, one single-member
//! etcd; every test writes under its own root).

use std::sync::OnceLock;
use std::time::Duration;

use loadmgr::store::StoreOptions;
use loadmgr::testing::conformance::{self, MemorySessions, UrlSessions};
use loadmgr::testing::servers::{EtcdServer, ZkServer};

fn zk() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(ZkServer::start)
}

fn etcd() -> &'static EtcdServer {
    static SERVER: OnceLock<EtcdServer> = OnceLock::new();
    SERVER.get_or_init(EtcdServer::start)
}

fn options() -> StoreOptions {
    StoreOptions::default()
        .with_session_timeout(Duration::from_secs(4))
        .with_operation_timeout(Duration::from_secs(10))
}

fn memory() -> MemorySessions {
    MemorySessions::default()
}

fn zookeeper() -> UrlSessions {
    UrlSessions {
        url: zk().url(),
        options: options(),
    }
}

fn etcd_sessions() -> UrlSessions {
    UrlSessions {
        url: etcd().url(),
        options: options(),
    }
}

macro_rules! conformance_tests {
    ($backend:ident, $sessions:expr) => {
        mod $backend {
            use super::*;

            macro_rules! case {
                ($name:ident) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $name() {
                        let sessions = $sessions;
                        let root = conformance::unique_root(concat!(
                            stringify!($backend),
                            "-",
                            stringify!($name)
                        ));
                        conformance::$name(&sessions, &root).await;
                    }
                };
            }

            case!(paths_and_missing_nodes);
            case!(put_version_semantics);
            case!(delete_semantics);
            case!(children_listing);
            case!(large_listings);
            case!(many_reads);
            case!(leaves_of_a_subtree);
            case!(stat_fields);
            case!(ephemeral_lifecycle);
            case!(sequential_nodes);
            case!(notification_sequence);
            case!(nested_roots);
            case!(notifications_carry_the_state_after_the_change);
            case!(batch_semantics);
            case!(batch_updates_after_others_wrote);
            case!(session_expiry_restores_ephemerals);
            case!(typed_json_round_trip);
            case!(parents_and_recursive_delete);
            case!(closed_store);
        }
    };
}

conformance_tests!(memory, memory());
conformance_tests!(zookeeper, zookeeper());
conformance_tests!(etcd, etcd_sessions());
