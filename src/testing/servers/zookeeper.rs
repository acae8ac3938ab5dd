//! ZooKeeper servers for tests: a standalone [`ZkServer`] and an n-member [`ZkEnsemble`]. Each member is a
//! `java` process under the `sh` watchdog of `Guarded` (in `mod.rs`), configured by a `zoo.cfg` written into
//! its own directory, and probed with the four-letter words ([`zk_four_letter`]; `srvr` tells whether a
//! member serves and in which mode).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{free_ports, java_binary, wait_until, zk_classpath, Guarded, TempDir};

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

    /// Waits until this process serves in one of `modes`. The port was free when chosen but not held: another
    /// test's server may have taken it first (ours then fails to bind), so the server that answers must name
    /// our data directory, or tests that believe they have a store of their own would share one.
    fn wait_serving(&self, modes: &[&str]) {
        let port = self.port;
        let data_dir = zk_data_dir(self.config.parent().expect("zoo.cfg in a directory"))
            .display()
            .to_string();
        wait_until(&format!("ZooKeeper on 127.0.0.1:{port}"), &self.log, || {
            zk_mode(port).is_some_and(|m| modes.contains(&m.as_str()))
                && zk_four_letter(port, "conf").is_some_and(|c| {
                    c.lines().any(|l| {
                        l.strip_prefix("dataDir=")
                            .is_some_and(|d| d.starts_with(&data_dir))
                    })
                })
        });
    }
}

/// The data directory of the server whose `zoo.cfg` is in `dir`.
fn zk_data_dir(dir: &Path) -> PathBuf {
    dir.join("data")
}

fn write_zk_config(dir: &Path, port: u16, tick_ms: u64, extra: &[String]) -> PathBuf {
    std::fs::create_dir_all(zk_data_dir(dir)).expect("zk data dir");
    let mut lines = vec![
        format!("tickTime={tick_ms}"),
        "initLimit=10".to_string(),
        "syncLimit=5".to_string(),
        format!("dataDir={}", zk_data_dir(dir).display()),
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

    /// SIGSTOP member `i`: it keeps its connections but answers nothing, to its clients and to its peers —
    /// what a member cut off by a partition looks like from every side.
    pub fn pause(&self, i: usize) {
        if let Some(p) = &self.nodes[i].process {
            p.signal("STOP");
        }
    }

    /// SIGCONT member `i` after [`ZkEnsemble::pause`].
    pub fn resume(&self, i: usize) {
        if let Some(p) = &self.nodes[i].process {
            p.signal("CONT");
        }
    }

    /// Restarts member `i` and waits until it rejoins.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.nodes[i].launch();
        self.nodes[i].wait_serving(&["leader", "follower"]);
    }
}
