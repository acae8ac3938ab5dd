//! etcd servers for tests: a single-member [`EtcdServer`] (plain, or TLS with a throw-away CA) and an n-member
//! [`EtcdCluster`]. Each member is an `etcd` process under the `sh` watchdog of `Guarded` (in `mod.rs`),
//! probed over HTTP: `/health`, and the JSON gateway's `/v3/maintenance/status` for the raft leader.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{etcd_binary, free_ports, wait_until, Guarded, TempDir};

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
        Self::single(dir, extra.iter().map(|s| s.to_string()).collect(), None)
    }

    /// Starts a single member serving clients over TLS with a throw-away CA and a server certificate for
    /// `127.0.0.1` made with `openssl` (Debian package `openssl`); [`EtcdServer::ca_file`] is the CA.
    pub fn start_tls() -> EtcdServer {
        let dir = TempDir::new("etcd-tls");
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).expect("certs dir");
        let tls = super::TestCertificates::make(&certs);
        let extra = vec![
            "--cert-file".to_string(),
            tls.cert.display().to_string(),
            "--key-file".to_string(),
            tls.key.display().to_string(),
        ];
        Self::single(dir, extra, Some(tls.ca))
    }

    /// A single member with its data in `dir`, started with `extra` flags; over TLS when `ca_file` is given.
    fn single(dir: TempDir, extra: Vec<String>, ca_file: Option<PathBuf>) -> EtcdServer {
        let ports = free_ports(2);
        let mut process = EtcdProcess {
            name: "etcd".to_string(),
            dir: dir.path().join("etcd"),
            client_port: ports[0],
            peer_port: ports[1],
            initial_cluster: format!("etcd=http://127.0.0.1:{}", ports[1]),
            token: format!("loadmgr-{}", ports[0]),
            extra,
            process: None,
            started_once: false,
            tls: ca_file.is_some(),
        };
        process.launch();
        process.wait_serving();
        EtcdServer {
            process,
            ca_file,
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

    /// SIGSTOP member `i`: it keeps its connections but answers nothing, to its clients and to its peers —
    /// what a member cut off by a partition looks like from every side.
    pub fn pause(&self, i: usize) {
        if let Some(p) = &self.members[i].process {
            p.signal("STOP");
        }
    }

    /// SIGCONT member `i` after [`EtcdCluster::pause`].
    pub fn resume(&self, i: usize) {
        if let Some(p) = &self.members[i].process {
            p.signal("CONT");
        }
    }

    /// Restarts member `i` with its data.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.members[i].launch();
        self.members[i].wait_serving();
    }
}
