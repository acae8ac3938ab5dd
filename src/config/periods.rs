//! The periods the runtime and the simulator run at: the minute-based settings, or their millisecond overrides
//! (`loadmgr*Millis` keys, for tests and demos) when those are above 0.

use std::time::Duration;

use super::Settings;

fn pick(ms_override: i64, minutes: i64) -> Duration {
    if ms_override > 0 {
        Duration::from_millis(ms_override as u64)
    } else {
        Duration::from_secs(minutes.max(1) as u64 * 60)
    }
}

impl Settings {
    /// Shedding (and split check) period: `loadBalancerSheddingIntervalMinutes`, or
    /// `loadmgrSheddingIntervalMillis` when above 0.
    pub fn shedding_interval(&self) -> Duration {
        pick(
            self.loadmgr_shedding_interval_millis,
            self.load_balancer_shedding_interval_minutes as i64,
        )
    }

    /// Flush period of bundle data and time averages: `loadBalancerResourceQuotaUpdateIntervalMinutes`, or
    /// `loadmgrResourceQuotaUpdateIntervalMillis` when above 0.
    pub fn flush_interval(&self) -> Duration {
        pick(
            self.loadmgr_resource_quota_update_interval_millis,
            self.load_balancer_resource_quota_update_interval_minutes as i64,
        )
    }

    /// Host CPU/NIC sampling period: `loadBalancerHostUsageCheckIntervalMinutes`, or
    /// `loadmgrHostUsageCheckIntervalMillis` when above 0.
    pub fn host_usage_interval(&self) -> Duration {
        pick(
            self.loadmgr_host_usage_check_interval_millis,
            self.load_balancer_host_usage_check_interval_minutes as i64,
        )
    }

    /// A report is written at least this often: `loadBalancerReportUpdateMaxIntervalMinutes`, or
    /// `loadmgrReportUpdateMaxIntervalMillis` when above 0.
    pub fn report_max_interval(&self) -> Duration {
        pick(
            self.loadmgr_report_update_max_interval_millis,
            self.load_balancer_report_update_max_interval_minutes as i64,
        )
    }

    /// Report check period (`loadBalancerReportUpdateMinIntervalMillis`, 5 s).
    pub fn report_check_interval(&self) -> Duration {
        Duration::from_millis(self.load_balancer_report_update_min_interval_millis.max(1) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_unless_overridden() {
        let mut s = Settings::default();
        assert_eq!(s.shedding_interval(), Duration::from_secs(60));
        assert_eq!(s.flush_interval(), Duration::from_secs(15 * 60));
        assert_eq!(s.report_max_interval(), Duration::from_secs(15 * 60));
        assert_eq!(s.report_check_interval(), Duration::from_millis(5000));
        s.loadmgr_shedding_interval_millis = 250;
        s.loadmgr_resource_quota_update_interval_millis = 500;
        s.loadmgr_host_usage_check_interval_millis = 100;
        s.loadmgr_report_update_max_interval_millis = 2000;
        assert_eq!(s.shedding_interval(), Duration::from_millis(250));
        assert_eq!(s.flush_interval(), Duration::from_millis(500));
        assert_eq!(s.host_usage_interval(), Duration::from_millis(100));
        assert_eq!(s.report_max_interval(), Duration::from_millis(2000));
    }
}
