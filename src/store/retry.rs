//! Retrying an operation while the store's failures are transient: what a starting broker does while its
//! store restarts, elects a leader or is too busy to answer.

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use super::{Error, Result};

/// Runs `op` until it succeeds, fails with an error that is not transient ([`Error::is_transient`]), or
/// `patience` of backoff has passed (then its last error). The backoff is exponential from 200 ms to 3 s;
/// each retry is logged as "cannot `what` yet".
pub async fn retry_transient<T, F, Fut>(what: &str, patience: Duration, op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(3))
        .with_total_delay(Some(patience))
        .without_max_times();
    op.retry(backoff)
        .when(|e: &Error| e.is_transient())
        .notify(|e, after| tracing::warn!("cannot {what} yet ({e}); trying again in {after:?}"))
        .await
}
