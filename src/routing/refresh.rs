//! Periodic refresh with jitter.

use std::future::Future;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::entropy_seed;
use super::{LoadAwareRouter, LoadMapping};

/// Mixed into a configured seed so the jitter sequence differs from the ring-shuffle sequence.
const JITTER_SALT: u64 = 0x6a09_e667_f3bc_c908;

/// When refreshes happen: every `period` plus a uniform random delay in `[0, jitter)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefreshSchedule {
    /// Base period.
    pub period: Duration,
    /// Upper bound (exclusive) of the extra random delay; zero for none.
    pub jitter: Duration,
}

impl RefreshSchedule {
    /// The delay before the next refresh: `period + U[0, jitter)`, with nanosecond resolution.
    pub fn next_delay<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let jitter_ns = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        if jitter_ns == 0 {
            self.period
        } else {
            self.period
                .saturating_add(Duration::from_nanos(rng.random_range(0..jitter_ns)))
        }
    }
}

/// Refreshes `router` from `loads` until `shutdown` completes: once immediately, then after every
/// [`RefreshSchedule::next_delay`] of the router's configured schedule (Tokio timers, so paused Tokio time
/// drives it in tests). A router with `disable_load_aware` is never refreshed; the loop only waits.
/// Returns the number of refreshes done.
///
/// Spawn it with the router and mapping behind `Arc`s, e.g.
/// `tokio::spawn(async move { run_refresh_loop(&router, &loads, stop).await })`.
pub async fn run_refresh_loop<F>(router: &LoadAwareRouter, loads: &LoadMapping, shutdown: F) -> u64
where
    F: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    if router.config().disable_load_aware {
        shutdown.await;
        return 0;
    }
    let schedule = router.config().schedule();
    let seed = router
        .config()
        .seed
        .map_or_else(entropy_seed, |s| s ^ JITTER_SALT);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut done = 0;
    loop {
        router.refresh(loads);
        done += 1;
        let delay = schedule.next_delay(&mut rng);
        tokio::select! {
            biased;
            () = &mut shutdown => return done,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{Location, RouterConfig, Topology};
    use std::sync::Arc;

    #[test]
    fn delays_are_period_plus_bounded_jitter() {
        let schedule = RouterConfig::default().schedule();
        assert_eq!(schedule.period, Duration::from_secs(1));
        assert_eq!(schedule.jitter, Duration::from_millis(500));
        let mut rng = StdRng::seed_from_u64(1);
        let delays: Vec<Duration> = (0..1000).map(|_| schedule.next_delay(&mut rng)).collect();
        assert!(delays
            .iter()
            .all(|d| *d >= Duration::from_secs(1) && *d < Duration::from_millis(1500)));
        assert!(delays.iter().any(|d| *d > Duration::from_millis(1400)));
        assert!(delays.iter().any(|d| *d < Duration::from_millis(1100)));
        let none = RefreshSchedule {
            period: Duration::from_millis(250),
            jitter: Duration::ZERO,
        };
        assert_eq!(none.next_delay(&mut rng), Duration::from_millis(250));
    }

    fn router(disabled: bool) -> Arc<LoadAwareRouter> {
        let here = Location::new("h", "w", "r");
        let topology = Topology::new(here.clone(), Vec::new())
            .with_target(1, here.clone())
            .with_target(2, here);
        let config = RouterConfig {
            seed: Some(3),
            disable_load_aware: disabled,
            ..RouterConfig::default()
        };
        Arc::new(LoadAwareRouter::new(&topology, config).unwrap())
    }

    async fn run_for(router: Arc<LoadAwareRouter>, virtual_time: Duration) -> u64 {
        let loads = Arc::new(LoadMapping::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = {
            let router = Arc::clone(&router);
            tokio::spawn(async move {
                run_refresh_loop(&router, &loads, async {
                    let _ = stopped.await;
                })
                .await
            })
        };
        tokio::time::sleep(virtual_time).await;
        stop.send(()).unwrap();
        let done = task.await.unwrap();
        assert_eq!(done, router.refresh_count());
        done
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_refreshes_at_once_then_every_one_to_one_and_a_half_seconds() {
        // Refreshes at 0 and then every [1, 1.5) s: within 10 s that is 1 + 7..=10 refreshes.
        let done = run_for(router(false), Duration::from_secs(10)).await;
        assert!((8..=11).contains(&done), "{done} refreshes");
        let first_only = run_for(router(false), Duration::from_millis(999)).await;
        assert_eq!(
            first_only, 1,
            "the first refresh is immediate, the second not before 1 s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_disabled_router_is_never_refreshed() {
        assert_eq!(run_for(router(true), Duration::from_secs(10)).await, 0);
    }
}
