//! Reading the leaves of a subtree with the required surface of the trait: the default
//! [`super::MetadataStore::get_leaves`], which ZooKeeper and the memory store use as it is.
//!
//! # Contract
//!
//! Lists the directories level by level ([`LIST_IN_FLIGHT`] at a time), never listing a leaf, then reads the
//! leaves with [`super::MetadataStore::get_many`] calls of [`READS_PER_CALL`] paths, [`CALLS_IN_FLIGHT`] at
//! a time. A leaf deleted between its listing and its read is left out. Any failed read fails the call:
//! a caller that loads its state from the answer must not take a node it could not read for a missing one.

use futures::stream::{self, StreamExt, TryStreamExt};

use super::path::join;
use super::{GetResult, IsLeaf, MetadataStore, Result};

/// Directories listed at once (a cluster has one per namespace under each bundle root).
const LIST_IN_FLIGHT: usize = 64;
/// Paths per `get_many` call: one ZooKeeper multi-read of 100 records or ownership nodes is about 60 KiB,
/// well under the server's 1 MiB answer limit.
const READS_PER_CALL: usize = 100;
/// `get_many` calls in flight at once.
const CALLS_IN_FLIGHT: usize = 16;

/// The paths of the leaves below `root`, sorted, found by listing every non-leaf from `root` down,
/// [`LIST_IN_FLIGHT`] directories at a time; a leaf is never listed.
pub(crate) async fn list_leaves<S: MetadataStore + ?Sized>(
    store: &S,
    root: &str,
    is_leaf: IsLeaf,
) -> Result<Vec<String>> {
    let mut leaves = Vec::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let listed: Vec<(String, Vec<String>)> = stream::iter(level)
            .map(|dir| async move {
                let children = store.get_children(&dir).await?;
                Ok::<_, super::Error>((dir, children))
            })
            .buffer_unordered(LIST_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut next = Vec::new();
        for (dir, children) in listed {
            for child in children {
                let path = join(&dir, &child);
                if is_leaf(&child) {
                    leaves.push(path);
                } else {
                    next.push(path);
                }
            }
        }
        level = next;
    }
    leaves.sort();
    Ok(leaves)
}

/// See the module docs.
pub(super) async fn list_then_read<S: MetadataStore + ?Sized>(
    store: &S,
    root: &str,
    is_leaf: IsLeaf,
) -> Result<Vec<(String, GetResult)>> {
    let leaves = list_leaves(store, root, is_leaf).await?;
    // The calls built up front: a stream mapping borrowed chunks to futures is not provably `Send`.
    let calls: Vec<_> = leaves
        .chunks(READS_PER_CALL)
        .map(|chunk| store.get_many(chunk))
        .collect();
    let reads: Vec<Vec<Option<GetResult>>> = stream::iter(calls)
        .buffered(CALLS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(leaves
        .into_iter()
        .zip(reads.into_iter().flatten())
        .filter_map(|(path, read)| read.map(|r| (path, r)))
        .collect())
}
