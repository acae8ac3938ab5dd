//! The extensible load manager's per-broker load data (`BrokerLoadData`), derived from modular reports.
//!
//! Pulsar's extensible brokers publish `weightedMaxEMA` and `msgThroughputEMA`, computed on the reporting
//! broker at every report: the first report sets them to the current weighted max usage `W(b)` (five-weight
//! form, configured weights) and `tpIn + tpOut`; later reports move them by `ema·h + (1 − h)·x` with
//! `h = loadBalancerHistoryResourcePercentage`. Before any report Pulsar's initial `weightedMaxEMA` is 1.0.
//!
//! loadmgr computes the same EMAs leader-side, **once per applied report**, in
//! [`LoadData::apply_report`](super::LoadData::apply_report): one shared value per broker that TransferShedder
//! and the extensible placement both read, however often either runs. The weights and `h` the EMAs use are the
//! load data's [`EmaSettings`] (Pulsar's defaults until [`LoadData::set_ema_settings`](super::LoadData::set_ema_settings) is
//! called; the shedding cycle and assignment call it with their settings). A change applies from the next
//! report on, as a dynamic-config change on a Pulsar broker does; a broker whose only sample was taken with the
//! old settings is re-seeded.
//!
//! `updatedAt` is the report's `lastUpdate`, as is: a report without one (`lastUpdate` 0) is as old as the
//! epoch, so TransferShedder's TTL check (`now − updatedAt > loadBalancerBrokerLoadDataTTLInSeconds`) finds it
//! outdated, as Pulsar does with a `BrokerLoadData` whose `updatedAt` is 0 (`TransferShedderTest.
//! testOutDatedLoadData`). Every report loadmgr's agent and simulator write carries `lastUpdate`; a snapshot
//! written by hand must give one for TransferShedder to use the broker.

use crate::config::Settings;
use crate::model::{LocalBrokerData, ResourceWeights};

/// What the extensible EMAs are computed with: the five resource weights and
/// `loadBalancerHistoryResourcePercentage`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmaSettings {
    /// The five-weight form's weights.
    pub weights: ResourceWeights,
    /// `h`, the weight of the history.
    pub history: f64,
}

impl EmaSettings {
    /// The settings' weights and history percentage.
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            weights: settings.resource_weights(),
            history: settings.load_balancer_history_resource_percentage,
        }
    }

    fn usage(&self, report: &LocalBrokerData) -> f64 {
        report.max_resource_usage_with_weight(&self.weights)
    }
}

impl Default for EmaSettings {
    fn default() -> Self {
        Self::from_settings(&Settings::default())
    }
}

/// The EMAs of one broker, advanced once per applied report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExtensibleEma {
    /// EMA of the weighted max usage, fraction.
    pub weighted_max_ema: f64,
    /// EMA of `msgThroughputIn + msgThroughputOut`, B/s.
    pub msg_throughput_ema: f64,
    /// Reports folded in (1 for a value [restored](Self::restored) from a snapshot).
    pub samples: u64,
    /// Whether the value was restored from a snapshot rather than folded from reports. A restored value is a
    /// history of unknown length, so a change of the EMA settings does not re-seed it
    /// ([`LoadData::set_ema_settings`](super::LoadData::set_ema_settings)); the next report advances it as any
    /// history and clears the flag.
    pub restored: bool,
}

impl Default for ExtensibleEma {
    /// Pulsar's `BrokerLoadData` before its first update.
    fn default() -> Self {
        Self {
            weighted_max_ema: 1.0,
            msg_throughput_ema: 0.0,
            samples: 0,
            restored: false,
        }
    }
}

impl ExtensibleEma {
    /// The data after the first report.
    pub fn first(report: &LocalBrokerData, settings: &EmaSettings) -> Self {
        Self::default().advanced(report, settings)
    }

    /// EMAs as a snapshot carries them (Pulsar's `BrokerLoadData` `weightedMaxEMA` and `msgThroughputEMA`).
    pub fn restored(weighted_max_ema: f64, msg_throughput_ema: f64) -> Self {
        Self {
            weighted_max_ema,
            msg_throughput_ema,
            samples: 1,
            restored: true,
        }
    }

    /// The data after one more report.
    pub fn advanced(&self, report: &LocalBrokerData, settings: &EmaSettings) -> Self {
        let w = settings.usage(report);
        let tp = report.total_msg_throughput();
        if self.samples == 0 {
            return Self {
                weighted_max_ema: w,
                msg_throughput_ema: tp,
                samples: 1,
                restored: false,
            };
        }
        let h = settings.history;
        Self {
            weighted_max_ema: self.weighted_max_ema * h + (1.0 - h) * w,
            msg_throughput_ema: self.msg_throughput_ema * h + (1.0 - h) * tp,
            samples: self.samples.saturating_add(1),
            restored: false,
        }
    }
}

/// One broker's extensible load data as the strategies read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerLoadEma {
    /// EMA of the weighted max usage, fraction.
    pub weighted_max_ema: f64,
    /// EMA of `msgThroughputIn + msgThroughputOut`, B/s.
    pub msg_throughput_ema: f64,
    /// Current `msgThroughputIn + msgThroughputOut`, B/s.
    pub msg_throughput: f64,
    /// When the data was produced: the report's `lastUpdate` (0 when the report has none), epoch ms.
    pub updated_at: i64,
}

impl BrokerLoadEma {
    /// The view of a broker's report and EMAs.
    pub fn of(report: &LocalBrokerData, ema: &ExtensibleEma) -> Self {
        Self {
            weighted_max_ema: ema.weighted_max_ema,
            msg_throughput_ema: ema.msg_throughput_ema,
            msg_throughput: report.total_msg_throughput(),
            updated_at: report.last_update,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{weighted_usage, LoadData, NoSeeds};
    use crate::model::ResourceUsage;

    fn brokerloaddata_test_settings() -> Settings {
        let mut s = Settings::default();
        s.load_balancer_cpu_resource_weight = 0.5;
        s.load_balancer_memory_resource_weight = 0.5;
        s.load_balancer_direct_memory_resource_weight = 0.5;
        s.load_balancer_bandwidth_in_resource_weight = 0.5;
        s.load_balancer_bandwidth_out_resource_weight = 0.5;
        s.load_balancer_history_resource_percentage = 0.75;
        s
    }

    #[test]
    fn ema_advances_once_per_applied_report() {
        // BrokerLoadDataTest: weights 0.5, h = 0.75; sample 1 W = 2.0, tp = 3; sample 2 W = 1.5, tp = 11
        // → weightedMaxEMA 1.875, msgThroughputEMA 5.
        let s = brokerloaddata_test_settings();
        let mut ld = LoadData::new();
        ld.set_ema_settings(&s);
        let r1 = LocalBrokerData {
            cpu: ResourceUsage::new(400.0, 100.0),
            msg_throughput_in: 1.0,
            msg_throughput_out: 2.0,
            last_update: 1000,
            ..Default::default()
        };
        ld.apply_report("b1", r1.clone(), &NoSeeds);
        assert_eq!(ld.broker("b1").unwrap().extensible.weighted_max_ema, 2.0);
        let r2 = LocalBrokerData {
            cpu: ResourceUsage::new(300.0, 100.0),
            msg_throughput_in: 5.0,
            msg_throughput_out: 6.0,
            last_update: 2000,
            ..r1
        };
        ld.apply_report("b1", r2, &NoSeeds);
        let e = ld.extensible_load("b1").unwrap();
        assert_eq!(e.weighted_max_ema, 1.875);
        assert_eq!(e.msg_throughput_ema, 5.0);
        assert_eq!(e.msg_throughput, 11.0);
        assert_eq!(e.updated_at, 2000);
        ld.remove_broker("b1");
        assert!(ld.extensible_load("b1").is_none());
    }

    #[test]
    fn settings_change_reseeds_single_samples_only() {
        let s = brokerloaddata_test_settings();
        let r = LocalBrokerData {
            cpu: ResourceUsage::new(400.0, 100.0),
            ..Default::default()
        };
        let mut ld = LoadData::new();
        ld.insert_broker("one", r.clone());
        ld.apply_report("two", r.clone(), &NoSeeds);
        ld.apply_report("two", r.clone(), &NoSeeds);
        // Default weights (cpu 1): W = 4.0 for both.
        assert_eq!(ld.broker("one").unwrap().extensible.weighted_max_ema, 4.0);
        ld.set_ema_settings(&s);
        // One sample: re-seeded with cpu weight 0.5. Two samples: history kept.
        assert_eq!(ld.broker("one").unwrap().extensible.weighted_max_ema, 2.0);
        assert_eq!(ld.broker("two").unwrap().extensible.weighted_max_ema, 4.0);
        ld.apply_report("two", r, &NoSeeds);
        assert_eq!(
            ld.broker("two").unwrap().extensible.weighted_max_ema,
            4.0 * 0.75 + 0.25 * 2.0
        );
        assert_eq!(weighted_usage(&ld.broker("two").unwrap().local, &s), 2.0);
    }
}
