//! When a broker rewrites its report (`reference/pulsar-formats.md` §6.1, `needBrokerDataUpdate`).

use crate::config::Settings;
use crate::core::weighted_usage4;
use crate::model::LocalBrokerData;

/// Pulsar's `percentChange(old, new)`: 0 when both are 0, +∞ when only `old` is 0, else
/// `100 × |old − new| / old`.
pub fn percent_change(old: f64, new: f64) -> f64 {
    if old == 0.0 {
        if new == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        100.0 * ((old - new) / old).abs()
    }
}

/// Why the report must be written now, or `None` to skip this check.
///
/// `written` is the report as last written (Pulsar's `lastData`), `current` the fresh one, whose `lastUpdate`
/// still holds the time of the last write. A write is due when more than `max_interval_ms` passed since it,
/// or when the largest of the changes of total msg rate, total throughput, bundle count and
/// `100 × |ΔW|` (W: the four-weight max usage with the configured weights) is strictly above
/// `loadBalancerReportUpdateThresholdPercentage`.
pub fn report_update_reason(
    written: &LocalBrokerData,
    current: &LocalBrokerData,
    now_ms: i64,
    max_interval_ms: i64,
    settings: &Settings,
) -> Option<String> {
    let since = now_ms - current.last_update;
    if since > max_interval_ms {
        return Some(format!(
            "{since} ms since the last write > {max_interval_ms} ms"
        ));
    }
    let changes = [
        (
            "msg rate",
            percent_change(written.total_msg_rate(), current.total_msg_rate()),
        ),
        (
            "throughput",
            percent_change(
                written.total_msg_throughput(),
                current.total_msg_throughput(),
            ),
        ),
        (
            "bundle count",
            percent_change(written.num_bundles as f64, current.num_bundles as f64),
        ),
        (
            "weighted usage",
            100.0 * (weighted_usage4(written, settings) - weighted_usage4(current, settings)).abs(),
        ),
    ];
    let (what, change) = changes
        .into_iter()
        .fold(("none", f64::NEG_INFINITY), |best, c| {
            if c.1 > best.1 {
                c
            } else {
                best
            }
        });
    let threshold = settings.load_balancer_report_update_threshold_percentage as f64;
    (change > threshold).then(|| {
        format!(
            "{what} changed {} % > loadBalancerReportUpdateThresholdPercentage {threshold} %",
            if change.is_infinite() {
                "∞".to_owned()
            } else {
                format!("{change:.1}")
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NamespaceBundleStats, ResourceUsage, SystemResourceUsage};
    use std::collections::BTreeMap;

    fn report(rate: f64, bundles: usize, cpu: f64) -> LocalBrokerData {
        let mut r = LocalBrokerData::default();
        let stats: BTreeMap<String, NamespaceBundleStats> = (0..bundles)
            .map(|i| {
                (
                    format!("t/n/0x{i:08x}_0x{:08x}", i + 1),
                    NamespaceBundleStats {
                        msg_rate_in: rate / bundles.max(1) as f64,
                        ..Default::default()
                    },
                )
            })
            .collect();
        r.update(
            &SystemResourceUsage {
                cpu: ResourceUsage::new(cpu, 100.0),
                ..Default::default()
            },
            stats,
        );
        r
    }

    #[test]
    fn percent_change_rules() {
        assert_eq!(percent_change(0.0, 0.0), 0.0);
        assert_eq!(percent_change(0.0, 1.0), f64::INFINITY);
        assert_eq!(percent_change(200.0, 150.0), 25.0);
    }

    #[test]
    fn threshold_and_max_interval() {
        let s = Settings::default();
        let written = report(1000.0, 4, 10.0);
        let mut cur = report(1090.0, 4, 10.0);
        cur.last_update = 0;
        // 9 % < 10 %: no write.
        assert_eq!(
            report_update_reason(&written, &cur, 1000, 900_000, &s),
            None
        );
        // Exactly 10 % is not strictly above.
        let cur10 = LocalBrokerData {
            last_update: 0,
            ..report(1100.0, 4, 10.0)
        };
        assert_eq!(
            report_update_reason(&written, &cur10, 1000, 900_000, &s),
            None
        );
        let cur = LocalBrokerData {
            last_update: 0,
            ..report(1200.0, 4, 10.0)
        };
        let why = report_update_reason(&written, &cur, 1000, 900_000, &s).unwrap();
        assert!(why.contains("msg rate changed 20.0 %"), "{why}");
        // A new bundle on an empty broker is an infinite change.
        let empty = report(0.0, 0, 10.0);
        let one = LocalBrokerData {
            last_update: 0,
            ..report(0.0, 1, 10.0)
        };
        let why = report_update_reason(&empty, &one, 1000, 900_000, &s).unwrap();
        assert!(why.contains("bundle count changed ∞"), "{why}");
        // CPU 10 % → 25 % of the limit: 15 points of weighted usage.
        let hot = LocalBrokerData {
            last_update: 0,
            ..report(1000.0, 4, 25.0)
        };
        let why = report_update_reason(&written, &hot, 1000, 900_000, &s).unwrap();
        assert!(why.contains("weighted usage changed 15.0 %"), "{why}");
        // Nothing changed, but the max interval passed.
        let same = LocalBrokerData {
            last_update: 0,
            ..written.clone()
        };
        assert!(report_update_reason(&written, &same, 900_001, 900_000, &s)
            .unwrap()
            .contains("since the last write"));
    }
}
