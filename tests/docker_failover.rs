//! The Docker Compose failover test (`docker/failover-test.sh`), once per store: three `loadmgr broker`
//! containers on a three-member etcd cluster, then on a three-member ZooKeeper ensemble; the leader is
//! SIGKILLed and restarted, a broker is cut off the network and reconnected, and ownership, leadership and
//! fencing are checked from the store, the containers' logs and the brokers' serving logs.
//!
//! It needs a working Docker engine and docker-compose (and for ZooKeeper, Java and Debian's zookeeper
//! package to build the image from), and takes about a minute per store, so it runs only with
//! `LOADMGR_DOCKER_TESTS=1` and when `docker info` succeeds; otherwise it says why it is skipped and passes.
//! The images are built from the `loadmgr` binary of this build (unless `LOADMGR_BIN` names another one).
//! The two tests take turns (a lock), so that each cluster has the machine to itself. `make docker-test`
//! runs the script directly, on both stores.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// One Docker cluster at a time: the failover deadlines are in seconds and the test machines are small.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    if std::env::var("LOADMGR_DOCKER_TESTS").as_deref() != Ok("1") {
        return Some("LOADMGR_DOCKER_TESTS=1 is not set".into());
    }
    match Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!(
            "`docker info` failed ({s}): no usable Docker engine"
        )),
        Err(e) => Some(format!("cannot run docker: {e}")),
    }
}

/// Runs the script on `store` (`LOADMGR_DOCKER_STORE`: etcd or zk).
fn failover_on(store: &str) {
    if let Some(why) = skip_reason() {
        eprintln!("skipping the Docker failover test on {store}: {why}");
        return;
    }
    let _turn = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/failover-test.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script).env("LOADMGR_DOCKER_STORE", store);
    if std::env::var_os("LOADMGR_BIN").is_none() {
        cmd.env("LOADMGR_BIN", env!("CARGO_BIN_EXE_loadmgr"));
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        status.success(),
        "{} on {store} failed ({status}); its output above says which step and why",
        script.display()
    );
}

#[test]
fn docker_compose_failover_on_etcd() {
    failover_on("etcd");
}

#[test]
fn docker_compose_failover_on_zookeeper() {
    failover_on("zk");
}
