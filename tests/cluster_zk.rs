//! Three `loadmgr broker` processes with synthetic hosts on a real ZooKeeper, checked with `zkCli.sh` and
//! `loadmgr admin`: leadership, reports, flush, AvgShedder rebalancing, a manual unload, a malformed report,
//! the leader SIGKILLed mid-move, a follower SIGKILLed, and an ownership checker throughout.

mod cluster_support;

use std::process::Command;

use loadmgr::testing::servers::{zkcli_binary, ZkServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_on_zookeeper() {
    let server = ZkServer::start();
    let address = server.address();
    let a2 = address.clone();
    let read = Box::new(move |path: &str| {
        let out = Command::new(zkcli_binary())
            .args(["-server", &address, "get", path])
            .output()
            .expect("run zkCli.sh");
        assert!(
            out.status.success(),
            "zkCli.sh get {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let write = Box::new(move |path: &str, value: &str| {
        let out = Command::new(zkcli_binary())
            .args(["-server", &a2, "create", path, value])
            .output()
            .expect("run zkCli.sh");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("Created"),
            "zkCli.sh create {path}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
    cluster_support::scenario(&server.url(), read, write).await;
}
