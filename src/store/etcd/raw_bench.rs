//! The raw client, driven the way the store drives it, for `loadmgr bench store` (trait vs raw).
//!
//! # Contract
//!
//! Measurement only: [`RawEtcd`] issues puts or txns of puts straight through `etcd-client` on the first
//! endpoint, without the store's failover, planning or bookkeeping, so the benchmark can show what the
//! [`super::EtcdStore`] layer costs. Errors become [`crate::store::Error::Backend`].

use std::time::Duration;

use etcd_client as etcd;

use crate::store::concurrent::run_in_flight;
use crate::store::{Error, Result};

fn err(e: impl std::fmt::Display) -> Error {
    Error::Backend {
        backend: "etcd",
        message: e.to_string(),
    }
}

/// A raw client on one endpoint.
pub struct RawEtcd {
    client: etcd::Client,
}

impl RawEtcd {
    /// Connects to the first endpoint.
    pub async fn connect(endpoints: &[String]) -> Result<RawEtcd> {
        let client = etcd::Client::connect(&endpoints[..1], None)
            .await
            .map_err(err)?;
        Ok(RawEtcd { client })
    }

    /// `count` puts on `keys` (round robin), `in_flight` at a time; `prev_kv` asks for the previous
    /// key-value (what the store needs to report the new version, and what etcd reads anyway to keep a
    /// lease).
    pub async fn single_puts(
        &self,
        keys: &[String],
        value: &[u8],
        count: usize,
        in_flight: usize,
        prev_kv: bool,
    ) -> Result<Duration> {
        run_in_flight(count, in_flight, |i| {
            let mut c = self.client.clone();
            let key = keys[i % keys.len()].clone();
            let value = value.to_vec();
            let options = prev_kv.then(|| etcd::PutOptions::new().with_prev_key());
            Ok(async move { c.put(key, value, options).await.map_err(err) })
        })
        .await
    }

    /// `batches` txns of `batch` puts each, `in_flight` txns at a time (`prev_kv` as for single puts).
    pub async fn batched_puts(
        &self,
        keys: &[String],
        value: &[u8],
        batches: usize,
        batch: usize,
        in_flight: usize,
        prev_kv: bool,
    ) -> Result<Duration> {
        run_in_flight(batches, in_flight, |issued| {
            let ops: Vec<etcd::TxnOp> = (0..batch)
                .map(|i| {
                    etcd::TxnOp::put(
                        keys[(issued * batch + i) % keys.len()].clone(),
                        value.to_vec(),
                        prev_kv.then(|| etcd::PutOptions::new().with_prev_key()),
                    )
                })
                .collect();
            let mut c = self.client.clone();
            Ok(async move { c.txn(etcd::Txn::new().and_then(ops)).await.map_err(err) })
        })
        .await
    }
}
