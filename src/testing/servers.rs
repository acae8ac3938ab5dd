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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
             (`apt-get install -y {package}`, or run `make test-deps`)"
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

/// A fresh directory under the temp dir, removed on drop.
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

/// Sends a ZooKeeper four-letter word and returns the answer.
pub fn zk_four_letter(port: u16, word: &str) -> Option<String> {
    let addr = ("127.0.0.1", port);
    let mut stream = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], addr.1)),
        Duration::from_millis(500),
    )
    .ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

fn zk_mode(port: u16) -> Option<String> {
    let out = zk_four_letter(port, "srvr")?;
    out.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
}

/// One ZooKeeper server process (standalone or an ensemble member).
#[derive(Debug)]
struct ZkProcess {
    config: PathBuf,
    log: PathBuf,
    port: u16,
    process: Option<Guarded>,
}

impl ZkProcess {
    fn launch(&mut self) {
        let args = vec![
            "-Xms32m".to_string(),
            "-Xmx256m".to_string(),
            "-XX:+UseSerialGC".to_string(),
            "-XX:TieredStopAtLevel=1".to_string(),
            "-Dzookeeper.admin.enableServer=false".to_string(),
            "-cp".to_string(),
            zk_classpath(),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain".to_string(),
            self.config.display().to_string(),
        ];
        self.process = Some(Guarded::spawn(&java_binary(), &args, &self.log, &[]));
    }

    fn wait_serving(&self, modes: &[&str]) {
        let port = self.port;
        wait_until(&format!("ZooKeeper on 127.0.0.1:{port}"), &self.log, || {
            zk_mode(port).is_some_and(|m| modes.contains(&m.as_str()))
        });
    }
}

fn write_zk_config(dir: &Path, port: u16, tick_ms: u64, extra: &[String]) -> PathBuf {
    std::fs::create_dir_all(dir.join("data")).expect("zk data dir");
    let mut lines = vec![
        format!("tickTime={tick_ms}"),
        "initLimit=10".to_string(),
        "syncLimit=5".to_string(),
        format!("dataDir={}", dir.join("data").display()),
        format!("clientPort={port}"),
        "clientPortAddress=127.0.0.1".to_string(),
        "maxClientCnxns=0".to_string(),
        "admin.enableServer=false".to_string(),
        "4lw.commands.whitelist=*".to_string(),
        format!("maxSessionTimeout={}", tick_ms * 40),
        "preAllocSize=4096".to_string(),
    ];
    lines.extend_from_slice(extra);
    let path = dir.join("zoo.cfg");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write zoo.cfg");
    path
}

/// A standalone ZooKeeper server.
#[derive(Debug)]
pub struct ZkServer {
    process: ZkProcess,
    tick: Duration,
    _dir: TempDir,
}

impl ZkServer {
    /// Starts a server with tickTime 500 ms (sessions of 1–20 s) and waits until it serves.
    pub fn start() -> ZkServer {
        Self::start_with_tick(Duration::from_millis(500))
    }

    /// Starts a server with the given tickTime (sessions of 2–40 ticks).
    pub fn start_with_tick(tick: Duration) -> ZkServer {
        let dir = TempDir::new("zk");
        let port = free_ports(1)[0];
        let config = write_zk_config(dir.path(), port, tick.as_millis() as u64, &[]);
        let mut process = ZkProcess {
            config,
            log: dir.path().join("zk.log"),
            port,
            process: None,
        };
        process.launch();
        process.wait_serving(&["standalone"]);
        ZkServer {
            process,
            tick,
            _dir: dir,
        }
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.process.port)
    }

    /// The store URL `zk:127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("zk:{}", self.address())
    }

    /// The tickTime.
    pub fn tick(&self) -> Duration {
        self.tick
    }

    /// SIGKILL the server.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.process.take() {
            p.kill();
        }
    }

    /// Starts it again on the same port and data, and waits until it serves.
    pub fn restart(&mut self) {
        self.kill();
        self.process.launch();
        self.process.wait_serving(&["standalone"]);
    }
}

/// A 3-node (or n-node) ZooKeeper ensemble.
#[derive(Debug)]
pub struct ZkEnsemble {
    nodes: Vec<ZkProcess>,
    _dir: TempDir,
}

impl ZkEnsemble {
    /// Starts `n` members (tickTime 500 ms) and waits until each is leader or follower.
    pub fn start(n: usize) -> ZkEnsemble {
        let dir = TempDir::new("zk-ensemble");
        let ports = free_ports(3 * n);
        let servers: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "server.{}=127.0.0.1:{}:{}",
                    i + 1,
                    ports[n + i],
                    ports[2 * n + i]
                )
            })
            .collect();
        let mut nodes = Vec::new();
        for (i, &port) in ports.iter().take(n).enumerate() {
            let node_dir = dir.path().join(format!("zk{}", i + 1));
            let config = write_zk_config(&node_dir, port, 500, &servers);
            std::fs::write(node_dir.join("data/myid"), format!("{}\n", i + 1)).expect("write myid");
            let mut p = ZkProcess {
                config,
                log: node_dir.join("zk.log"),
                port,
                process: None,
            };
            p.launch();
            nodes.push(p);
        }
        for p in &nodes {
            p.wait_serving(&["leader", "follower"]);
        }
        ZkEnsemble { nodes, _dir: dir }
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn connect_string(&self) -> String {
        self.nodes
            .iter()
            .map(|p| format!("127.0.0.1:{}", p.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The store URL.
    pub fn url(&self) -> String {
        format!("zk:{}", self.connect_string())
    }

    /// Client port of member `i` (0-based).
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].port
    }

    /// A member that is up and follows.
    pub fn follower(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i].process.is_some()
                && zk_mode(self.nodes[i].port).as_deref() == Some("follower")
        })
    }

    /// The index of the current leader, if one answers.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i].process.is_some()
                && zk_mode(self.nodes[i].port).as_deref() == Some("leader")
        })
    }

    /// Indexes of members connected to a client with this session id (via the `cons` four-letter word).
    pub fn members_serving_session(&self, session_id: i64) -> Vec<usize> {
        let needle = format!("sid=0x{session_id:x}");
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i].process.is_some()
                    && zk_four_letter(self.nodes[i].port, "cons")
                        .is_some_and(|out| out.contains(&needle))
            })
            .collect()
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].process.take() {
            p.kill();
        }
    }

    /// Restarts member `i` and waits until it rejoins.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.nodes[i].launch();
        self.nodes[i].wait_serving(&["leader", "follower"]);
    }
}

fn etcd_healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out.contains("\"health\":\"true\"")
}

/// POSTs JSON to an etcd member's gRPC gateway and returns the response body.
fn etcd_post(port: u16, path: &str, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    )
    .ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// One etcd member process.
#[derive(Debug)]
struct EtcdProcess {
    name: String,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    initial_cluster: String,
    token: String,
    extra: Vec<String>,
    process: Option<Guarded>,
    started_once: bool,
    /// Clients speak TLS (`https://`); the certificate flags are in `extra`.
    tls: bool,
}

impl EtcdProcess {
    fn client_scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    fn launch(&mut self) {
        let state = if self.started_once { "existing" } else { "new" };
        let mut args = vec![
            "--name".to_string(),
            self.name.clone(),
            "--data-dir".to_string(),
            self.dir.join("data").display().to_string(),
            "--listen-client-urls".to_string(),
            format!("{}://127.0.0.1:{}", self.client_scheme(), self.client_port),
            "--advertise-client-urls".to_string(),
            format!("{}://127.0.0.1:{}", self.client_scheme(), self.client_port),
            "--listen-peer-urls".to_string(),
            format!("http://127.0.0.1:{}", self.peer_port),
            "--initial-advertise-peer-urls".to_string(),
            format!("http://127.0.0.1:{}", self.peer_port),
            "--initial-cluster".to_string(),
            self.initial_cluster.clone(),
            "--initial-cluster-state".to_string(),
            state.to_string(),
            "--initial-cluster-token".to_string(),
            self.token.clone(),
            "--logger".to_string(),
            "zap".to_string(),
            "--log-outputs".to_string(),
            "stderr".to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        std::fs::create_dir_all(&self.dir).expect("etcd dir");
        self.process = Some(Guarded::spawn(
            &etcd_binary(),
            &args,
            &self.dir.join("etcd.log"),
            &[],
        ));
        self.started_once = true;
    }

    fn wait_serving(&self) {
        let port = self.client_port;
        let log = self.dir.join("etcd.log");
        if self.tls {
            wait_until(&format!("etcd (TLS) on 127.0.0.1:{port}"), &log, || {
                std::fs::read_to_string(&log)
                    .is_ok_and(|l| l.contains("serving client traffic securely"))
            });
        } else {
            wait_until(&format!("etcd on 127.0.0.1:{port}"), &log, || {
                etcd_healthy(port)
            });
        }
    }
}

/// A single etcd member.
#[derive(Debug)]
pub struct EtcdServer {
    process: EtcdProcess,
    ca_file: Option<PathBuf>,
    _dir: TempDir,
}

impl EtcdServer {
    /// Starts a single-member etcd and waits until `/health` is true.
    pub fn start() -> EtcdServer {
        Self::start_with_args(&[])
    }

    /// Same, with extra `etcd` flags.
    pub fn start_with_args(extra: &[&str]) -> EtcdServer {
        let dir = TempDir::new("etcd");
        let ports = free_ports(2);
        let mut process = EtcdProcess {
            name: "etcd".to_string(),
            dir: dir.path().join("etcd"),
            client_port: ports[0],
            peer_port: ports[1],
            initial_cluster: format!("etcd=http://127.0.0.1:{}", ports[1]),
            token: format!("loadmgr-{}", ports[0]),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            process: None,
            started_once: false,
            tls: false,
        };
        process.launch();
        process.wait_serving();
        EtcdServer {
            process,
            ca_file: None,
            _dir: dir,
        }
    }

    /// Starts a single member serving clients over TLS with a throw-away CA and a server certificate for
    /// `127.0.0.1` made with `openssl` (Debian package `openssl`); [`EtcdServer::ca_file`] is the CA.
    pub fn start_tls() -> EtcdServer {
        let dir = TempDir::new("etcd-tls");
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).expect("certs dir");
        let openssl = require(find_in_path("openssl"), "openssl", "openssl");
        let run = |args: &[&str]| {
            let out = Command::new(&openssl)
                .args(args)
                .current_dir(&certs)
                .output()
                .expect("run openssl");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=loadmgr-test-ca",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(
            certs.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .expect("ext.cnf");
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        let ports = free_ports(2);
        let mut process = EtcdProcess {
            name: "etcd".to_string(),
            dir: dir.path().join("etcd"),
            client_port: ports[0],
            peer_port: ports[1],
            initial_cluster: format!("etcd=http://127.0.0.1:{}", ports[1]),
            token: format!("loadmgr-{}", ports[0]),
            extra: vec![
                "--cert-file".to_string(),
                certs.join("server.crt").display().to_string(),
                "--key-file".to_string(),
                certs.join("server.key").display().to_string(),
            ],
            process: None,
            started_once: false,
            tls: true,
        };
        process.launch();
        process.wait_serving();
        EtcdServer {
            process,
            ca_file: Some(certs.join("ca.crt")),
            _dir: dir,
        }
    }

    /// The CA certificate of a TLS server.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// `http://127.0.0.1:port` (`https://` for a TLS server).
    pub fn endpoint(&self) -> String {
        format!(
            "{}://127.0.0.1:{}",
            self.process.client_scheme(),
            self.process.client_port
        )
    }

    /// The store URL `etcd:http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("etcd:{}", self.endpoint())
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.process.take() {
            p.kill();
        }
    }

    /// Restarts with the same data and port.
    pub fn restart(&mut self) {
        self.kill();
        self.process.launch();
        self.process.wait_serving();
    }
}

/// An etcd cluster of `n` members.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<EtcdProcess>,
    _dir: TempDir,
}

impl EtcdCluster {
    /// Starts `n` members and waits until each is healthy.
    pub fn start(n: usize) -> EtcdCluster {
        let dir = TempDir::new("etcd-cluster");
        let ports = free_ports(2 * n);
        let initial: Vec<String> = (0..n)
            .map(|i| format!("e{}=http://127.0.0.1:{}", i + 1, ports[n + i]))
            .collect();
        let token = format!("loadmgr-{}", ports[0]);
        let mut members: Vec<EtcdProcess> = (0..n)
            .map(|i| EtcdProcess {
                name: format!("e{}", i + 1),
                dir: dir.path().join(format!("e{}", i + 1)),
                client_port: ports[i],
                peer_port: ports[n + i],
                initial_cluster: initial.join(","),
                token: token.clone(),
                extra: Vec::new(),
                process: None,
                started_once: false,
                tls: false,
            })
            .collect();
        for m in &mut members {
            m.launch();
        }
        for m in &members {
            m.wait_serving();
        }
        EtcdCluster { members, _dir: dir }
    }

    /// The index of the raft leader, if a live member answers (etcd's JSON gateway
    /// `/v3/maintenance/status`).
    pub fn leader(&self) -> Option<usize> {
        let ids: Vec<Option<String>> = self
            .members
            .iter()
            .map(|m| {
                m.process.as_ref()?;
                let body = etcd_post(m.client_port, "/v3/maintenance/status", "{}")?;
                let v: serde_json::Value = serde_json::from_str(&body).ok()?;
                let me = v["header"]["member_id"].as_str()?.to_string();
                let leader = v["leader"].as_str()?.to_string();
                Some(format!("{me} {leader}"))
            })
            .collect();
        ids.iter().position(|s| {
            s.as_deref()
                .and_then(|s| s.split_once(' '))
                .is_some_and(|(me, leader)| me == leader)
        })
    }

    /// A member that is up and not the raft leader.
    pub fn follower(&self) -> Option<usize> {
        let leader = self.leader()?;
        (0..self.members.len()).find(|&i| i != leader && self.members[i].process.is_some())
    }

    /// Endpoint URL of member `i`.
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    /// The store URL listing every member, starting with member `first`.
    pub fn url_starting_with(&self, first: usize) -> String {
        let n = self.members.len();
        let eps: Vec<String> = (0..n).map(|k| self.endpoint((first + k) % n)).collect();
        format!("etcd:{}", eps.join(","))
    }

    /// The store URL listing every member.
    pub fn url(&self) -> String {
        self.url_starting_with(0)
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.members[i].process.take() {
            p.kill();
        }
    }

    /// Restarts member `i` with its data.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.members[i].launch();
        self.members[i].wait_serving();
    }
}
