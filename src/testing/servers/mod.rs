//! Real ZooKeeper and etcd servers as child processes, for tests and benchmarks.
//!
//! Servers listen on free loopback ports, keep their data in a fresh directory under the system temp dir, and
//! are killed when their handle is dropped. Each server runs under a tiny `sh` watchdog that kills it when
//! the test process goes away (its stdin closes), so a server kept in a `static` for a whole test binary does
//! not outlive the binary.
//!
//! Binaries come from the Debian packages (`zookeeper` for the jars and `zkCli.sh`, `etcd-server` for
//! `etcd`, `etcd-client` for `etcdctl`; `java` from `default-jre-headless`); a missing one panics with the
//! package to install. Overrides: `LOADMGR_ZK_CLASSPATH`, `LOADMGR_JAVA`, `LOADMGR_ETCD`, `LOADMGR_ETCDCTL`,
//! `LOADMGR_ZKCLI`.
//!
//! Measured on the project's 2-core machine: a standalone ZooKeeper serves ~0.8 s after launch (JVM start), a
//! 3-node ensemble ~2 s, etcd ~0.7 s single and ~1 s as a 3-member cluster.
//!
//! # Layout
//!
//! * this file — what both kinds of server need: the binaries' lookup, free ports, [`TempDir`], the watchdog
//!   that ties a server process to the test process, and the wait for a server to serve;
//! * `zookeeper.rs` — [`ZkServer`], [`ZkEnsemble`] and the four-letter words ([`zk_four_letter`]);
//! * `etcd.rs` — [`EtcdServer`] and [`EtcdCluster`];
//! * `certs.rs` — [`TestCertificates`], a throw-away CA and server certificate for TLS.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod certs;
mod etcd;
mod zookeeper;

pub use certs::TestCertificates;
pub use etcd::{EtcdCluster, EtcdServer};
pub use zookeeper::{zk_four_letter, ZkEnsemble, ZkServer};

/// How long a server may take to serve before the harness gives up.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn require(found: Option<PathBuf>, what: &str, package: &str) -> PathBuf {
    found.unwrap_or_else(|| {
        panic!(
            "{what} not found: install the Debian package `{package}` \
             (`apt-get install -y {package}`, or run `make deps`)"
        )
    })
}

/// `java`.
pub fn java_binary() -> PathBuf {
    require(
        env_path("LOADMGR_JAVA").or_else(|| find_in_path("java")),
        "java (needed by ZooKeeper)",
        "default-jre-headless",
    )
}

/// The class path of the ZooKeeper server (`zookeeper.jar` lists its dependencies in its manifest).
pub fn zk_classpath() -> String {
    if let Ok(cp) = std::env::var("LOADMGR_ZK_CLASSPATH") {
        if !cp.is_empty() {
            return cp;
        }
    }
    let jar = Path::new("/usr/share/java/zookeeper.jar");
    let jar = require(
        jar.is_file().then(|| jar.to_path_buf()),
        "/usr/share/java/zookeeper.jar",
        "zookeeper",
    );
    let mut cp = jar.display().to_string();
    let logger = Path::new("/usr/share/java/slf4j-simple.jar");
    if logger.is_file() {
        cp.push(':');
        cp.push_str(&logger.display().to_string());
    }
    cp
}

/// `zkCli.sh`.
pub fn zkcli_binary() -> PathBuf {
    let default = Path::new("/usr/share/zookeeper/bin/zkCli.sh");
    require(
        env_path("LOADMGR_ZKCLI")
            .or_else(|| default.is_file().then(|| default.to_path_buf()))
            .or_else(|| find_in_path("zkCli.sh")),
        "zkCli.sh",
        "zookeeper",
    )
}

/// `etcd`.
pub fn etcd_binary() -> PathBuf {
    require(
        env_path("LOADMGR_ETCD").or_else(|| find_in_path("etcd")),
        "etcd",
        "etcd-server",
    )
}

/// `etcdctl`.
pub fn etcdctl_binary() -> PathBuf {
    require(
        env_path("LOADMGR_ETCDCTL").or_else(|| find_in_path("etcdctl")),
        "etcdctl",
        "etcd-client",
    )
}

/// Free loopback ports (bound and released; the kernel does not hand them out again at once).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// A fresh directory under the temp dir, removed on drop — unless the thread is panicking (a test failed) and
/// `LOADMGR_KEEP_FAILED` is set, so the failed test's server logs and data can be read afterwards (the path is
/// printed).
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/loadmgr-<what>-<pid>-<n>`.
    pub fn new(what: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("loadmgr-{what}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir { path }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os("LOADMGR_KEEP_FAILED").is_some() {
            eprintln!("kept for LOADMGR_KEEP_FAILED: {}", self.path.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A server process under an `sh` watchdog that kills it when our end of its stdin closes.
#[derive(Debug)]
struct Guarded {
    watchdog: Child,
    stdin: Option<ChildStdin>,
    pid: u32,
}

impl Guarded {
    fn spawn(program: &Path, args: &[String], log: &Path, env: &[(&str, String)]) -> Guarded {
        let script = r#"log=$1; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!; read _ignored; kill -9 $! 2>/dev/null; exit 0"#;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .arg("sh")
            .arg(log)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut watchdog = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut line = String::new();
        BufReader::new(watchdog.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read the server pid");
        let pid = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("watchdog printed no pid for {}", program.display()));
        Guarded {
            stdin: watchdog.stdin.take(),
            watchdog,
            pid,
        }
    }

    /// Sends `signal` (a name `kill` knows: `STOP`, `CONT`, `TERM`) to the server itself.
    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .stderr(Stdio::null())
            .status();
    }

    /// SIGKILL now, and wait until the watchdog is gone.
    fn kill(&mut self) {
        let _ = Command::new("kill")
            .arg("-9")
            .arg(self.pid.to_string())
            .stderr(Stdio::null())
            .status();
        self.stdin.take();
        let _ = self.watchdog.wait();
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_until(what: &str, log: &Path, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < START_TIMEOUT {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let tail = std::fs::read_to_string(log).unwrap_or_default();
    let tail: String = tail
        .lines()
        .rev()
        .take(30)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    panic!("{what} did not serve within {START_TIMEOUT:?}; last log lines:\n{tail}");
}
