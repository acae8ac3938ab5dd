//! Three `loadmgr broker` processes with their web services on a real store, and curl to talk to them: shared by
//! `http.rs` (every endpoint, tokens, TLS) and `http_peers.rs` (the Pulsar client, Prometheus, schemathesis).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use loadmgr::store::{self, DynStore, StoreOptions};
use loadmgr::testing::servers::{free_ports, TempDir};
use serde_json::Value;

pub const NS: &str = "public/web";

pub const PROFILE: &str = r#"{"cores": 1, "lookupOnStart": false, "topics": [
  {"name": "persistent://public/web/t-{0..31}", "msgRateIn": 10, "msgRateOut": 10}]}"#;

pub struct Cluster {
    /// A super-user token for the checks, when the brokers authenticate.
    pub token: Option<String>,
    pub dir: TempDir,
    pub children: Vec<Child>,
    pub ports: Vec<u16>,
    pub tls_ports: Vec<u16>,
    /// The binary protocol port each broker advertises in `pulsar://` URLs (nothing listens there).
    pub broker_ports: Vec<u16>,
    pub conf: PathBuf,
    pub store: DynStore,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    /// Three brokers on `url` with `extra` broker.conf lines (and a TLS port each when `tls`).
    pub async fn start(url: &str, extra: &str, tls: bool, token: Option<String>) -> Cluster {
        let dir = TempDir::new("http");
        std::fs::write(dir.path().join("profile.json"), PROFILE).unwrap();
        let conf = dir.path().join("broker.conf");
        std::fs::write(
            &conf,
            format!(
                "metadataStoreUrl={url}\nbindAddress=127.0.0.1\nclusterName=test\n\
                 metadataStoreSessionTimeoutMillis=4000\nloadBalancerReportUpdateMinIntervalMillis=200\n\
                 loadmgrSheddingIntervalMillis=60000\nloadBalancerAutoBundleSplitEnabled=false\n{extra}"
            ),
        )
        .unwrap();
        let store = store::connect(url, StoreOptions::default()).await.unwrap();
        let out = loadmgr(&[
            "admin",
            "--config",
            conf.to_str().unwrap(),
            "namespaces",
            "create",
            NS,
            "--bundles",
            "4",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let all = free_ports(9);
        let (ports, tls_ports, broker_ports) =
            (all[..3].to_vec(), all[3..6].to_vec(), all[6..].to_vec());
        let mut cluster = Cluster {
            token,
            dir,
            children: Vec::new(),
            ports,
            tls_ports,
            broker_ports,
            conf,
            store,
        };
        for i in 0..3 {
            let log = cluster.dir.path().join(format!("broker-{i}.log"));
            let out = std::fs::File::create(&log).unwrap();
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_loadmgr"));
            cmd.arg("broker")
                .args(["--advertised-address", "127.0.0.1", "--web-port"])
                .arg(cluster.ports[i].to_string())
                .arg("--broker-port")
                .arg(cluster.broker_ports[i].to_string())
                .arg("--synthetic")
                .arg(cluster.dir.path().join("profile.json"))
                .env("NO_COLOR", "1")
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .stdin(Stdio::null());
            if tls {
                // The TLS port comes from broker.conf: one file per broker, the shared one plus its port.
                let own = cluster.dir.path().join(format!("broker-{i}.conf"));
                std::fs::write(
                    &own,
                    format!(
                        "{}webServicePortTls={}\n",
                        std::fs::read_to_string(&cluster.conf).unwrap(),
                        cluster.tls_ports[i]
                    ),
                )
                .unwrap();
                cmd.arg("--config").arg(&own);
            } else {
                cmd.arg("--config").arg(&cluster.conf);
            }
            cluster.children.push(cmd.spawn().unwrap());
            // The first one leads.
            if i == 0 {
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
        }
        cluster.wait_ready().await;
        cluster
    }

    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    pub fn tls_url(&self, i: usize) -> String {
        format!("https://127.0.0.1:{}", self.tls_ports[i])
    }

    pub fn logs(&self) -> String {
        (0..3)
            .map(|i| {
                std::fs::read_to_string(self.dir.path().join(format!("broker-{i}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    pub async fn wait_ready(&self) {
        let start = std::time::Instant::now();
        let token = self.token.as_deref();
        loop {
            let ok = |path: &str| (0..3).all(|i| get(&self.url(i), path, token).0 == 200);
            if ok("/admin/v2/brokers/ready") && ok("/admin/v2/brokers/health") {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "brokers not ready:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The index of the leading broker.
    pub fn leader(&self) -> usize {
        let (_, body) = get(&self.url(0), "/admin/v2/brokers/leaderBroker", None);
        let id = body["brokerId"].as_str().unwrap().to_owned();
        self.ports
            .iter()
            .position(|p| id.ends_with(&format!(":{p}")))
            .unwrap()
    }
}

pub fn loadmgr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(args)
        .output()
        .expect("run loadmgr")
}

/// `curl -X METHOD` with an optional token and body; (status, body as JSON or as a string).
pub fn request(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
    extra: &[&str],
) -> (u16, Value) {
    let mut args: Vec<String> = vec![
        "-s".into(),
        "-X".into(),
        method.into(),
        "-w".into(),
        "\n%{http_code}".into(),
    ];
    if let Some(t) = token {
        args.push("-H".into());
        args.push(format!("Authorization: Bearer {t}"));
    }
    if let Some(b) = body {
        args.push("-H".into());
        args.push("Content-Type: application/json".into());
        args.push("--data-binary".into());
        args.push(b.into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(url.into());
    let out = Command::new("curl").args(&args).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let status: u16 = code.trim().parse().unwrap_or_else(|_| {
        panic!(
            "curl {args:?}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let value = serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()));
    (status, value)
}

pub fn get(base: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    request("GET", &format!("{base}{path}"), token, None, &[])
}

impl Cluster {
    pub fn leader_with(&self, token: &str) -> usize {
        let (_, body) = get(&self.url(0), "/admin/v2/brokers/leaderBroker", Some(token));
        let id = body["brokerId"]
            .as_str()
            .unwrap_or_else(|| panic!("{body}"))
            .to_owned();
        self.ports
            .iter()
            .position(|p| id.ends_with(&format!(":{p}")))
            .unwrap()
    }
}
