//! The dashboard in a real browser: headless Chromium driven through chromedriver's WebDriver API, against
//! three `loadmgr broker` processes on a real ZooKeeper with token authentication. The page is opened on a
//! broker that does not lead (the leader's data comes through the API); it must ask for a token, then show
//! the three brokers and the leader, a chart line per broker, the namespace's hash ring and a plan; an
//! `admin namespaces unload` must show up as moves within seconds without a reload; the browser's console must
//! stay free of errors; with the leader paused (SIGSTOP) a follower must still answer, from the store, saying
//! so; and once ZooKeeper stops, the page must say the cluster cannot be shown.
//!
//! Writes a screenshot to `target/dashboard.png` (and to `$LOADMGR_DASHBOARD_SCREENSHOT` when set, which is
//! how `docs/dashboard.png` is made). Needs `chromium` and `chromium-driver` (`scripts/install-test-deps.sh`);
//! without them the test prints why and passes, so that a machine without a browser can run the rest.

mod http_support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use http_support::{get, loadmgr, Cluster, NS};
use jsonwebtoken::{encode, EncodingKey, Header};
use loadmgr::testing::servers::{free_ports, ZkServer};
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one browser session in it.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    async fn start() -> Browser {
        let port = free_ports(1)[0];
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1100", "--hide-scrollbars", "--force-device-scale-factor=1"]
            },
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            http,
        };
        let created = browser.call("POST", "/session", caps).await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        browser
    }

    /// A WebDriver command; its `value`.
    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = if path.starts_with("/session") && !self.session.is_empty() {
            format!(
                "{}/session/{}{}",
                self.base,
                self.session,
                &path["/session".len()..]
            )
        } else {
            format!("{}{}", self.base, path)
        };
        let request = match method {
            "GET" => self.http.get(&url),
            "DELETE" => self.http.delete(&url),
            _ => self.http.post(&url).json(&body),
        };
        let answer: Value = request
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
            .json()
            .await
            .unwrap();
        if path == "/session" {
            return answer["value"].clone();
        }
        if answer["value"].get("error").is_some() {
            panic!("{method} {path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.call("POST", "/session/url", json!({ "url": url }))
            .await;
    }

    /// Runs `script` (a function body) in the page; its return value.
    async fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/session/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// Waits until `script` returns something truthy; that value, or a failure naming `what`.
    async fn wait_for(
        &self,
        what: &str,
        script: &str,
        within: Duration,
        logs: &dyn Fn() -> String,
    ) -> Value {
        let start = Instant::now();
        loop {
            let v = self.js(script).await;
            let truthy = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return v;
            }
            if start.elapsed() > within {
                let page = self.js("return document.body.innerText").await;
                panic!(
                    "the page did not show {what} within {within:?}.\npage:\n{}\nbroker logs:\n{}",
                    page.as_str().unwrap_or_default(),
                    logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                "POST",
                "/session/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        v[ELEMENT].as_str().unwrap().to_owned()
    }

    async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.call(
            "POST",
            &format!("/session/element/{e}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.call("POST", &format!("/session/element/{e}/click"), json!({}))
            .await;
    }

    /// The browser's console entries since the last call: (level, message).
    async fn console(&self) -> Vec<(String, String)> {
        let v = self
            .call("POST", "/session/se/log", json!({"type": "browser"}))
            .await;
        v.as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                (
                    e["level"].as_str().unwrap_or_default().to_owned(),
                    e["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    async fn screenshot(&self) -> Vec<u8> {
        let v = self.call("GET", "/session/screenshot", Value::Null).await;
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap()
    }
}

fn token(secret: &[u8], sub: &str) -> String {
    encode(
        &Header::default(),
        &json!({ "sub": sub }),
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium_on_zookeeper() {
    if !std::path::Path::new(CHROMIUM).exists() || !std::path::Path::new(CHROMEDRIVER).exists() {
        eprintln!(
            "SKIPPED: the dashboard's browser test needs {CHROMIUM} and {CHROMEDRIVER} \
             (Debian's chromium and chromium-driver; scripts/install-test-deps.sh installs them)"
        );
        return;
    }
    let mut zk = ZkServer::start();
    let secret = b"a-test-secret-of-32-bytes-length";
    let extra = format!(
        "authenticationEnabled=true\nauthorizationEnabled=true\n\
         authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n\
         tokenSecretKey=data:;base64,{}\nsuperUserRoles=admin\n",
        base64::engine::general_purpose::STANDARD.encode(secret),
    );
    let admin = token(secret, "admin");
    let c = Cluster::start(&zk.url(), &extra, false, Some(admin.clone())).await;
    let logs = || c.logs();
    let leader = c.leader_with(&admin);
    let follower = (leader + 1) % 3;
    let leader_id = get(&c.url(0), "/admin/v2/brokers/leaderBroker", Some(&admin)).1["brokerId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The page's files are public; its data is not.
    assert_eq!(
        get(&c.url(follower), "/dashboard/auth.json", None).1["tokenNeeded"],
        true
    );
    assert_eq!(get(&c.url(follower), "/loadmgr/v1/cluster", None).0, 401);

    let browser = Browser::start().await;
    browser
        .open(&format!("{}/dashboard", c.url(follower)))
        .await;
    // A token is asked for before any data is requested.
    browser
        .wait_for(
            "the token form",
            "return !document.getElementById('login').hidden",
            Duration::from_secs(10),
            &logs,
        )
        .await;
    browser.type_into("#token", &admin).await;
    browser.click("#login button").await;
    // Three brokers, the leader marked.
    let rows = browser
        .wait_for(
            "three brokers with reports",
            "const rows = [...document.querySelectorAll('#brokers tbody tr[data-broker]')]; \
             return rows.length === 3 && rows.every(r => r.querySelector('.bar')) ? \
               rows.map(r => [r.dataset.broker, r.dataset.leader]) : null",
            Duration::from_secs(20),
            &logs,
        )
        .await;
    let leaders: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r[1] == "true")
        .map(|r| r[0].as_str().unwrap())
        .collect();
    assert_eq!(leaders, vec![leader_id.as_str()], "{rows}");
    // A line per broker over time, the namespace's four bundles around its ring, a plan.
    browser
        .wait_for(
            "a chart line per broker",
            "return document.querySelectorAll('#chart path[data-broker]').length === 3",
            Duration::from_secs(20),
            &logs,
        )
        .await;
    browser
        .wait_for(
            "the ring of public/web",
            "return document.querySelectorAll('#ring path[data-bundle]').length === 4",
            Duration::from_secs(20),
            &logs,
        )
        .await;
    browser
        .wait_for(
            "a plan",
            "return document.querySelector('#plan-body [data-plan]') !== null",
            Duration::from_secs(40),
            &logs,
        )
        .await;
    // The namespace's bundles are assigned by lookups: look one topic up so there is an owner to unload.
    let (status, _) = get(
        &c.url(follower),
        "/lookup/v2/topic/persistent/public/web/t-1",
        Some(&admin),
    );
    assert_eq!(status, 200);
    // An unload shows up as moves, without a reload (the marker survives).
    browser.js("window.__notReloaded = true; return true").await;
    let url = c.url(follower);
    let out = loadmgr(&[
        "admin",
        "--url",
        &url,
        "--auth-token",
        &admin,
        "namespaces",
        "unload",
        NS,
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let unloaded = Instant::now();
    browser
        .wait_for(
            "the unload's moves",
            "return window.__notReloaded === true && \
             document.querySelectorAll('#moves-table tbody tr[data-cause=\"unload\"]').length > 0",
            Duration::from_secs(10),
            &logs,
        )
        .await;
    eprintln!(
        "the unload showed on the page {:.1} s after the command returned",
        unloaded.elapsed().as_secs_f64()
    );
    // The move's mark on the chart comes with the next history poll.
    browser
        .wait_for(
            "the move on the chart",
            "const g = document.querySelector('#chart g[data-moves]'); return g && Number(g.dataset.moves) > 0",
            Duration::from_secs(15),
            &logs,
        )
        .await;
    // The filters narrow the table.
    browser
        .js(
            "const s = document.getElementById('f-cause'); s.value = 'split'; \
             s.dispatchEvent(new Event('change')); return true",
        )
        .await;
    browser
        .wait_for(
            "no split moves under the split filter",
            "return document.querySelectorAll('#moves-table tbody tr[data-cause]').length === 0",
            Duration::from_secs(10),
            &logs,
        )
        .await;
    browser
        .js(
            "const s = document.getElementById('f-cause'); s.value = ''; \
             s.dispatchEvent(new Event('change')); window.scrollTo(0, 0); return true",
        )
        .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    if let Some(h) = std::env::var("LOADMGR_DASHBOARD_SCREENSHOT_HEIGHT")
        .ok()
        .and_then(|h| h.parse::<u32>().ok())
    {
        browser
            .call(
                "POST",
                "/session/window/rect",
                json!({"width": 1400, "height": h}),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/dashboard.png");
    std::fs::write(&target, &png).unwrap();
    if let Some(path) = std::env::var_os("LOADMGR_DASHBOARD_SCREENSHOT") {
        std::fs::write(path, &png).unwrap();
    }
    // No console errors so far (the page asked for a token first, so nothing was refused).
    let errors: Vec<(String, String)> = browser
        .console()
        .await
        .into_iter()
        .filter(|(level, _)| level == "SEVERE" || level == "WARNING")
        .collect();
    assert!(errors.is_empty(), "console: {errors:?}");

    // A paused leader: a follower answers within its 2 s wait from the reports in the store, saying why.
    let pid = c.children[leader].id().to_string();
    let signal = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    let asked = Instant::now();
    let (status, cluster) = get(&c.url(follower), "/loadmgr/v1/cluster", Some(&admin));
    signal("-CONT");
    assert_eq!(status, 200, "{cluster}");
    assert!(
        cluster["degraded"].as_str().is_some_and(|d| !d.is_empty()),
        "{cluster}"
    );
    assert_eq!(cluster["brokers"].as_array().unwrap().len(), 3, "{cluster}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "answered in {:?}",
        asked.elapsed()
    );

    // The store goes: the page says the cluster cannot be shown (once the leader's session is gone, neither
    // it nor the store answers).
    zk.kill();
    browser
        .wait_for(
            "an error banner",
            "const b = document.getElementById('banner'); \
             return !b.hidden && b.classList.contains('error') ? b.textContent : null",
            Duration::from_secs(60),
            &logs,
        )
        .await;
    let _ = browser.call("DELETE", "/session", Value::Null).await;
}
