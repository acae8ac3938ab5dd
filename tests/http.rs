//! The web service of `loadmgr broker`, through curl and `loadmgr admin --url`, on three broker processes: every
//! endpoint on ZooKeeper and on etcd, bad input on every endpoint, and tokens and TLS (a test CA made with
//! openssl). Each test starts its own store and brokers.

mod http_support;

use std::process::Command;

use http_support::{get, loadmgr, request, Cluster, NS};
use jsonwebtoken::{encode, EncodingKey, Header};
use loadmgr::store::CreateOptions;
use loadmgr::testing::servers::{EtcdServer, TempDir, TestCertificates, ZkServer};
use serde_json::Value;

/// Every endpoint, answered as Pulsar would, from every broker.
async fn rest_api(url: &str) {
    let c = Cluster::start(url, "", false, None).await;
    let leader = c.leader();
    let follower = (leader + 1) % 3;
    let (f, l) = (c.url(follower), c.url(leader));

    // Partitioned-topic metadata: 0, or what Pulsar stored.
    assert_eq!(
        get(&f, "/admin/v2/persistent/public/web/t-1/partitions", None),
        (200, serde_json::json!({"partitions": 0}))
    );
    c.store
        .put(
            "/admin/partitioned-topics/public/web/persistent/p%2Dtopic",
            br#"{"partitions":3}"#,
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    c.store
        .put(
            "/admin/partitioned-topics/public/web/persistent/p-topic",
            br#"{"partitions":4}"#,
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    assert_eq!(
        get(
            &f,
            "/admin/v2/persistent/public/web/p-topic/partitions",
            None
        )
        .1["partitions"],
        4
    );

    // A lookup of an unowned bundle through a follower: forwarded to the leader, placed, answered with the
    // owner; then any broker answers it at once.
    let (status, found) = get(&f, "/lookup/v2/topic/persistent/public/web/t-1", None);
    assert_eq!(status, 200, "{found}\n{}", c.logs());
    let owner_http = found["httpUrl"].as_str().unwrap().to_owned();
    assert!(
        found["brokerUrl"]
            .as_str()
            .unwrap()
            .starts_with("pulsar://127.0.0.1:"),
        "{found}"
    );
    assert_eq!(
        found["brokerUrlSsl"], "",
        "the C++ client needs brokerUrlSsl or brokerUrlTls"
    );
    assert_eq!(found["nativeUrl"], found["brokerUrl"]);
    for i in 0..3 {
        let (s, again) = get(
            &c.url(i),
            "/lookup/v2/topic/persistent/public/web/t-1",
            None,
        );
        assert_eq!(
            (s, again["httpUrl"].as_str().unwrap()),
            (200, owner_http.as_str())
        );
    }
    // Through the leader too, with Pulsar's query parameters.
    assert_eq!(
        get(
            &l,
            "/lookup/v2/topic/persistent/public/web/t-2?authoritative=false&listenerName=",
            None
        )
        .0,
        200
    );

    // Brokers.
    let (s, brokers) = get(&f, "/admin/v2/brokers/test", None);
    assert_eq!((s, brokers.as_array().unwrap().len()), (200, 3));
    assert_eq!(get(&f, "/admin/v2/brokers", None).1, brokers);
    assert_eq!(get(&f, "/admin/v2/brokers/other-cluster", None).0, 404);
    let (s, leader_info) = get(&f, "/admin/v2/brokers/leaderBroker", None);
    assert_eq!(s, 200);
    assert_eq!(leader_info["serviceUrl"], l);
    let owner_id = owner_http.trim_start_matches("http://").to_owned();
    let (s, owned) = get(
        &f,
        &format!("/admin/v2/brokers/test/{owner_id}/ownedNamespaces"),
        None,
    );
    assert_eq!(s, 200);
    let (bundle, status) = owned.as_object().unwrap().iter().next().unwrap();
    assert!(bundle.starts_with("public/web/0x"), "{owned}");
    assert_eq!(status["broker_assignment"], "shared");
    assert_eq!(status["is_active"], true);
    assert_eq!(
        get(&f, "/admin/v2/brokers/test/nobody:1/ownedNamespaces", None).0,
        404
    );
    assert_eq!(
        get(&f, "/admin/v2/brokers/health", None),
        (200, Value::String("ok".into()))
    );
    assert_eq!(
        get(&f, "/admin/v2/brokers/ready", None),
        (200, Value::String("ok".into()))
    );
    let (s, report) = get(&f, "/admin/v2/broker-stats/load-report", None);
    assert_eq!(s, 200);
    assert_eq!(report["loadReportType"], "LocalBrokerData");

    // The dynamic configuration.
    let (s, keys) = get(&f, "/admin/v2/brokers/configuration", None);
    assert_eq!(s, 200);
    assert!(keys
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "loadBalancerSheddingEnabled"));
    assert_eq!(
        request(
            "POST",
            &format!("{f}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/false"),
            None,
            None,
            &[]
        )
        .0,
        204
    );
    assert_eq!(
        get(&l, "/admin/v2/brokers/configuration/values", None).1["loadBalancerSheddingEnabled"],
        "false"
    );
    let (s, runtime) = get(&f, "/admin/v2/brokers/configuration/runtime", None);
    assert_eq!((s, runtime["clusterName"].as_str()), (200, Some("test")));
    assert_eq!(
        request(
            "POST",
            &format!("{f}/admin/v2/brokers/configuration/clusterName/x"),
            None,
            None,
            &[]
        )
        .0,
        412
    );
    assert_eq!(
        request(
            "POST",
            &format!("{f}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/maybe"),
            None,
            None,
            &[]
        )
        .0,
        412
    );
    assert_eq!(
        request(
            "DELETE",
            &format!("{f}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled"),
            None,
            None,
            &[]
        )
        .0,
        204
    );
    assert_eq!(
        get(&l, "/admin/v2/brokers/configuration/values", None).1,
        serde_json::json!({})
    );

    // Namespaces: create, bundles, unload one bundle to a chosen broker, split one, unload all.
    assert_eq!(
        request(
            "PUT",
            &format!("{f}/admin/v2/namespaces/public/other"),
            None,
            Some(r#"{"bundles":{"numBundles":2,"boundaries":["0x00000000","0x40000000","0xffffffff"]}}"#),
            &[]
        )
        .0,
        204
    );
    assert_eq!(
        request(
            "PUT",
            &format!("{f}/admin/v2/namespaces/public/other"),
            None,
            None,
            &[]
        )
        .0,
        409
    );
    let (s, b) = get(&f, "/admin/v2/namespaces/public/other/bundles", None);
    assert_eq!((s, b["numBundles"].as_i64()), (200, Some(2)), "{b}");
    assert_eq!(b["boundaries"][1], "0x40000000", "{b}");
    assert_eq!(b["boundaries"].as_array().map(Vec::len), Some(3), "{b}");
    let t1 = loadmgr::bundle::TopicName::parse("persistent://public/web/t-1").unwrap();
    let info = loadmgr::runtime::namespaces::read_bundles(&c.store, t1.namespace())
        .await
        .unwrap()
        .unwrap();
    let range = info.bundles.find_topic(&t1).to_string();
    let range = range.as_str();
    let dest = c
        .ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .find(|id| *id != owner_id)
        .unwrap();
    assert_eq!(
        request(
            "PUT",
            &format!("{f}/admin/v2/namespaces/public/web/{range}/unload?destinationBroker={dest}"),
            None,
            None,
            &[]
        )
        .0,
        204
    );
    assert_eq!(
        get(&f, "/lookup/v2/topic/persistent/public/web/t-1", None).1["httpUrl"],
        format!("http://{dest}")
    );
    assert_eq!(request("PUT", &format!("{f}/admin/v2/namespaces/public/web/{range}/split?unload=false&splitAlgorithmName=range_equally_divide"), None, None, &[]).0, 204, "{}", c.logs());
    assert_eq!(
        get(&f, "/admin/v2/namespaces/public/web/bundles", None).1["numBundles"],
        5
    );
    assert_eq!(
        request(
            "PUT",
            &format!("{f}/admin/v2/namespaces/public/web/unload"),
            None,
            None,
            &[]
        )
        .0,
        204
    );

    // loadmgr's own.
    let (s, st) = get(&f, "/loadmgr/v1/status", None);
    assert_eq!(
        (s, st["leader"].as_str()),
        (200, Some(format!("127.0.0.1:{}", c.ports[leader]).as_str()))
    );
    assert!(st["status"]["movesStarted"].as_u64().unwrap() >= 2, "{st}");
    let (s, plan) = get(&f, "/loadmgr/v1/plan?strategy=ThresholdShedder", None);
    assert_eq!(s, 200, "{plan}");
    assert!(
        plan.get("cycles").is_some() || plan.get("decisions").is_some() || plan.is_object(),
        "{plan}"
    );
    let (s, recs) = get(&f, "/loadmgr/v1/assignments?namespace=public/web", None);
    assert_eq!(s, 200);
    assert!(!recs.as_array().unwrap().is_empty());
    assert_eq!(
        get(&f, "/loadmgr/v1/brokers", None)
            .1
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        get(&f, "/loadmgr/v1/namespaces/public/web", None)
            .1
            .as_array()
            .unwrap()
            .len(),
        5
    );
    let (s, doc) = get(&f, "/loadmgr/v1/openapi.json", None);
    assert_eq!(s, 200);
    assert!(doc["paths"]["/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"].is_object());

    // The dashboard's data, through the follower (cluster, history and moves come from the leader's memory).
    let (s, cl) = get(&f, "/loadmgr/v1/cluster", None);
    assert_eq!(s, 200, "{cl}");
    assert_eq!(
        cl["broker"].as_str(),
        Some(format!("127.0.0.1:{}", c.ports[leader]).as_str()),
        "answered by the leader: {cl}"
    );
    assert!(cl["degraded"].is_null(), "{cl}");
    let brokers = cl["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 3, "{cl}");
    assert_eq!(brokers.iter().filter(|b| b["leader"] == true).count(), 1);
    assert!(
        brokers.iter().all(|b| b["summary"]["score"].is_number()),
        "{cl}"
    );
    assert_eq!(cl["thresholds"]["overloaded"], 85.0);
    assert!(cl["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["namespace"] == "public/web" && n["bundles"] == 5));
    let (s, h) = get(&f, "/loadmgr/v1/history?minutes=10&points=20", None);
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["scores"].as_object().unwrap().len(), 3, "{h}");
    let (s, moves) = get(&f, "/loadmgr/v1/moves?namespace=public/web&limit=50", None);
    assert_eq!(s, 200, "{moves}");
    let moves = moves.as_array().unwrap();
    assert!(
        moves
            .iter()
            .any(|m| m["cause"] == "unload" && m["source"].is_string()),
        "the namespace unload above is a move: {moves:?}"
    );
    assert!(moves
        .iter()
        .all(|m| m["bundle"].as_str().unwrap().starts_with("public/web/")));
    let (_, only) = get(&f, "/loadmgr/v1/moves?cause=split", None);
    assert!(
        only.as_array()
            .unwrap()
            .iter()
            .all(|m| m["cause"] == "split"),
        "{only}"
    );
    let (s, rings) = get(&f, "/loadmgr/v1/rings?namespace=public/web", None);
    assert_eq!(s, 200);
    let ring = &rings.as_array().unwrap()[0]["bundles"];
    assert_eq!(ring.as_array().unwrap().len(), 5, "{rings}");
    assert_eq!(ring[0]["lower"], 0);
    assert_eq!(ring[4]["upper"], 0xffff_ffffu64);
    let (s, page) = request("GET", &format!("{f}/dashboard"), None, None, &[]);
    assert_eq!(s, 200);
    assert!(page.as_str().unwrap().contains("/dashboard/app.js"));
    assert_eq!(
        request("GET", &format!("{f}/"), None, None, &[]).0,
        307,
        "/ redirects to the dashboard"
    );

    // Metrics: Pulsar's load-balancing gauges and loadmgr's counters.
    let (s, text) = get(&l, "/metrics", None);
    assert_eq!(s, 200);
    let text = text.as_str().unwrap();
    assert!(
        text.contains(
            "pulsar_lb_cpu_usage{cluster=\"test\",broker=\"127.0.0.1\",metric=\"loadBalancing\"}"
        ),
        "{text}"
    );
    assert!(text.contains("loadmgr_leader 1"), "{text}");
    assert!(
        text.contains("loadmgr_lookups_total{outcome=\"placed\"}"),
        "{text}"
    );

    // Bad input: 4xx with a reason, never 5xx.
    for (method, path, body, want) in [
        ("GET", "/lookup/v2/topic/bogus/public/web/t", None, 400),
        (
            "GET",
            "/lookup/v2/topic/persistent/public/nope/t",
            None,
            404,
        ),
        (
            "GET",
            "/admin/v2/persistent/public/nope/t/partitions",
            None,
            404,
        ),
        (
            "GET",
            "/admin/v2/brokers/test/%20/ownedNamespaces",
            None,
            404,
        ),
        ("GET", "/admin/v2/namespaces/public/nope/bundles", None, 404),
        ("GET", "/admin/v2/namespaces/bad*name/x/bundles", None, 412),
        (
            "GET",
            "/lookup/v2/topic/persistent/p%C3%A9/web/t",
            None,
            412,
        ),
        ("GET", "/loadmgr/v1/namespaces/bad*name/x", None, 400),
        ("GET", "/loadmgr/v1/assignments?namespace=", None, 400),
        (
            "PUT",
            "/admin/v2/namespaces/public/web/0x00000000_0x40000000/unload?authoritative=maybe",
            None,
            400,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/new4",
            Some("[null, null]"),
            400,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/new5",
            Some(r#"{"bundles":{"numBundles":"x"}}"#),
            400,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/new6",
            Some(r#"{"bundles":{"numBundles":2,"boundaries":["0x00000000","0x90000000"]}}"#),
            412,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/web/0xzz_0x10/unload",
            None,
            412,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/web/0x00000000_0x12345678/unload",
            None,
            412,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/web/0x00000000_0x40000000/split",
            Some("[\"x\""),
            400,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/new",
            Some("{not json"),
            400,
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/new2",
            Some(r#"{"bundles":{"numBundles":0,"boundaries":["0x00000000","0xffffffff"]}}"#),
            204, // Pulsar: numBundles 0 means the default bundles, whatever the boundaries
        ),
        (
            "PUT",
            "/admin/v2/namespaces/public/new3",
            Some(r#"{"bundles":{"numBundles":100000000}}"#),
            412,
        ),
        (
            "POST",
            "/admin/v2/brokers/configuration/noSuchKey/1",
            None,
            412,
        ),
        (
            "DELETE",
            "/admin/v2/brokers/configuration/clusterName",
            None,
            412,
        ),
        ("GET", "/loadmgr/v1/plan?strategy=Nope", None, 400),
        ("GET", "/loadmgr/v1/history?minutes=0", None, 400),
        ("GET", "/loadmgr/v1/history?points=5000", None, 400),
        ("GET", "/loadmgr/v1/moves?limit=0", None, 400),
        ("GET", "/loadmgr/v1/moves?cause=whim", None, 400),
        ("GET", "/loadmgr/v1/moves?namespace=bad*name", None, 400),
        ("GET", "/loadmgr/v1/rings?namespace=nons", None, 400),
        ("GET", "/loadmgr/v1/namespaces/public/nope", None, 412),
        ("GET", "/no/such/path", None, 404),
        ("DELETE", "/admin/v2/brokers/health", None, 405),
    ] {
        let (s, v) = request(method, &format!("{f}{path}"), None, body, &[]);
        assert_eq!(s, want, "{method} {path}: {v}");
        assert!(
            s == 204 || v["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{method} {path}: {v}"
        );
    }
    assert_eq!(
        get(&f, "/admin/v2/namespaces/public/new2/bundles", None).1["numBundles"],
        32,
        "defaultNumberOfNamespaceBundles (Pulsar 5.0: 32)"
    );
    let huge = "[".to_owned() + &"1,".repeat(40_000) + "1]";
    let (s, _) = request(
        "PUT",
        &format!("{f}/admin/v2/namespaces/public/web/0x00000000_0x40000000/split"),
        None,
        Some(&huge),
        &[],
    );
    assert_eq!(s, 413);

    // `loadmgr admin --url` and `loadmgr health`.
    let out = loadmgr(&["admin", "--url", &f, "brokers", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.lines().count() == 3 && text.contains("(leader)"),
        "{text}"
    );
    let out = loadmgr(&[
        "admin",
        "--url",
        &f,
        "topics",
        "lookup",
        "persistent://public/web/t-9",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(" -> http://127.0.0.1:"));
    let out = loadmgr(&["admin", "--url", &f, "namespaces", "bundles", NS]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("public/web: 5 bundles"));
    let out = loadmgr(&["health", "--url", &f]);
    assert_eq!(
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        (true, "ok")
    );
    let out = loadmgr(&["health", "--url", "http://127.0.0.1:1", "--ready"]);
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_api_on_zookeeper() {
    let server = ZkServer::start();
    rest_api(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_api_on_etcd() {
    let server = EtcdServer::start();
    rest_api(&server.url()).await;
}

/// A throw-away CA and a certificate for 127.0.0.1, with openssl.
fn token(secret: &[u8], sub: &str) -> String {
    encode(
        &Header::default(),
        &serde_json::json!({"sub": sub}),
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_tls_on_zookeeper() {
    let server = ZkServer::start();
    tokens_and_tls(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_tls_on_etcd() {
    let server = EtcdServer::start();
    tokens_and_tls(&server.url()).await;
}

/// Tokens (none, forged, a client role, the admin role) and HTTPS with a test CA, through curl, `admin --url`
/// and `health`.
async fn tokens_and_tls(url: &str) {
    use base64::Engine;
    let certs = TempDir::new("http-certs");
    let TestCertificates { ca, cert, key } = TestCertificates::make(certs.path());
    let secret = b"a-test-secret-of-32-bytes-length";
    let extra = format!(
        "authenticationEnabled=true\nauthorizationEnabled=true\n\
         authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n\
         tokenSecretKey=data:;base64,{}\nsuperUserRoles=admin\n\
         tlsCertificateFilePath={}\ntlsKeyFilePath={}\ntlsTrustCertsFilePath={}\n",
        base64::engine::general_purpose::STANDARD.encode(secret),
        cert.display(),
        key.display(),
        ca.display()
    );
    let admin = token(secret, "admin");
    // `loadmgr admin --store` needs no token: the namespace is created through the store.
    let c = Cluster::start(url, &extra, true, Some(admin.clone())).await;
    let app = token(secret, "app");
    let forged = token(b"another-secret-another-secret-xx", "admin");
    let leader = c.leader_with(&admin);
    let follower = (leader + 1) % 3;
    let f = c.url(follower);
    let ca_path = ca.display().to_string();

    // Without a token: 401 with a reason; metrics stay open (authenticateMetricsEndpoint=false).
    for path in [
        "/lookup/v2/topic/persistent/public/web/t-1",
        "/admin/v2/brokers/test",
        "/loadmgr/v1/status",
        "/admin/v2/brokers/ready",
    ] {
        let (s, v) = get(&f, path, None);
        assert_eq!(s, 401, "{path}: {v}");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .starts_with("Authentication required"),
            "{v}"
        );
    }
    assert_eq!(get(&f, "/admin/v2/brokers/test", Some(&forged)).0, 401);
    assert_eq!(get(&f, "/metrics", None).0, 200);
    assert_eq!(get(&f, "/loadmgr/v1/openapi.json", None).0, 200);
    // A client role looks topics up (through a follower: the forward carries the token) but does not
    // administer.
    let (s, found) = get(&f, "/lookup/v2/topic/persistent/public/web/t-3", Some(&app));
    assert_eq!(s, 200, "{found}\n{}", c.logs());
    let (s, v) = get(&f, "/admin/v2/brokers/test", Some(&app));
    assert_eq!(s, 403, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("super-user"));
    // The admin role does.
    assert_eq!(get(&f, "/admin/v2/brokers/test", Some(&admin)).0, 200);
    assert_eq!(
        request(
            "POST",
            &format!("{f}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/false"),
            Some(&app),
            None,
            &[]
        )
        .0,
        403
    );
    assert_eq!(
        request(
            "POST",
            &format!("{f}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/false"),
            Some(&admin),
            None,
            &[]
        )
        .0,
        204
    );

    // Over TLS with the test CA; a client that does not trust it is refused by TLS itself.
    let tls = c.tls_url(follower);
    let (s, found_tls) = request(
        "GET",
        &format!("{tls}/lookup/v2/topic/persistent/public/web/t-3"),
        Some(&app),
        None,
        &["--cacert", &ca_path],
    );
    assert_eq!((s, &found_tls), (200, &found));
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("{tls}/admin/v2/brokers/ready"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "000",
        "an untrusted certificate fails the handshake"
    );

    // `loadmgr admin --url` and `loadmgr health` with a token file and the CA.
    let token_file = c.dir.path().join("admin.token");
    std::fs::write(&token_file, &admin).unwrap();
    let out = loadmgr(&[
        "admin",
        "--url",
        &tls,
        "--auth-token-file",
        token_file.to_str().unwrap(),
        "--tls-trust-certs",
        ca.to_str().unwrap(),
        "brokers",
        "leader",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = loadmgr(&[
        "admin",
        "--url",
        &tls,
        "--auth-token",
        &app,
        "--tls-trust-certs",
        ca.to_str().unwrap(),
        "brokers",
        "list",
    ]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("403"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = loadmgr(&[
        "health",
        "--url",
        &tls,
        "--auth-token",
        &admin,
        "--tls-trust-certs",
        ca.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = loadmgr(&["health", "--url", &f]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("401"));
}

/// `loadmgr bench lookups` (a smoke run; docs/http.md has the figures on real ZooKeeper and etcd): an owned
/// bundle's lookup over HTTP writes nothing, one through request nodes writes.
#[test]
fn the_lookup_bench_runs() {
    let out = loadmgr(&[
        "bench",
        "lookups",
        "--store",
        "memory:bench",
        "--bundles",
        "4",
        "--owned",
        "12",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let writes = |row: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row:\n{text}"));
        line.split_whitespace().last().unwrap().parse().unwrap()
    };
    // An owned lookup answered over HTTP writes nothing; the idle cluster's own report and flush writes land in
    // whichever phase is running (the table says so), so a phase of 12 lookups may show one of them (0.08).
    // A lookup that wrote would show at least 1.
    assert!(writes("HTTP, owned") < 0.5, "{text}");
    assert!(writes("requests, owned") >= 1.0, "{text}");
    assert!(writes("HTTP, unowned") >= 2.0, "{text}");
}
