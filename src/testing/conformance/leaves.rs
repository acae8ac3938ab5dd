//! `get_leaves`: the leaves of a subtree, read in one call, as the listing would find them.

use crate::store::{CreateOptions, Error};

use super::{cleanup, put_in_batches, Sessions};

fn leaf(name: &str) -> bool {
    name.starts_with("leaf-")
}

/// The leaves below a root, at several depths, and nothing else: not a leaf's children, not a directory,
/// not a sibling whose name extends the root's; values and stats as `get` reads them; enough of them with
/// large values to need several pages on etcd; nothing for a missing root; a bad path named.
pub async fn leaves_of_a_subtree(sessions: &dyn Sessions, root: &str) {
    let store = sessions.open().await;
    let tree = format!("{root}/tree");
    let mut expected: Vec<String> = [
        "leaf-top",
        "a/leaf-1",
        "a/b/leaf-2",
        "a/b/c/leaf-3",
        "a/leaf-1-x",
    ]
    .iter()
    .map(|p| format!("{tree}/{p}"))
    .collect();
    for p in &expected {
        store
            .put(p, p.as_bytes(), None, CreateOptions::PERSISTENT)
            .await
            .unwrap();
    }
    // A second version of one leaf, so stats are compared on something that moved.
    store
        .put(&expected[1], b"again", None, CreateOptions::PERSISTENT)
        .await
        .unwrap();
    for p in [
        format!("{tree}/a/leaf-1/below-a-leaf"),
        format!("{tree}/a/leaf-1/leaf-deeper"),
        format!("{tree}/dir-without-leaves/x"),
        format!("{tree}-sibling/leaf-outside"),
        format!("{tree}0/leaf-outside"),
        format!("{root}/leaf-above"),
    ] {
        store
            .put(
                &p,
                b"not a leaf of the tree",
                None,
                CreateOptions::PERSISTENT,
            )
            .await
            .unwrap();
    }
    // 1,200 leaves of 2 KiB in 20 directories: 2.4 MiB, several pages on etcd.
    let big = vec![b'v'; 2_048];
    let many: Vec<String> = (0..1_200)
        .map(|i| format!("{tree}/many-{:02}/ns/leaf-{i:05}", i % 20))
        .collect();
    put_in_batches(&*store, &many, &big).await;
    expected.extend(many);
    expected.sort();

    let got = store.get_leaves(&tree, leaf).await.unwrap();
    let paths: Vec<&String> = got.iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        expected.iter().collect::<Vec<_>>(),
        "the leaves, sorted"
    );
    for (path, found) in &got {
        let one = store.get(path).await.unwrap().expect("a leaf exists");
        assert_eq!(found.value, one.value, "{path}");
        assert_eq!(
            (
                found.stat.version,
                found.stat.creation_revision,
                found.stat.modification_revision
            ),
            (
                one.stat.version,
                one.stat.creation_revision,
                one.stat.modification_revision
            ),
            "{path}"
        );
    }
    assert_eq!(
        got[expected
            .iter()
            .position(|p| p.ends_with("a/leaf-1"))
            .unwrap()]
        .1
        .value,
        b"again"
    );
    assert_eq!(
        got[expected
            .iter()
            .position(|p| p.ends_with("leaf-top"))
            .unwrap()]
        .1
        .stat
        .version,
        0
    );

    // A subtree's own leaves only, and nothing where there is nothing.
    let sub = store
        .get_leaves(&format!("{tree}/a/b"), leaf)
        .await
        .unwrap();
    let sub: Vec<String> = sub.into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        sub,
        [format!("{tree}/a/b/c/leaf-3"), format!("{tree}/a/b/leaf-2")]
    );
    assert!(store
        .get_leaves(&format!("{root}/missing"), leaf)
        .await
        .unwrap()
        .is_empty());
    assert!(matches!(
        store.get_leaves("no-slash", leaf).await,
        Err(Error::InvalidPath { .. })
    ));
    cleanup(&*store, root).await;
    store.close().await.unwrap();
}
