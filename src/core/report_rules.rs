//! When a broker rewrites its report (`needBrokerDataUpdate` in Pulsar's `ModularLoadManagerImpl.java`), the
//! two extra writes of extensible reporting, and loadmgr's settled report for BandShedder.
//!
//! The rules are pure functions shared by the live reporter ([`crate::runtime::BrokerAgent`]) and the
//! simulator's ([`crate::sim::engine`]), so both write the same reports at the same checks given the same host
//! usage (the simulator's host averages point samples taken at the checks; a Linux host measures from one
//! sample to the next, so its window begins a check earlier):
//!
//! * [`update_trigger`] — Pulsar's rule over the [`ReportFigures`] of the last written and the current report;
//! * [`forced_report_reason`] — with [`extensible_reporting`] (the extensible load manager or TransferShedder is
//!   configured), a broker also writes (1) at its next check after its bundle set changed and (2) at its first
//!   check at least `loadBalanceSheddingDelayInSeconds` after it last lost a bundle, when nothing was written
//!   since. TransferShedder's cool-down needs both (see [`crate::core::shedding`]'s TransferShedder docs);
//! * [`SettledReports`] — with [`settled_reporting`] (BandShedder is configured), a broker writes (1) at its next
//!   check after its bundle set changed and (2) once more when its host usage was measured over a window that
//!   began after a write that showed a changed bundle set or a traffic change;
//! * [`report_check_phase_ms`] — when a broker's checks fall: the first report is written at start, the first
//!   check comes a seeded phase later (from the seed and the broker id), then one every
//!   `loadBalancerReportUpdateMinIntervalMillis`.

use std::fmt;

use crate::config::{LoadManagerKind, Settings, ShedderKind};
use crate::core::random::{unit, Stream};
use crate::core::weighted_usage4;
use crate::model::{LocalBrokerData, SystemResourceUsage};

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

/// What the update rule compares of a report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportFigures {
    /// Total msg rate in + out, msg/s.
    pub msg_rate: f64,
    /// Total throughput in + out, B/s.
    pub throughput: f64,
    /// Bundles listed.
    pub bundles: i32,
    /// `W`: the four-weight max resource usage with the configured weights, a fraction
    /// ([`weighted_usage4`]).
    pub weighted_usage: f64,
}

impl ReportFigures {
    /// The figures of a report.
    pub fn of(report: &LocalBrokerData, settings: &Settings) -> Self {
        Self {
            msg_rate: report.total_msg_rate(),
            throughput: report.total_msg_throughput(),
            bundles: report.num_bundles,
            weighted_usage: weighted_usage4(report, settings),
        }
    }
}

/// `W` of a host usage: what [`weighted_usage4`] gives for a report carrying this usage (same arithmetic, to the
/// last bit).
pub fn weighted_usage(usage: &SystemResourceUsage, settings: &Settings) -> f64 {
    usage.max_resource_usage_with_weight(&crate::core::weights4(settings))
}

/// Why a report is due under Pulsar's rule ([`update_trigger`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UpdateTrigger {
    /// More than the maximum interval passed since the last write.
    MaxInterval {
        /// ms since the last write.
        since_ms: i64,
        /// The maximum interval, ms.
        max_interval_ms: i64,
    },
    /// A figure changed by more than the threshold.
    Change {
        /// `msg rate`, `throughput`, `bundle count` or `weighted usage`.
        what: &'static str,
        /// The change, percent (points of `100 × W` for the weighted usage; +∞ from 0).
        change: f64,
        /// `loadBalancerReportUpdateThresholdPercentage`.
        threshold: f64,
    },
}

impl fmt::Display for UpdateTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateTrigger::MaxInterval {
                since_ms,
                max_interval_ms,
            } => write!(
                f,
                "{since_ms} ms since the last write > {max_interval_ms} ms"
            ),
            UpdateTrigger::Change {
                what,
                change,
                threshold,
            } => {
                write!(f, "{what} changed ")?;
                if change.is_infinite() {
                    write!(f, "∞")?;
                } else {
                    write!(f, "{change:.1}")?;
                }
                write!(
                    f,
                    " % > loadBalancerReportUpdateThresholdPercentage {threshold} %"
                )
            }
        }
    }
}

/// Pulsar's `needBrokerDataUpdate`: a write is due when more than `max_interval_ms` passed since the last one
/// (`since_ms`), or when the largest of the changes of total msg rate, total throughput, bundle count and
/// `100 × |ΔW|` between the last written figures and the current ones is strictly above `threshold_percentage`
/// (`loadBalancerReportUpdateThresholdPercentage`). `None`: skip this check.
pub fn update_trigger(
    written: &ReportFigures,
    current: &ReportFigures,
    since_ms: i64,
    max_interval_ms: i64,
    threshold_percentage: f64,
) -> Option<UpdateTrigger> {
    if since_ms > max_interval_ms {
        return Some(UpdateTrigger::MaxInterval {
            since_ms,
            max_interval_ms,
        });
    }
    let changes = [
        (
            "msg rate",
            percent_change(written.msg_rate, current.msg_rate),
        ),
        (
            "throughput",
            percent_change(written.throughput, current.throughput),
        ),
        (
            "bundle count",
            percent_change(written.bundles as f64, current.bundles as f64),
        ),
        (
            "weighted usage",
            100.0 * (written.weighted_usage - current.weighted_usage).abs(),
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
    (change > threshold_percentage).then_some(UpdateTrigger::Change {
        what,
        change,
        threshold: threshold_percentage,
    })
}

/// Why the report must be written now, or `None` to skip this check ([`update_trigger`] on two reports).
///
/// `written` is the report as last written (Pulsar's `lastData`), `current` the fresh one, whose `lastUpdate`
/// still holds the time of the last write.
pub fn report_update_reason(
    written: &LocalBrokerData,
    current: &LocalBrokerData,
    now_ms: i64,
    max_interval_ms: i64,
    settings: &Settings,
) -> Option<String> {
    update_trigger(
        &ReportFigures::of(written, settings),
        &ReportFigures::of(current, settings),
        now_ms - current.last_update,
        max_interval_ms,
        settings.load_balancer_report_update_threshold_percentage as f64,
    )
    .map(|t| t.to_string())
}

/// Whether brokers report as the extensible load manager's do ([`forced_report_reason`]): the extensible load
/// manager or TransferShedder is configured. The modular manager forces nothing (its
/// `setLoadReportForceUpdateFlag` is a no-op).
pub fn extensible_reporting(settings: &Settings) -> bool {
    settings.load_manager_class_name == LoadManagerKind::Extensible
        || settings.load_balancer_load_shedding_strategy == ShedderKind::TransferShedder
}

/// With [`extensible_reporting`], why a report that [`update_trigger`] would skip is written anyway:
///
/// 1. `bundles_changed` — the broker's bundle set changed since its last write (a bundle unloaded or split
///    away, or one it now owns): Pulsar's extensible `BrokerLoadDataReporter` tombstones its load data on
///    `Releasing`/`Splitting` as the source and on `Owned` as the destination, and publishes fresh data at the
///    next tick;
/// 2. the broker last lost a bundle at `last_loss_ms`, `now_ms` is at least `shedding_delay_ms`
///    (`loadBalanceSheddingDelayInSeconds`) later, and nothing was written since that moment
///    (`last_write_ms` is earlier): TransferShedder's cool-down ends only with load data produced that long
///    after the unload, which a broker whose load moved by less than the threshold would not write for up to
///    `loadBalancerReportUpdateMaxIntervalMinutes`.
///
/// Times are epoch ms (or any common origin).
pub fn forced_report_reason(
    bundles_changed: bool,
    last_loss_ms: Option<i64>,
    last_write_ms: i64,
    now_ms: i64,
    shedding_delay_ms: i64,
) -> Option<&'static str> {
    if bundles_changed {
        return Some("its bundles changed");
    }
    let follow_up = last_loss_ms?.saturating_add(shedding_delay_ms);
    (now_ms >= follow_up && last_write_ms < follow_up)
        .then_some("loadBalanceSheddingDelayInSeconds after it last lost a bundle")
}

/// Whether brokers write loadmgr's *settled* reports ([`SettledReports`]): BandShedder is configured. It
/// learns each broker's cost from reports whose host usage no longer lags their traffic, and Pulsar's rule may
/// not write such a report for up to `loadBalancerReportUpdateMaxIntervalMinutes` after a change.
pub fn settled_reporting(settings: &Settings) -> bool {
    settings.load_balancer_load_shedding_strategy == ShedderKind::BandShedder
}

/// Whether a report with the figures `current` shows a traffic change against the last written `written`: its
/// msg rate, throughput or bundle count moved by more than `threshold_percentage`
/// (`loadBalancerReportUpdateThresholdPercentage`). Usage alone is no traffic change.
pub fn traffic_changed(
    written: &ReportFigures,
    current: &ReportFigures,
    threshold_percentage: f64,
) -> bool {
    percent_change(written.msg_rate, current.msg_rate) > threshold_percentage
        || percent_change(written.throughput, current.throughput) > threshold_percentage
        || percent_change(written.bundles as f64, current.bundles as f64) > threshold_percentage
}

/// With [`settled_reporting`], one broker's follow-up write after a change of traffic or of its bundle set
/// (see [`Self::due`] for the write at the bundle set's change itself). The report written at a
/// traffic change ([`traffic_changed`]) carries host usage averaged over a window that began before it (CPU and
/// NIC are measured over `loadBalancerHostUsageCheckIntervalMinutes`), and Pulsar's rule may then skip the
/// report that shows what the new traffic costs: the usage catches up by less than the threshold. So once the
/// host usage at hand was measured over a window that began at or after that write, a report is due. A host
/// that reports current usage (its window begins at the check) settles at the change itself, and never writes
/// more than Pulsar's rule. Times are epoch ms (or any common origin).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettledReports {
    /// The write that showed a traffic change and was not settled, until a settled report is written.
    changed_at: Option<i64>,
}

impl SettledReports {
    /// Why a report that the other rules skip is due, given `host_from`: the start of the window over which the
    /// host usage now at hand was measured.
    fn reason(&self, host_from: i64) -> Option<&'static str> {
        (host_from >= self.changed_at?).then_some("host usage measured since its traffic changed")
    }

    /// Records a write at `at`, whatever rule made it, whose host usage was measured from `host_from`;
    /// `changed`: it showed a traffic change against the write before.
    pub fn written(&mut self, changed: bool, at: i64, host_from: i64) {
        if changed {
            self.changed_at = Some(at);
        }
        if self.changed_at.is_some_and(|w| host_from >= w) {
            self.changed_at = None;
        }
    }

    /// Why a report that Pulsar's rule skips is due: `bundles_changed`, the broker's bundle set changed since
    /// its last write (a bundle moved on or off it, however little traffic it carries), or its host usage was
    /// measured over a window that began at or after a write that showed a change.
    pub fn due(&self, bundles_changed: bool, host_from: i64) -> Option<&'static str> {
        if bundles_changed {
            return Some("its bundles changed");
        }
        self.reason(host_from)
    }

    /// Records a write at `at` of the figures `now`, after the write of `before` (`None`: the first), with host
    /// usage measured from `host_from`: [`Self::written`], a change being a bundle set that changed since the
    /// write before (`bundles_changed`) or a [`traffic_changed`] against
    /// `loadBalancerReportUpdateThresholdPercentage`.
    pub fn written_figures(
        &mut self,
        before: Option<&ReportFigures>,
        now: &ReportFigures,
        settings: &Settings,
        (at, host_from): (i64, i64),
        bundles_changed: bool,
    ) {
        let threshold = settings.load_balancer_report_update_threshold_percentage as f64;
        let changed = before.is_some_and(|b| bundles_changed || traffic_changed(b, now, threshold));
        self.written(changed, at, host_from);
    }

    /// Forgets a pending follow-up (the broker restarted or registered again).
    pub fn reset(&mut self) {
        self.changed_at = None;
    }
}

/// The phase of a broker's report checks, ms: its first report is written at start, its first check comes this
/// long after, then one every `period_ms` (`loadBalancerReportUpdateMinIntervalMillis`). In
/// `[1, period_ms − 1]` (1 for periods below 2 ms), a function of the seed and the broker id alone, so brokers
/// started together do not all check at the same instant, and a run is reproducible from its seed. The
/// simulator and the runtime both use it (and a leader's ticks, which fall on multiples of the period from the
/// election when the intervals are multiples of it, never coincide with a check of a broker started then).
pub fn report_check_phase_ms(seed: u64, broker_id: &str, period_ms: i64) -> i64 {
    let span = (period_ms.max(2) - 1) as f64;
    let key = crc32fast::hash(broker_id.as_bytes()) as u64;
    1 + ((unit(seed, Stream::Phase as u64, key) * span) as i64).min(period_ms.max(2) - 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NamespaceBundleStats, ResourceUsage, SystemResourceUsage};
    use std::collections::{BTreeMap, BTreeSet};

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
    fn a_traffic_change_is_msg_rate_throughput_or_bundles_beyond_the_threshold() {
        let s = Settings::default();
        let f = |rate, bundles, cpu| ReportFigures::of(&report(rate, bundles, cpu), &s);
        let base = f(1000.0, 10, 40.0);
        assert!(!traffic_changed(&base, &f(1090.0, 10, 40.0), 10.0));
        assert!(traffic_changed(&base, &f(1110.0, 10, 40.0), 10.0));
        assert!(traffic_changed(&base, &f(1000.0, 12, 40.0), 10.0));
        // Usage alone is no traffic change, however far it moved.
        assert!(!traffic_changed(&base, &f(1000.0, 10, 90.0), 10.0));
    }

    #[test]
    fn a_settled_report_follows_a_traffic_change_once_usage_was_measured_since() {
        let mut r = SettledReports::default();
        assert_eq!(r.reason(1_000_000), None, "nothing changed yet");
        // A write at 60 s showed a traffic change; its usage was averaged over a window from 10 s.
        r.written(true, 60_000, 10_000);
        assert_eq!(r.reason(10_000), None, "still the window from before");
        assert_eq!(
            r.reason(59_999),
            None,
            "a window that began before the change"
        );
        assert!(r.reason(60_000).is_some());
        // A write by another rule with usage still from before: the follow-up stays due.
        r.written(false, 65_000, 10_000);
        assert!(r.reason(70_000).is_some());
        // Written with usage measured since the change: done, whatever rule wrote it.
        r.written(false, 125_000, 70_000);
        assert_eq!(r.reason(130_000), None);
        // A host that reports current usage settles at the change itself: no extra write.
        r.written(true, 200_000, 200_000);
        assert_eq!(r.reason(205_000), None);
        // A restart forgets a pending follow-up.
        r.written(true, 300_000, 250_000);
        r.reset();
        assert_eq!(r.reason(400_000), None);
    }

    #[test]
    fn only_band_shedder_reports_settled_usage() {
        let mut s = Settings::default();
        assert!(!settled_reporting(&s));
        s.load_balancer_load_shedding_strategy = ShedderKind::BandShedder;
        assert!(settled_reporting(&s));
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

    #[test]
    fn forced_writes_of_extensible_reporting() {
        let delay = 180_000;
        // (1) The bundle set changed since the last write: write at once, whatever the times.
        assert_eq!(
            forced_report_reason(true, None, 10_000, 10_001, delay),
            Some("its bundles changed")
        );
        assert_eq!(
            forced_report_reason(true, Some(9_000), 10_000, 10_001, delay),
            Some("its bundles changed")
        );
        // Nothing changed and no bundle ever lost: nothing forced.
        assert_eq!(forced_report_reason(false, None, 0, 1_000_000, delay), None);
        // (2) Lost a bundle at 100 s, wrote at 103 s (rule 1): the first check at or after 280 s writes...
        let lost = Some(100_000);
        assert_eq!(
            forced_report_reason(false, lost, 103_000, 279_999, delay),
            None
        );
        let why = forced_report_reason(false, lost, 103_000, 280_000, delay);
        assert_eq!(
            why,
            Some("loadBalanceSheddingDelayInSeconds after it last lost a bundle")
        );
        assert_eq!(
            forced_report_reason(false, lost, 103_000, 290_000, delay),
            why,
            "a later first check"
        );
        // ...once: a write at or after 280 s (forced or not) satisfies it.
        assert_eq!(
            forced_report_reason(false, lost, 280_000, 285_000, delay),
            None
        );
        assert_eq!(
            forced_report_reason(false, lost, 284_000, 900_000, delay),
            None
        );
        // A later loss starts a new delay.
        assert_eq!(
            forced_report_reason(false, Some(200_000), 284_000, 379_999, delay),
            None
        );
        assert!(forced_report_reason(false, Some(200_000), 284_000, 380_000, delay).is_some());
        // A delay of 0: the first check after the loss, unless the broker wrote at that very instant.
        assert!(forced_report_reason(false, lost, 99_000, 100_000, 0).is_some());
        assert_eq!(forced_report_reason(false, lost, 100_000, 105_000, 0), None);
    }

    #[test]
    fn extensible_reporting_follows_the_configured_manager_or_shedder() {
        let mut s = Settings::default();
        assert!(
            !extensible_reporting(&s),
            "AvgShedder on the modular manager"
        );
        s.load_balancer_load_shedding_strategy = ShedderKind::TransferShedder;
        assert!(extensible_reporting(&s));
        let mut s = Settings::default();
        s.load_manager_class_name = LoadManagerKind::Extensible;
        assert!(extensible_reporting(&s));
    }

    #[test]
    fn update_trigger_compares_figures() {
        let written = ReportFigures {
            msg_rate: 1000.0,
            throughput: 1e6,
            bundles: 10,
            weighted_usage: 0.30,
        };
        let same = update_trigger(&written, &written, 60_000, 900_000, 10.0);
        assert_eq!(same, None);
        assert_eq!(
            update_trigger(&written, &written, 900_001, 900_000, 10.0),
            Some(UpdateTrigger::MaxInterval {
                since_ms: 900_001,
                max_interval_ms: 900_000
            })
        );
        // One bundle of ten: 10 % is not above 10 %; of nine it is.
        let nine = ReportFigures {
            bundles: 9,
            ..written
        };
        assert_eq!(update_trigger(&written, &nine, 1, 900_000, 10.0), None);
        let eight = ReportFigures {
            bundles: 8,
            ..written
        };
        let t = update_trigger(&nine, &eight, 1, 900_000, 10.0).unwrap();
        assert!(
            t.to_string().starts_with("bundle count changed 11.1 %"),
            "{t}"
        );
        // W moves by 12 points.
        let hotter = ReportFigures {
            weighted_usage: 0.42,
            ..written
        };
        let t = update_trigger(&written, &hotter, 1, 900_000, 10.0).unwrap();
        assert!(
            matches!(t, UpdateTrigger::Change { what: "weighted usage", change, .. } if (change - 12.0).abs() < 1e-9),
            "{t}"
        );
    }

    #[test]
    fn weighted_usage_of_a_host_is_that_of_its_report() {
        let mut s = Settings::default();
        s.load_balancer_memory_resource_weight = 5.0;
        let usage = SystemResourceUsage {
            cpu: ResourceUsage::new(123.4, 800.0),
            memory: ResourceUsage::new(3000.0, 4096.0),
            bandwidth_out: ResourceUsage::new(1.0 / 3.0, 1.0),
            ..Default::default()
        };
        let mut r = report(0.0, 0, 0.0);
        r.update(&usage, BTreeMap::new());
        assert_eq!(
            weighted_usage(&usage, &s).to_bits(),
            weighted_usage4(&r, &s).to_bits()
        );
        // Heap memory carries no weight in W.
        assert_eq!(
            ReportFigures::of(&r, &s).weighted_usage,
            usage.bandwidth_out.percent_usage() as f64 / 100.0
        );
    }

    #[test]
    fn report_check_phases_are_seeded_and_inside_the_period() {
        let phase = |seed, id: &str| report_check_phase_ms(seed, id, 5_000);
        assert_eq!(phase(7, "b-1:8080"), phase(7, "b-1:8080"));
        let phases: BTreeSet<i64> = (0..200).map(|i| phase(7, &format!("b-{i}:8080"))).collect();
        assert!(
            phases.len() > 150,
            "spread over the period: {}",
            phases.len()
        );
        assert!(phases.iter().all(|p| (1..5_000).contains(p)), "{phases:?}");
        let seeds: BTreeSet<i64> = (0..50).map(|seed| phase(seed, "b-1:8080")).collect();
        assert!(seeds.len() > 40, "the seed moves the phase");
        for period in [1, 2, 3] {
            assert!((1..period.max(2)).contains(&report_check_phase_ms(1, "b", period)));
        }
    }

    #[test]
    fn a_changed_bundle_set_is_due_and_asks_for_a_settled_write() {
        let mut r = SettledReports::default();
        assert_eq!(r.due(true, 0), Some("its bundles changed"));
        assert_eq!(r.due(false, 0), None);
        // A bundle of little traffic moved: no figure moved by the threshold, but the set changed.
        let f = ReportFigures::of(&report(1000.0, 10, 50.0), &Settings::default());
        let s = Settings::default();
        r.written_figures(Some(&f), &f, &s, (60_000, 10_000), true);
        assert_eq!(
            r.due(false, 59_999),
            None,
            "the window from before the write"
        );
        assert!(r.due(false, 60_000).is_some());
        // The same write without the set changing asks for nothing.
        let mut q = SettledReports::default();
        q.written_figures(Some(&f), &f, &s, (60_000, 10_000), false);
        assert_eq!(q.due(false, 60_000), None);
    }
}
