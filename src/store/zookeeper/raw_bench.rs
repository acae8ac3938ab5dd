//! The raw client, driven the way the store drives it, for `loadmgr bench store` (trait vs raw).
//!
//! # Contract
//!
//! Measurement only: [`RawZk`] issues unconditional `setData` calls or multis of them straight through
//! `zookeeper-client`, without the store's mapping, retries or bookkeeping, so the benchmark can show what
//! the [`super::ZkStore`] layer costs. Errors become [`crate::store::Error::Backend`].

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::store::concurrent::run_in_flight;
use crate::store::{Error, Result};

fn err(e: impl std::fmt::Display) -> Error {
    Error::Backend {
        backend: "zookeeper",
        message: e.to_string(),
    }
}

/// A raw client on `servers` (no chroot handling: pass paths with it).
pub struct RawZk {
    client: Arc<zk::Client>,
}

impl RawZk {
    /// Connects.
    pub async fn connect(servers: &str) -> Result<RawZk> {
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(servers)
            .await
            .map_err(err)?;
        Ok(RawZk {
            client: Arc::new(client),
        })
    }

    /// `count` unconditional `setData` calls on `keys` (round robin), `in_flight` at a time; returns the
    /// elapsed time.
    pub async fn single_puts(
        &self,
        keys: &[String],
        value: &[u8],
        count: usize,
        in_flight: usize,
    ) -> Result<Duration> {
        run_in_flight(count, in_flight, |i| {
            let put = self.client.set_data(&keys[i % keys.len()], value, None);
            Ok(async move { put.await.map_err(err) })
        })
        .await
    }

    /// `batches` multis of `batch` unconditional `setData` each, `in_flight` multis at a time.
    pub async fn batched_puts(
        &self,
        keys: &[String],
        value: &[u8],
        batches: usize,
        batch: usize,
        in_flight: usize,
    ) -> Result<Duration> {
        run_in_flight(batches, in_flight, |issued| {
            let mut writer = self.client.new_multi_writer();
            for i in 0..batch {
                writer
                    .add_set_data(&keys[(issued * batch + i) % keys.len()], value, None)
                    .map_err(err)?;
            }
            let commit = writer.commit();
            Ok(async move { commit.await.map_err(err) })
        })
        .await
    }
}
