//! Reads, writes and versions: invalid paths and missing nodes, conditional puts and deletes, children
//! listings, stat fields, sequential nodes, typed JSON values, explicit parents and recursive deletes — the
//! contract of one node and of a tree, as one session sees it (a second only to check `created_by_self`).

use crate::model::json::to_json_vec;
use crate::model::{LeaderBroker, LocalBrokerData};
use crate::store::{Backend, CreateOptions, Error, MetadataStoreExt, Op, CREATE_ONLY};

use super::{cleanup, put_in_batches, Sessions};

/// Invalid paths fail everywhere; missing nodes read as absent; deletes of missing nodes are `NotFound` even
/// with a version (Pulsar `emptyStoreTest`, `emptyKeyTest`).
pub async fn paths_and_missing_nodes(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    for bad in ["", "no-slash", "/trailing/", "/a//b"] {
        let is_invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidPath { .. }));
        assert!(is_invalid(store.get(bad).await.map(|_| ())), "get {bad:?}");
        assert!(
            is_invalid(store.exists(bad).await.map(|_| ())),
            "exists {bad:?}"
        );
        assert!(
            is_invalid(store.get_children(bad).await.map(|_| ())),
            "children {bad:?}"
        );
        assert!(
            is_invalid(
                store
                    .put(bad, b"v", None, CreateOptions::PERSISTENT)
                    .await
                    .map(|_| ())
            ),
            "put {bad:?}"
        );
        assert!(is_invalid(store.delete(bad, None).await), "delete {bad:?}");
    }
    let missing = format!("{root}/missing");
    assert_eq!(store.get(&missing).await.unwrap(), None);
    assert!(!store.exists(&missing).await.unwrap());
    assert_eq!(
        store.get_children(&missing).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.delete(&missing, None).await,
        Err(Error::not_found(&missing))
    );
    assert_eq!(
        store.delete(&missing, Some(1)).await,
        Err(Error::not_found(&missing))
    );
    assert!(store.exists("/").await.unwrap() || store.backend() == Backend::Etcd);
    store.close().await.unwrap();
}

/// Pulsar's `insertionTestWithExpectedVersion` plus unconditional writes.
pub async fn put_version_semantics(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let key = format!("{root}/key");
    let p = CreateOptions::PERSISTENT;
    assert_eq!(
        store.put(&key, b"a", Some(0), p).await,
        Err(Error::bad_version(&key, 0))
    );
    assert_eq!(
        store.put(&key, b"a", Some(1), p).await,
        Err(Error::bad_version(&key, 1))
    );
    let stat = store.put(&key, b"a", Some(CREATE_ONLY), p).await.unwrap();
    assert_eq!((stat.version, stat.path.as_str()), (0, key.as_str()));
    assert_eq!(
        store.put(&key, b"b", Some(CREATE_ONLY), p).await,
        Err(Error::bad_version(&key, CREATE_ONLY))
    );
    assert_eq!(
        store.put(&key, b"b", Some(1), p).await,
        Err(Error::bad_version(&key, 1))
    );
    let stat = store.put(&key, b"b", Some(0), p).await.unwrap();
    assert_eq!(stat.version, 1);
    let got = store.get(&key).await.unwrap().unwrap();
    assert_eq!((got.value.as_slice(), got.stat.version), (&b"b"[..], 1));
    let stat = store.put(&key, b"c", None, p).await.unwrap();
    assert_eq!(stat.version, 2);
    let fresh = format!("{root}/fresh");
    let stat = store.put(&fresh, b"", None, p).await.unwrap();
    assert_eq!(stat.version, 0, "an unconditional put creates at version 0");
    assert_eq!(store.get(&fresh).await.unwrap().unwrap().value, b"");
    // Binary values survive untouched.
    let bin: Vec<u8> = (0..=255u8).collect();
    store.put(&fresh, &bin, Some(0), p).await.unwrap();
    assert_eq!(store.get(&fresh).await.unwrap().unwrap().value, bin);
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// Deletes: versions, children, success.
pub async fn delete_semantics(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let key = format!("{root}/d");
    let child = format!("{key}/child");
    store
        .put(&key, b"x", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    store
        .put(&key, b"y", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(
        store.delete(&key, Some(0)).await,
        Err(Error::bad_version(&key, 0))
    );
    store
        .put(&child, b"c", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(
        store.delete(&key, None).await,
        Err(Error::NotEmpty { path: key.clone() })
    );
    assert_eq!(
        store.delete(&key, Some(1)).await,
        Err(Error::NotEmpty { path: key.clone() })
    );
    store.delete(&child, Some(0)).await.unwrap();
    assert!(!store.exists(&child).await.unwrap());
    store.delete(&key, Some(1)).await.unwrap();
    assert!(!store.exists(&key).await.unwrap());
    assert_eq!(store.get(&key).await.unwrap(), None);
    assert!(!store.delete_if_exists(&key, None).await.unwrap());
    // A re-created node starts again at version 0 with a new creation revision.
    let first = store
        .put(&key, b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    store.delete(&key, None).await.unwrap();
    let second = store
        .put(&key, b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(second.version, 0);
    assert_ne!(first.creation_revision, second.creation_revision);
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// `get_many` answers each path as `get` does, in the order asked: values, versions, missing nodes as `None`,
/// a path given twice twice, an empty request as nothing; an invalid path fails the call.
pub async fn many_reads(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let mut paths = Vec::new();
    for i in 0..150 {
        let path = format!("{root}/many/n-{i:03}");
        if i % 3 != 0 {
            store
                .put(
                    &path,
                    format!("value {i}").as_bytes(),
                    None,
                    CreateOptions::PERSISTENT,
                )
                .await
                .unwrap();
            if i % 5 == 0 {
                store
                    .put(&path, b"again", None, CreateOptions::PERSISTENT)
                    .await
                    .unwrap();
            }
        }
        paths.push(path);
    }
    paths.push(paths[1].clone());
    let many = store.get_many(&paths).await.unwrap();
    assert_eq!(many.len(), paths.len());
    for (path, got) in paths.iter().zip(&many) {
        let one = store.get(path).await.unwrap();
        assert_eq!(
            got.as_ref()
                .map(|g| (&g.value, g.stat.version, g.stat.modification_revision)),
            one.as_ref()
                .map(|g| (&g.value, g.stat.version, g.stat.modification_revision)),
            "{path}"
        );
    }
    assert!(many[0].is_none() && many[3].is_none(), "missing nodes");
    assert_eq!(many[1].as_ref().unwrap().value, b"value 1");
    assert_eq!(many[10].as_ref().unwrap().value, b"again");
    assert_eq!(many[150].as_ref().unwrap().value, b"value 1");
    assert!(store.get_many(&[]).await.unwrap().is_empty());
    assert!(matches!(
        store
            .get_many(&[paths[1].clone(), "no-slash".to_string()])
            .await,
        Err(Error::InvalidPath { .. })
    ));
    store.close().await.unwrap();
}

/// Children are direct, sorted names; parents exist where the backend has implicit parents.
pub async fn children_listing(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let caps = store.backend().capabilities();
    let base = format!("{root}/brokers");
    for name in ["b:8080", "a:8080", "c-1", "c"] {
        store
            .put(
                &format!("{base}/{name}"),
                b"{}",
                None,
                CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
    }
    store
        .put(
            &format!("{base}/a:8080/deep/er"),
            b"",
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    store
        .put(
            &format!("{root}/brokers-extra/x"),
            b"",
            None,
            CreateOptions::PERSISTENT,
        )
        .await
        .unwrap();
    assert_eq!(
        store.get_children(&base).await.unwrap(),
        vec!["a:8080", "b:8080", "c", "c-1"]
    );
    assert_eq!(
        store.get_children(&format!("{base}/a:8080")).await.unwrap(),
        vec!["deep"]
    );
    assert_eq!(
        store.get_children(&format!("{base}/c")).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(store.exists(&base).await.unwrap(), caps.implicit_parents);
    assert_eq!(
        store.exists(&format!("{base}/a:8080/deep")).await.unwrap(),
        caps.implicit_parents
    );
    let top = store.get_children(root).await.unwrap();
    assert_eq!(top, vec!["brokers", "brokers-extra"]);
    assert!(store
        .get_children("/")
        .await
        .unwrap()
        .contains(&"conformance".to_string()));
    cleanup(&*store, root).await;
    assert!(store.get_children(root).await.unwrap().is_empty());
    store.close().await.unwrap();
}

/// Listings longer than one page of a backend that reads them in pages (etcd): 2,500 direct children, and a
/// folder of three children, one of which has 2,500 descendants (a page ends inside its subtree, and a sibling
/// whose name extends the child's sorts before that subtree).
pub async fn large_listings(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let flat = format!("{root}/flat");
    let names: Vec<String> = (0..2_500).map(|i| format!("n{i:05}")).collect();
    let flat_paths: Vec<String> = names.iter().map(|n| format!("{flat}/{n}")).collect();
    put_in_batches(&*store, &flat_paths, b"").await;
    assert_eq!(store.get_children(&flat).await.unwrap(), names);
    let deep = format!("{root}/deep");
    for name in ["t-x", "u"] {
        store
            .put(
                &format!("{deep}/{name}"),
                b"",
                None,
                CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
    }
    let below: Vec<String> = (0..2_500)
        .map(|i| format!("{deep}/t/ns-{}/b{i:05}", i % 7))
        .collect();
    put_in_batches(&*store, &below, b"").await;
    assert_eq!(
        store.get_children(&deep).await.unwrap(),
        vec!["t", "t-x", "u"]
    );
    assert_eq!(
        store.get_children(&format!("{deep}/t")).await.unwrap(),
        (0..7).map(|i| format!("ns-{i}")).collect::<Vec<_>>()
    );
    cleanup(&*store, root).await;
}

/// Stat fields: versions, revisions, times, ephemeral flags, created-by-self.
pub async fn stat_fields(sessions: &dyn Sessions, root: &str) {
    let a = sessions.open().await;
    let b = sessions.open().await;
    let caps = a.backend().capabilities();
    let key = format!("{root}/stat");
    let created = a
        .put(&key, b"1", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let updated = a
        .put(&key, b"2", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    assert_eq!(updated.creation_revision, created.creation_revision);
    assert!(updated.modification_revision > created.modification_revision);
    let got = a.get(&key).await.unwrap().unwrap().stat;
    assert_eq!(got, updated, "get returns what the put returned");
    assert!(!got.ephemeral && !got.created_by_self);
    if caps.timestamps {
        assert!(got.created_ms > 1_600_000_000_000, "{got:?}");
        assert!(got.modified_ms >= got.created_ms);
    } else {
        assert_eq!((got.created_ms, got.modified_ms), (0, 0));
    }
    let eph = format!("{root}/eph");
    let s = a
        .put(&eph, b"e", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    assert!(s.ephemeral && s.created_by_self, "{s:?}");
    let seen_by_b = b.get(&eph).await.unwrap().unwrap().stat;
    assert!(
        seen_by_b.ephemeral && !seen_by_b.created_by_self,
        "{seen_by_b:?}"
    );
    assert_eq!(a.get(&eph).await.unwrap().unwrap().stat, s);
    a.delete(&eph, None).await.unwrap();
    cleanup(&*a, root).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// Sequential nodes: ZooKeeper's 10-digit suffix, increasing, with and without ephemeral.
pub async fn sequential_nodes(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let prefix = format!("{root}/seq/n-");
    let mut paths = Vec::new();
    for (i, options) in [
        CreateOptions::SEQUENTIAL,
        CreateOptions::EPHEMERAL_SEQUENTIAL,
        CreateOptions::SEQUENTIAL,
    ]
    .into_iter()
    .enumerate()
    {
        let stat = store
            .put(&prefix, format!("{i}").as_bytes(), None, options)
            .await
            .unwrap();
        let suffix = stat
            .path
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{} under {prefix}", stat.path));
        assert_eq!(suffix.len(), 10, "{}", stat.path);
        assert!(suffix.bytes().all(|c| c.is_ascii_digit()), "{}", stat.path);
        assert_eq!(stat.ephemeral, options.ephemeral);
        assert_eq!(stat.version, 0);
        assert_eq!(
            store.get(&stat.path).await.unwrap().unwrap().value,
            format!("{i}").as_bytes()
        );
        paths.push(stat.path);
    }
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "suffixes increase");
    sorted.dedup();
    assert_eq!(sorted.len(), 3);
    let children = store.get_children(&format!("{root}/seq")).await.unwrap();
    assert_eq!(children.len(), 3);
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// Typed JSON: model types round-trip, stored bytes are the Java-compatible JSON, bad content is reported.
pub async fn typed_json_round_trip(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let leader_path = format!("{root}/leader");
    let leader = LeaderBroker::new("broker-1:8080", "http://broker-1:8080");
    store
        .put_json(
            &leader_path,
            &leader,
            Some(CREATE_ONLY),
            CreateOptions::EPHEMERAL,
        )
        .await
        .unwrap();
    let raw = store.get(&leader_path).await.unwrap().unwrap().value;
    assert_eq!(
        String::from_utf8(raw).unwrap(),
        r#"{"brokerId":"broker-1:8080","serviceUrl":"http://broker-1:8080"}"#
    );
    let (back, stat) = store
        .get_json::<LeaderBroker>(&leader_path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back, leader);
    assert!(stat.ephemeral);
    let report: LocalBrokerData = serde_json::from_str(
        r#"{"webServiceUrl":"http://b1:8080","pulsarServiceUrl":"pulsar://b1:6650",
            "cpu":{"usage":12.5,"limit":100.0},"numBundles":3,"msgRateIn":1.0E7}"#,
    )
    .unwrap();
    let report_path = format!("{root}/brokers/b1:8080");
    store
        .put_json(&report_path, &report, None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    let raw = store.get(&report_path).await.unwrap().unwrap().value;
    assert_eq!(raw, to_json_vec(&report));
    let (back, _) = store
        .get_json::<LocalBrokerData>(&report_path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back, report);
    assert_eq!(
        store
            .get_json::<LeaderBroker>(&format!("{root}/none"))
            .await
            .unwrap(),
        None
    );
    store
        .put(&leader_path, b"not json", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    let err = store
        .get_json::<LeaderBroker>(&leader_path)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Content { path, .. } if *path == leader_path),
        "{err:?}"
    );
    assert_eq!(
        store
            .create(&leader_path, b"x", CreateOptions::PERSISTENT)
            .await
            .unwrap_err(),
        Error::AlreadyExists {
            path: leader_path.clone()
        }
    );
    store.delete(&leader_path, None).await.unwrap();
    store.delete(&report_path, None).await.unwrap();
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}

/// `create_parents` makes explicit parents; `delete_recursive` removes a tree.
pub async fn parents_and_recursive_delete(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let deep = format!("{root}/p/q/r");
    store.create_parents(&deep).await.unwrap();
    assert!(store.exists(&format!("{root}/p/q")).await.unwrap());
    assert!(!store.exists(&deep).await.unwrap());
    store.create_parents(&deep).await.unwrap();
    for leaf in ["r", "s", "t/u"] {
        store
            .put(
                &format!("{root}/p/q/{leaf}"),
                b"",
                None,
                CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
    }
    store
        .put(&format!("{root}/p/e"), b"", None, CreateOptions::EPHEMERAL)
        .await
        .unwrap();
    // More children than one delete batch, under two parents.
    store
        .create_parents(&format!("{root}/p/many/x"))
        .await
        .unwrap();
    store
        .create_parents(&format!("{root}/p/more/x"))
        .await
        .unwrap();
    let wide: Vec<Op> = (0..300)
        .map(|i| {
            Op::put(
                format!(
                    "{root}/p/{}/n{i:03}",
                    if i % 3 == 0 { "more" } else { "many" }
                ),
                b"x".to_vec(),
            )
        })
        .collect();
    store.batch(wide).await.unwrap();
    store.delete_recursive(&format!("{root}/p")).await.unwrap();
    assert!(!store.exists(&format!("{root}/p")).await.unwrap());
    assert!(store
        .get_children(&format!("{root}/p"))
        .await
        .unwrap()
        .is_empty());
    store
        .delete_recursive(&format!("{root}/never"))
        .await
        .unwrap();
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}
