//! Wall-clock time for reports and records, driven by tokio's clock so that tests (and the simulator) can run
//! agents under `tokio::time::pause()`.

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Epoch milliseconds = the system time when the clock was made + tokio time elapsed since.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_ms: i64,
    started: Instant,
}

impl Clock {
    /// A clock reading the system time now.
    pub fn new() -> Self {
        let base_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Self::starting_at(base_ms)
    }

    /// A clock that reads `base_ms` now (deterministic tests, simulations).
    pub fn starting_at(base_ms: i64) -> Self {
        Self {
            base_ms,
            started: Instant::now(),
        }
    }

    /// Now, epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.base_ms + self.started.elapsed().as_millis() as i64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn follows_tokio_time() {
        let c = Clock::starting_at(1_000);
        assert_eq!(c.now_ms(), 1_000);
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(c.now_ms(), 91_000);
    }
}
