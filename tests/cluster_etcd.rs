//! The cluster scenario of `cluster_zk.rs` on a real etcd, checked with `etcdctl`.

mod cluster_support;

use std::process::Command;

use loadmgr::testing::servers::{etcdctl_binary, EtcdServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_on_etcd() {
    let server = EtcdServer::start();
    let endpoint = server.endpoint();
    let e2 = endpoint.clone();
    let read = Box::new(move |path: &str| {
        let out = Command::new(etcdctl_binary())
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &endpoint, "get", path, "--print-value-only"])
            .output()
            .expect("run etcdctl");
        assert!(
            out.status.success(),
            "etcdctl get {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let write = Box::new(move |path: &str, value: &str| {
        let out = Command::new(etcdctl_binary())
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &e2, "put", path, value])
            .output()
            .expect("run etcdctl");
        assert!(
            out.status.success(),
            "etcdctl put {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    cluster_support::scenario(&server.url(), read, write).await;
}
