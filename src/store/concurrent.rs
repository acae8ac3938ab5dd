//! Issuing many requests with a bounded number in flight, the way the store benchmarks drive both the
//! [`super::MetadataStore`] trait and the raw client crates (so both sides are driven identically).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

/// Runs the `count` requests `request(0..count)`, at most `in_flight` at a time (at least one), and returns
/// how long they took in all; stops at the first error, of a request or of making one.
pub async fn run_in_flight<F, Fut, T, E>(
    count: usize,
    in_flight: usize,
    mut request: F,
) -> Result<Duration, E>
where
    F: FnMut(usize) -> Result<Fut, E>,
    Fut: Future<Output = Result<T, E>>,
{
    let start = Instant::now();
    let mut pending = FuturesUnordered::new();
    let mut issued = 0;
    while issued < count || !pending.is_empty() {
        while issued < count && pending.len() < in_flight.max(1) {
            pending.push(request(issued)?);
            issued += 1;
        }
        if let Some(r) = pending.next().await {
            r?;
        }
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn bounds_the_requests_in_flight_and_stops_at_an_error() {
        let now = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let took = run_in_flight(10, 3, |_| {
            let (now, most) = (&now, &most);
            Ok::<_, String>(async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, String>(())
            })
        })
        .await
        .unwrap();
        assert_eq!(most.load(Ordering::SeqCst), 3);
        // 10 requests of 10 ms, 3 at a time: 4 rounds.
        assert_eq!(took, Duration::from_millis(40));
        let e = run_in_flight(10, 2, |i| {
            Ok::<_, String>(async move {
                if i == 4 {
                    Err(format!("request {i} failed"))
                } else {
                    Ok(())
                }
            })
        })
        .await
        .unwrap_err();
        assert_eq!(e, "request 4 failed");
        let e = run_in_flight(3, 1, |i| {
            if i == 1 {
                Err("cannot make request 1".to_string())
            } else {
                Ok(async { Ok::<_, String>(()) })
            }
        })
        .await
        .unwrap_err();
        assert_eq!(e, "cannot make request 1");
    }
}
