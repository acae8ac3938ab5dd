//! The Docker Compose failover test (`docker/failover-test.sh`): three `loadmgr broker` containers on a
//! three-member etcd cluster; the leader is SIGKILLed and restarted, a broker is cut off the network and
//! reconnected, and ownership, leadership and fencing are checked from the store and the containers' logs.
//!
//! It needs a working Docker engine and docker-compose, and takes about a minute, so it runs only with
//! `LOADMGR_DOCKER_TESTS=1` and when `docker info` succeeds; otherwise it says why it is skipped and passes.
//! The images are built from the `loadmgr` binary of this build (unless `LOADMGR_BIN` names another one).
//! `make docker-test` runs the script directly.

use std::path::Path;
use std::process::{Command, Stdio};

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

#[test]
fn docker_compose_failover() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping the Docker failover test: {why}");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/failover-test.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script);
    if std::env::var_os("LOADMGR_BIN").is_none() {
        cmd.env("LOADMGR_BIN", env!("CARGO_BIN_EXE_loadmgr"));
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        status.success(),
        "{} failed ({status}); its output above says which step and why",
        script.display()
    );
}
