//! `loadmgr admin`, `snapshot` and `explain --store` on a `memory:NAME` store shared in the process: agents run
//! on a background runtime and the commands go through `cli::run` exactly as the binary runs them.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use loadmgr::cli::{run, Cli};
use loadmgr::config::Settings;
use loadmgr::model::NamespaceEphemeralData;
use loadmgr::paths;
use loadmgr::runtime::identity::owner_of;
use loadmgr::runtime::{
    AgentOptions, BrokerAgent, BrokerIdentity, SyntheticHost, SyntheticProfile,
};
use loadmgr::store::{self, DynStore, MetadataStoreExt, StoreOptions};

fn loadmgr(args: &[&str]) -> bool {
    let code = run(Cli::parse_from(
        std::iter::once("loadmgr").chain(args.iter().copied()),
    ));
    format!("{code:?}") == format!("{:?}", ExitCode::SUCCESS)
}

async fn owner(store: &DynStore, bundle: &str) -> Option<String> {
    store
        .get_json::<NamespaceEphemeralData>(&paths::ownership(bundle))
        .await
        .unwrap()
        .and_then(|(d, _)| owner_of(&d))
}

#[test]
fn admin_snapshot_and_explain_on_a_shared_memory_store() {
    let name = format!("cli-test-{}", std::process::id());
    let url = format!("memory:{name}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let profile = SyntheticProfile::from_json(
        r#"{"lookupOnStart": false, "topics": [{"name": "persistent://public/cli/t-{0..31}", "msgRateIn": 10}]}"#,
        "test",
    )
    .unwrap();
    let (agents, watcher) = rt.block_on(async {
        let mut agents = Vec::new();
        for port in [9001u16, 9002] {
            let store = store::connect(&url, StoreOptions::default()).await.unwrap();
            let mut s = Settings::default();
            s.advertised_address = Some("127.0.0.1".into());
            s.web_service_port = Some(port as i32);
            s.load_balancer_report_update_min_interval_millis = 100;
            let identity = BrokerIdentity::from_settings(&s).unwrap();
            let host = Arc::new(SyntheticHost::new(profile.clone()).unwrap());
            agents.push(
                BrokerAgent::start(store, s, identity, host, AgentOptions::default())
                    .await
                    .unwrap(),
            );
        }
        let watcher = store::connect(&url, StoreOptions::default()).await.unwrap();
        (agents, watcher)
    });

    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "namespaces",
        "create",
        "public/cli",
        "--bundles",
        "2"
    ]));
    assert!(
        !loadmgr(&[
            "admin",
            "--store",
            &url,
            "namespaces",
            "create",
            "public/cli"
        ]),
        "exists already"
    );
    assert!(loadmgr(&["admin", "--store", &url, "brokers", "list"]));
    assert!(loadmgr(&["admin", "--store", &url, "brokers", "leader"]));
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "brokers",
        "load-report",
        "127.0.0.1:9001"
    ]));
    assert!(!loadmgr(&[
        "admin",
        "--store",
        &url,
        "brokers",
        "load-report",
        "nobody:1"
    ]));
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "topics",
        "lookup",
        "persistent://public/cli/t-1"
    ]));
    let bundle = "public/cli/0x00000000_0x80000000";
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "topics",
        "lookup",
        "persistent://public/cli/t-0"
    ]));
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "topics",
        "lookup",
        "persistent://public/cli/t-2"
    ]));
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "namespaces",
        "bundles",
        "public/cli"
    ]));
    let before = rt.block_on(owner(&watcher, bundle)).expect("looked up");
    let other = if before == "127.0.0.1:9001" {
        "127.0.0.1:9002"
    } else {
        "127.0.0.1:9001"
    };
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "namespaces",
        "unload",
        "public/cli",
        "--bundle",
        "0x00000000_0x80000000",
        "--destination-broker",
        other,
    ]));
    assert_eq!(rt.block_on(owner(&watcher, bundle)).as_deref(), Some(other));
    assert!(loadmgr(&[
        "admin",
        "--store",
        &url,
        "namespaces",
        "split-bundle",
        "public/cli",
        "--bundle",
        "0x00000000_0x80000000",
        "--algorithm",
        "specified_positions_divide",
        "--positions",
        "0x10000000",
    ]));
    let (info, _) = rt
        .block_on(loadmgr::runtime::admin::namespace_bundles(
            &watcher,
            "public/cli",
        ))
        .unwrap();
    assert_eq!(
        info.bundle_names(),
        vec![
            "public/cli/0x00000000_0x10000000",
            "public/cli/0x10000000_0x80000000",
            "public/cli/0x80000000_0xffffffff"
        ]
    );
    assert!(loadmgr(&["admin", "--store", &url, "shedding", "disable"]));
    let config = rt
        .block_on(watcher.get(paths::DYNAMIC_CONFIGURATION))
        .unwrap()
        .unwrap();
    assert_eq!(config.value, br#"{"loadBalancerSheddingEnabled":"false"}"#);
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.json");
    assert!(loadmgr(&[
        "snapshot",
        "--store",
        &url,
        "--output",
        snap.to_str().unwrap()
    ]));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&snap).unwrap()).unwrap();
    assert_eq!(v["brokers"].as_object().unwrap().len(), 2);
    assert!(loadmgr(&["explain", "--snapshot", snap.to_str().unwrap()]));
    assert!(loadmgr(&["explain", "--store", &url]));

    rt.block_on(async {
        for a in agents {
            a.shutdown().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
    assert!(!loadmgr(&[
        "admin",
        "--store",
        &url,
        "--timeout-ms",
        "1000",
        "topics",
        "lookup",
        "persistent://public/cli/t-1"
    ]));
}
