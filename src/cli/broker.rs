//! `loadmgr broker`: runs a broker agent until SIGINT/SIGTERM, then deregisters cleanly. A thin wrapper over
//! [`crate::runtime::BrokerAgent`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::access::StoreAccessArgs;
use super::{CliError, CliResult};
use crate::config::Settings;
use crate::runtime::{
    AgentOptions, BrokerAgent, BrokerHost, BrokerIdentity, IdleHost, SyntheticHost,
    SyntheticProfile,
};
use crate::store::{self, DynStore, StoreOptions};

/// Flags of `loadmgr broker`.
#[derive(Debug, clap::Args)]
pub struct BrokerArgs {
    /// Metadata store URL (zk:host:2181[/chroot], etcd:http://host:2379, memory:NAME); default: the
    /// configuration's metadataStoreUrl.
    #[arg(long)]
    pub store: Option<String>,
    /// broker.conf to read (defaults: Pulsar 5.0).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Host part of the broker id and URLs (overrides advertisedAddress).
    #[arg(long)]
    pub advertised_address: Option<String>,
    /// Web service port, the broker id's port (overrides webServicePort).
    #[arg(long)]
    pub web_port: Option<u16>,
    /// Broker (binary protocol) port for pulsar:// URLs (overrides brokerServicePort).
    #[arg(long)]
    pub broker_port: Option<u16>,
    /// Traffic profile of a synthetic host (JSON; see `runtime::synthetic`). Without it the broker carries no
    /// traffic and reports the machine's CPU, memory and NICs.
    #[arg(long)]
    pub synthetic: Option<PathBuf>,
    /// With --synthetic: append the host's serving timeline (when it started and stopped serving each
    /// bundle, with the lease's fencing token) to this file as JSON lines, for checking that no two brokers
    /// served a bundle at once.
    #[arg(long, requires = "synthetic")]
    pub serving_log: Option<PathBuf>,
    /// Seed of the leader's random choices (overrides loadmgrRandomSeed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The store\'s user, password, ZooKeeper ACL and etcd TLS (over broker.conf).
    #[command(flatten)]
    pub access: StoreAccessArgs,
}

/// Reads broker.conf (warnings other than unknown keys go to stderr) or the defaults.
pub(crate) fn load_settings(config: Option<&Path>) -> Result<Settings, CliError> {
    match config {
        Some(path) => {
            let loaded = Settings::load(path).map_err(|e| CliError::new(e.to_string()))?;
            for w in &loaded.warnings {
                if !w.message.starts_with("unknown key") {
                    eprintln!("warning: {w}");
                }
            }
            Ok(loaded.settings)
        }
        None => Ok(Settings::default()),
    }
}

/// The store URL from the flag or the configuration.
pub(crate) fn store_url(flag: Option<&str>, settings: &Settings) -> Result<String, CliError> {
    flag.map(str::to_owned)
        .or_else(|| settings.metadata_store_url.clone())
        .ok_or_else(|| {
            CliError::new("no store: give --store URL or set metadataStoreUrl in the configuration")
        })
}

/// The store options of the configuration (timeouts, credentials, ACL, TLS), with the access flags over them.
pub(crate) fn store_options(
    url: &str,
    settings: &Settings,
    access: &StoreAccessArgs,
) -> Result<StoreOptions, CliError> {
    let options = StoreOptions::from_conf(url, |k| settings.get(k))
        .map_err(|e| CliError::new(format!("store settings: {e}")))?;
    access.apply(options).map_err(CliError::new)
}

/// Connects with the configuration's store settings and the access flags.
pub(crate) async fn connect(
    url: &str,
    settings: &Settings,
    access: &StoreAccessArgs,
) -> Result<DynStore, CliError> {
    let options = store_options(url, settings, access)?;
    store::connect(url, options)
        .await
        .map_err(|e| CliError::new(format!("cannot open the store {url}: {e}")))
}

/// How long a starting broker keeps trying to open its store while the failures are transient.
const START_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// [`connect`] for a starting broker: see [`open_at_start`].
async fn connect_at_start(
    url: &str,
    settings: &Settings,
    access: &StoreAccessArgs,
) -> Result<DynStore, CliError> {
    let options = store_options(url, settings, access)?;
    open_at_start(url, options)
        .await
        .map_err(|e| CliError::new(format!("cannot open the store {url}: {e}")))
}

/// Opens the store for a starting broker: a transient failure (a timeout, the server unavailable) is retried
/// for [`START_RETRY_FOR`] ([`store::retry_transient`]), so a store that is slow for a moment (an etcd server
/// stalled on fsync or busy with a whole cluster's restart, a ZooKeeper ensemble electing) does not stop the
/// broker; anything else fails at once. `loadmgr bench cluster` starts its agents with it.
pub(crate) async fn open_at_start(
    url: &str,
    options: StoreOptions,
) -> Result<DynStore, store::Error> {
    store::retry_transient(&format!("open the store {url}"), START_RETRY_FOR, || {
        store::connect(url, options.clone())
    })
    .await
}

/// Logging to stderr with `LOADMGR_LOG` (default `default`; the store clients' own connection chatter
/// only from warnings up, since the store logs what matters about its connection itself).
pub(crate) fn init_logging(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOADMGR_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(format!(
                    "{default},zookeeper_client=warn,etcd_client=warn"
                ))
            }),
        )
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs the command.
pub fn run(args: BrokerArgs) -> CliResult {
    init_logging("info");
    let mut settings = load_settings(args.config.as_deref())?;
    if let Some(a) = &args.advertised_address {
        settings.advertised_address = Some(a.clone());
    }
    if let Some(p) = args.web_port {
        settings.web_service_port = Some(p as i32);
    }
    if let Some(p) = args.broker_port {
        settings.broker_service_port = Some(p as i32);
    }
    let identity =
        BrokerIdentity::from_settings(&settings).map_err(|e| CliError::new(e.to_string()))?;
    let url = store_url(args.store.as_deref(), &settings)?;
    let (host, topics): (Arc<dyn BrokerHost>, Vec<String>) = match &args.synthetic {
        Some(path) => {
            let profile = SyntheticProfile::load(path).map_err(|e| CliError::new(e.to_string()))?;
            let topics = if profile.lookup_on_start {
                profile.topic_names()
            } else {
                Vec::new()
            };
            let mut host = SyntheticHost::new(profile).map_err(|e| CliError::new(e.to_string()))?;
            if let Some(log) = &args.serving_log {
                host = host
                    .with_serving_log(log)
                    .map_err(|e| CliError::new(e.to_string()))?;
            }
            (Arc::new(host), topics)
        }
        None => (Arc::new(IdleHost::default()), Vec::new()),
    };
    let web_settings = settings.clone();
    super::block_on(async move {
        let store = connect_at_start(&url, &settings, &args.access).await?;
        let agent = BrokerAgent::start(
            store.clone(),
            settings,
            identity,
            host,
            AgentOptions {
                seed: args.seed,
                clock: None,
            },
        )
        .await
        .map_err(|e| match e {
            crate::runtime::RuntimeError::Store(store::Error::Unauthorized { .. }) => CliError::new(format!(
                "{e} (the store refuses this broker: give it the user its nodes belong to with \
                 loadmgrMetadataStoreUser and loadmgrMetadataStorePasswordFile in broker.conf, or --user and \
                 --password-file; docs/security.md)"
            )),
            e => CliError::new(e.to_string()),
        })?;
        let web = match crate::runtime::http::WebService::start(&agent, &web_settings).await {
            Ok(w) => w,
            Err(e) => {
                let _ = agent.shutdown().await;
                return Err(CliError::new(format!("web service: {e}")));
            }
        };
        let listening: Vec<String> = web.addresses().iter().map(|a| a.to_string()).collect();
        println!(
            "loadmgr broker {} running on {} ({}), web service on {}; stop with SIGINT or SIGTERM",
            agent.broker_id(),
            store.address(),
            if agent.is_leader() {
                "leader"
            } else {
                "follower"
            },
            listening.join(" and ")
        );
        let clients =
            (!topics.is_empty()).then(|| tokio::spawn(look_up_all(agent.lookup_client(), topics)));
        wait_for_signal().await?;
        if let Some(c) = clients {
            c.abort();
        }
        let id = agent.broker_id().to_owned();
        web.shutdown().await;
        agent
            .shutdown()
            .await
            .map_err(|e| CliError::new(e.to_string()))?;
        let _ = store.close().await;
        println!("loadmgr broker {id} stopped");
        Ok(())
    })
}

/// What the clients of a synthetic profile do once at start: look one topic of every bundle up (retrying
/// until it has an owner), so the leader assigns the bundles they use.
async fn look_up_all(client: crate::runtime::LookupClient, topics: Vec<String>) {
    use crate::bundle::{BundleName, TopicName};
    let mut pending = topics;
    let mut delay = Duration::from_millis(200);
    while !pending.is_empty() {
        let mut seen = std::collections::BTreeSet::new();
        let mut failed = Vec::new();
        for topic in pending {
            // One lookup per bundle: topics of a bundle already looked up in this pass are skipped.
            if let Ok(t) = TopicName::parse(&topic) {
                if let Ok(Some(info)) =
                    crate::runtime::namespaces::read_bundles(client.store(), t.namespace()).await
                {
                    let bundle =
                        BundleName::new(t.namespace().clone(), info.bundles.find_topic(&t));
                    if !seen.insert(bundle.to_string()) {
                        continue;
                    }
                }
            }
            match client.lookup(&topic, Duration::from_secs(30)).await {
                Ok(found) => {
                    tracing::info!(topic, bundle = %found.bundle, owner = %found.broker, "lookup")
                }
                Err(e) => {
                    tracing::warn!(topic, "lookup failed: {e}; retrying");
                    failed.push(topic);
                }
            }
        }
        pending = failed;
        if !pending.is_empty() {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }
}

async fn wait_for_signal() -> CliResult {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| CliError::new(format!("cannot listen for SIGTERM: {e}")))?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|e| CliError::new(format!("cannot listen for SIGINT: {e}"))),
        _ = term.recv() => Ok(()),
    }
}
