//! `loadmgr bench lookups --store URL`: topic lookups through the brokers' web service (HTTP) and through
//! `/loadmgr/requests/` nodes in the store (what `loadmgr admin --store` does), against the same store in the
//! same run: latency (p50, p99, max) of lookups of unowned bundles (placed by the leader) and of owned ones, and
//! the store writes each lookup costs, counted by the server itself (the growth of ZooKeeper's zxid or etcd's
//! revision: one per transaction, whoever wrote it).
//!
//! The brokers are agents in this process, each with its own store session and web service on a loopback port,
//! with synthetic hosts that carry no traffic (so reports stay quiet); lookups run one at a time, so the
//! figures are latencies, not throughput.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use super::{CliError, CliResult};
use crate::bundle::{NamespaceBundles, TopicName};
use crate::config::Settings;
use crate::runtime::http::WebService;
use crate::runtime::identity::BrokerIdentity;
use crate::runtime::synthetic::{SyntheticHost, SyntheticProfile};
use crate::runtime::{admin, AgentOptions, BrokerAgent};
use crate::store::{self, CreateOptions, DynStore, MetadataStoreExt, StoreOptions};

/// `loadmgr bench lookups` flags.
#[derive(Debug, Args)]
pub struct LookupBench {
    /// Store URL (zk:, etcd:, memory:).
    #[arg(long)]
    store: String,
    /// Brokers (agents with web services in this process).
    #[arg(long, default_value_t = 3)]
    brokers: usize,
    /// Bundles of each of the two namespaces: one lookup of an unowned bundle per bundle, per path.
    #[arg(long, default_value_t = 100)]
    bundles: u64,
    /// Lookups of owned bundles per path.
    #[arg(long, default_value_t = 500)]
    owned: usize,
}

/// How long the idle cluster is watched for writes of its own.
const IDLE: Duration = Duration::from_secs(2);

/// One measured phase.
struct Phase {
    name: &'static str,
    latencies: Vec<Duration>,
    writes: i64,
}

impl Phase {
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[i].as_secs_f64() * 1000.0
    }
}

/// Runs `loadmgr bench lookups`.
pub fn run(b: LookupBench) -> CliResult {
    if b.brokers == 0 || b.bundles == 0 || b.owned == 0 {
        return Err(CliError::new(
            "--brokers, --bundles and --owned must be at least 1",
        ));
    }
    super::block_on(async move { bench(b).await.map_err(CliError::new) })
}

/// A broker of the bench: its agent and web service.
struct Broker {
    agent: BrokerAgent,
    web: WebService,
    url: String,
}

/// The server's transaction counter now: the modification revision of a probe write, which is itself one
/// transaction.
async fn revision(store: &DynStore, probe: &str) -> Result<i64, String> {
    store
        .put(probe, b"probe", None, CreateOptions::PERSISTENT)
        .await
        .map(|stat| stat.modification_revision)
        .map_err(|e| format!("probe write: {e}"))
}

/// `n` loopback ports nothing listened on a moment ago.
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free loopback port: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())
}

/// One topic per bundle of `bundles` in namespace `ns`.
fn topic_per_bundle(ns: &str, bundles: &NamespaceBundles) -> Vec<String> {
    let mut found = std::collections::BTreeMap::new();
    let mut i = 0u64;
    while found.len() < bundles.len() {
        let name = format!("persistent://{ns}/t-{i}");
        let topic = TopicName::parse(&name).expect("a valid topic name");
        found
            .entry(bundles.find_topic(&topic).to_string())
            .or_insert(name);
        i += 1;
    }
    found.into_values().collect()
}

async fn bench(b: LookupBench) -> Result<(), String> {
    let options = StoreOptions::default().with_session_timeout(Duration::from_secs(10));
    let client = store::connect(&b.store, options.clone())
        .await
        .map_err(|e| e.to_string())?;
    let tenant = format!("lookup-bench-{}", std::process::id());
    let probe = format!("/loadmgr-bench-{}", std::process::id());
    let mut settings = Settings::default();
    settings.bind_address = "127.0.0.1".into();
    settings.advertised_address = Some("127.0.0.1".into());
    settings.cluster_name = Some("bench".into());
    settings.load_balancer_auto_bundle_split_enabled = false;
    settings.load_balancer_shedding_enabled = false;
    let profile = SyntheticProfile::from_json(
        r#"{"cores": 1, "lookupOnStart": false, "topics": []}"#,
        "bench",
    )
    .map_err(|e| e.to_string())?;

    let mut brokers = Vec::new();
    for port in free_ports(b.brokers)? {
        let mut s = settings.clone();
        s.web_service_port = Some(port as i32);
        let identity = BrokerIdentity::from_settings(&s).map_err(|e| e.to_string())?;
        let store = store::connect(&b.store, options.clone())
            .await
            .map_err(|e| e.to_string())?;
        let host = Arc::new(SyntheticHost::new(profile.clone()).map_err(|e| e.to_string())?);
        let agent = BrokerAgent::start(store, s.clone(), identity, host, AgentOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let web = WebService::start(&agent, &s)
            .await
            .map_err(|e| e.to_string())?;
        brokers.push(Broker {
            agent,
            web,
            url: format!("http://127.0.0.1:{port}"),
        });
    }
    let outcome = measure(&b, &client, &brokers, &tenant, &probe).await;
    for broker in brokers {
        broker.web.shutdown().await;
        let _ = broker.agent.shutdown().await;
    }
    // The bench's nodes: the namespaces' policies, records and bundle data, the probe.
    for path in [
        crate::paths::policies(&tenant),
        crate::paths::local_policies(&tenant),
        format!("{}/{tenant}", crate::paths::ASSIGNMENTS),
        format!("{}/{tenant}", crate::paths::BUNDLE_DATA),
        crate::paths::ownership_namespace(&tenant),
        probe.clone(),
    ] {
        let _ = client.delete_recursive(&path).await;
    }
    let _ = client.close().await;
    let (phases, idle) = outcome?;

    println!(
        "lookups on {} — {} brokers in this process, {} bundles per namespace, one lookup at a time",
        b.store, b.brokers, b.bundles
    );
    println!(
        "{:<34} {:>7} {:>8} {:>8} {:>8} {:>13}",
        "path", "lookups", "p50 ms", "p99 ms", "max ms", "writes/lookup"
    );
    for p in &phases {
        println!(
            "{:<34} {:>7} {:>8.2} {:>8.2} {:>8.2} {:>13.2}",
            p.name,
            p.latencies.len(),
            p.percentile(0.5),
            p.percentile(0.99),
            p.percentile(1.0),
            p.writes as f64 / p.latencies.len() as f64
        );
    }
    println!(
        "(the idle cluster wrote {idle} times in {} s on its own: reports and flushes, counted in the phases too)",
        IDLE.as_secs()
    );
    Ok(())
}

/// `count` lookups one at a time (`lookup(i)` for the i-th), timed one by one, with the store writes of the
/// whole phase.
async fn measure_phase<F, Fut>(
    client: &DynStore,
    probe: &str,
    name: &'static str,
    count: usize,
    mut lookup: F,
) -> Result<Phase, String>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = revision(client, probe).await?;
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count {
        let began = Instant::now();
        lookup(i).await?;
        latencies.push(began.elapsed());
    }
    let end = revision(client, probe).await?;
    Ok(Phase {
        name,
        latencies,
        writes: end - start - 1,
    })
}

async fn measure(
    b: &LookupBench,
    client: &DynStore,
    brokers: &[Broker],
    tenant: &str,
    probe: &str,
) -> Result<(Vec<Phase>, i64), String> {
    let http = reqwest::Client::new();
    let leader = brokers
        .iter()
        .position(|x| x.agent.is_leader())
        .unwrap_or(0);
    let follower = (leader + 1) % brokers.len();
    let requester = format!("lookup-bench-{}", std::process::id());
    let ns_http = format!("{tenant}/http");
    let ns_requests = format!("{tenant}/requests");
    let mut topics = Vec::new();
    for ns in [&ns_http, &ns_requests] {
        let bundles = admin::create_namespace(client, ns, b.bundles, Some("bench"))
            .await
            .map_err(|e| e.to_string())?;
        topics.push(topic_per_bundle(ns, &bundles));
    }
    // Every broker watches the new namespaces before the first lookup.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let http_lookup = |base: &str, topic: &str| {
        let url = format!("{base}/lookup/v2/topic/{}", topic.replacen("://", "/", 1));
        let http = http.clone();
        async move {
            let response = http
                .get(&url)
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if !response.status().is_success() {
                return Err(format!(
                    "{url}: {} {}",
                    response.status(),
                    response.text().await.unwrap_or_default()
                ));
            }
            Ok::<(), String>(())
        }
    };
    let requests_lookup = |topic: String| {
        let requester = requester.clone();
        async move {
            admin::lookup(client, &topic, &requester, Duration::from_secs(30))
                .await
                .map(|_| ())
                .map_err(|e| format!("{topic}: {e}"))
        }
    };

    let (unowned_http, unowned_requests) = (&topics[0], &topics[1]);
    let phases = vec![
        // Unowned bundles through HTTP, asked of a follower (the leader places them; the follower forwards).
        measure_phase(
            client,
            probe,
            "HTTP, unowned (follower forwards)",
            unowned_http.len(),
            |i| http_lookup(&brokers[follower].url, &unowned_http[i]),
        )
        .await?,
        // Owned bundles through HTTP, asked of each broker in turn.
        measure_phase(client, probe, "HTTP, owned (any broker)", b.owned, |i| {
            http_lookup(
                &brokers[i % brokers.len()].url,
                &unowned_http[i % unowned_http.len()],
            )
        })
        .await?,
        // The same through request nodes.
        measure_phase(
            client,
            probe,
            "requests, unowned",
            unowned_requests.len(),
            |i| requests_lookup(unowned_requests[i].clone()),
        )
        .await?,
        measure_phase(client, probe, "requests, owned", b.owned, |i| {
            requests_lookup(unowned_requests[i % unowned_requests.len()].clone())
        })
        .await?,
    ];
    // Idle: what the cluster writes by itself, for reference.
    let start = revision(client, probe).await?;
    tokio::time::sleep(IDLE).await;
    let end = revision(client, probe).await?;
    Ok((phases, end - start - 1))
}
