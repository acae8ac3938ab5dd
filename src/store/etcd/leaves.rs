//! `get_leaves` on etcd: the leaves of a subtree read as one range of key-values, in pages, in key order.
//!
//! # Contract
//!
//! * A key is a leaf of `path` when it lies below `path/`, its last segment passes `is_leaf`, no segment
//!   between `path` and it does, and no segment is empty: what the default listing (children of every
//!   non-leaf, from `path` down) would find, since a parent is a key only if it was written itself.
//! * One range (`path/` to `path0`) read in pages: [`PAGE_MIN`] keys at first, then as many as fit about
//!   [`PAGE_BYTES`] at the size of the largest key-value seen so far (at most [`PAGE_MAX`]); answers may
//!   reach [`ANSWER_LIMIT`] (the client's default is 4 MiB). A page that fails with a backend error (an
//!   answer too large) after asking for more than [`PAGE_MIN`] keys is asked again for [`PAGE_MIN`] before
//!   the call fails.
//! * Why one range in large pages, not a listing and reads of what it lists: etcd 3.4 walks its index over
//!   everything from a request's start to the range's end, whatever the limit (3.5 stops at the limit), and
//!   it reads a key's value even for a keys-only answer. Listing a tree first would read every value twice;
//!   pages of 4 MiB keep the walks to a few per tree (15 for 100,000 records of 600 bytes).
//! * Each page reads what the server has then (linearizable), so the answer is not one snapshot, as with
//!   `get_many`: callers that must follow later changes watch `path` first.

use etcd_client as etcd;
use etcd_client::GetOptions;

use super::kv::subtree;
use super::Inner;
use crate::store::{validate_path, Error, GetResult, IsLeaf, Result};

/// Keys asked for by the first page, and by a page asked again after a failure.
const PAGE_MIN: i64 = 32;
/// The most keys asked for by one page.
const PAGE_MAX: i64 = 10_000;
/// The size a page aims at, bytes of keys and values.
const PAGE_BYTES: usize = 4 << 20;
/// The largest answer accepted, bytes: [`PAGE_MIN`] values at etcd's default request limit of 1.5 MiB fit.
const ANSWER_LIMIT: usize = 64 << 20;

/// Whether `rest` (a key without the `path/` prefix) names a leaf (see the module docs).
pub(super) fn is_leaf_key(rest: &str, is_leaf: IsLeaf) -> bool {
    let mut segments = rest.split('/').peekable();
    while let Some(s) = segments.next() {
        if s.is_empty() {
            return false;
        }
        let leaf = is_leaf(s);
        if segments.peek().is_none() {
            return leaf;
        }
        if leaf {
            return false;
        }
    }
    false
}

/// Keys to ask for next, given the largest key-value seen so far (bytes; 0: none yet).
fn page_limit(largest: usize) -> i64 {
    if largest == 0 {
        return PAGE_MIN;
    }
    let fit = PAGE_BYTES / largest;
    (fit as i64).clamp(PAGE_MIN, PAGE_MAX)
}

impl Inner {
    pub(super) async fn get_leaves(
        &self,
        path: &str,
        is_leaf: IsLeaf,
    ) -> Result<Vec<(String, GetResult)>> {
        validate_path(path)?;
        let (prefix, end) = subtree(path);
        let mut start = prefix.clone().into_bytes();
        let mut largest = 0usize;
        let mut out = Vec::new();
        loop {
            let limit = page_limit(largest);
            let resp = match self.leaf_page(path, &start, &end, limit).await {
                // An answer over the limit is refused by the client as a backend error.
                Err(e @ Error::Backend { .. }) if limit > PAGE_MIN => {
                    tracing::debug!(store = %self.address(), "a page of {limit} keys below {path} failed ({e}): asking for {PAGE_MIN}");
                    self.leaf_page(path, &start, &end, PAGE_MIN).await?
                }
                r => r?,
            };
            self.seen(resp.header());
            for kv in resp.kvs() {
                largest = largest.max(kv.key().len() + kv.value().len());
                let Ok(key) = std::str::from_utf8(kv.key()) else {
                    continue;
                };
                let Some(rest) = key.strip_prefix(prefix.as_str()) else {
                    continue;
                };
                if is_leaf_key(rest, is_leaf) {
                    out.push((
                        key.to_owned(),
                        GetResult {
                            value: kv.value().to_vec(),
                            stat: self.stat(key, kv),
                        },
                    ));
                }
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    start = last.key().to_vec();
                    start.push(0);
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// One page of key-values from `start` (inclusive) to `end` (exclusive), in key order.
    async fn leaf_page(
        &self,
        path: &str,
        start: &[u8],
        end: &str,
        limit: i64,
    ) -> Result<etcd::GetResponse> {
        self.call("leaves", path, true, |c| {
            let (start, end) = (start.to_vec(), end.to_owned());
            async move {
                c.kv_client()
                    .max_decoding_message_size(ANSWER_LIMIT)
                    .get(
                        start,
                        Some(GetOptions::new().with_range(end).with_limit(limit)),
                    )
                    .await
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(name: &str) -> bool {
        name.starts_with("0x")
    }

    #[test]
    fn a_leaf_is_the_first_accepted_segment_and_the_last() {
        assert!(is_leaf_key("t/ns/0x00_0x10", range));
        assert!(is_leaf_key("t/c/ns/0x00_0x10", range));
        assert!(is_leaf_key("0x00_0x10", range));
        // Below a leaf, above one, or with an empty segment: no leaf.
        assert!(!is_leaf_key("t/ns/0x00_0x10/child", range));
        assert!(!is_leaf_key("t/0x00_0x10/0x10_0x20", range));
        assert!(!is_leaf_key("t/ns", range));
        assert!(!is_leaf_key("t//0x00_0x10", range));
        assert!(!is_leaf_key("", range));
    }

    #[test]
    fn pages_aim_at_a_size_within_bounds() {
        assert_eq!(page_limit(0), PAGE_MIN);
        assert_eq!(page_limit(300), PAGE_MAX);
        assert_eq!(page_limit(4_096), 1_024);
        assert_eq!(page_limit(1 << 20), PAGE_MIN);
        // The first page (nothing seen) must also be small enough for the largest values.
        assert!(PAGE_MIN as usize * (3 << 19) <= ANSWER_LIMIT);
    }
}
