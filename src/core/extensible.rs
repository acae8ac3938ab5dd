//! The extensible load manager's per-broker load data (`BrokerLoadData`), derived from modular reports.
//!
//! Pulsar's extensible brokers publish `weightedMaxEMA` and `msgThroughputEMA`, computed on the reporting
//! broker at every report: the first report sets them to the current weighted max usage `W(b)` (five-weight
//! form, configured weights) and `tpIn + tpOut`; later reports move them by
//! `ema·h + (1 − h)·x` with `h = loadBalancerHistoryResourcePercentage`. Before any report Pulsar's initial
//! `weightedMaxEMA` is 1.0. loadmgr computes the same EMAs leader-side, advancing them once per *new* report
//! (a report whose `lastUpdate` differs from the last one seen), so calling [`ExtensibleLoadStore::observe`]
//! several times on the same data changes nothing. A report with `lastUpdate <= 0` (unknown) is stamped with
//! the `now` of its first observation.

use std::collections::{BTreeMap, BTreeSet};

use super::{weighted_usage, LoadData};
use crate::config::Settings;

/// One broker's extensible load data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerLoadEma {
    /// EMA of the weighted max usage, fraction.
    pub weighted_max_ema: f64,
    /// EMA of `msgThroughputIn + msgThroughputOut`, B/s.
    pub msg_throughput_ema: f64,
    /// Current `msgThroughputIn + msgThroughputOut`, B/s.
    pub msg_throughput: f64,
    /// When the data was produced (the report's `lastUpdate`), epoch ms.
    pub updated_at: i64,
    report_stamp: i64,
}

/// Per-broker extensible load data, kept across cycles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtensibleLoadStore {
    entries: BTreeMap<String, BrokerLoadEma>,
}

impl ExtensibleLoadStore {
    /// Advances the EMAs of brokers whose report is new and forgets brokers no longer in `load`.
    pub fn observe(&mut self, load: &LoadData, settings: &Settings, now: i64) {
        let h = settings.load_balancer_history_resource_percentage;
        for (id, e) in load.brokers() {
            let stamp = e.local.last_update;
            let w = weighted_usage(&e.local, settings);
            let tp = e.local.total_msg_throughput();
            match self.entries.get_mut(id) {
                Some(entry) if entry.report_stamp == stamp => {}
                Some(entry) => {
                    entry.weighted_max_ema = entry.weighted_max_ema * h + (1.0 - h) * w;
                    entry.msg_throughput_ema = entry.msg_throughput_ema * h + (1.0 - h) * tp;
                    entry.msg_throughput = tp;
                    entry.updated_at = if stamp > 0 { stamp } else { now };
                    entry.report_stamp = stamp;
                }
                None => {
                    self.entries.insert(
                        id.clone(),
                        BrokerLoadEma {
                            weighted_max_ema: w,
                            msg_throughput_ema: tp,
                            msg_throughput: tp,
                            updated_at: if stamp > 0 { stamp } else { now },
                            report_stamp: stamp,
                        },
                    );
                }
            }
        }
        let alive: BTreeSet<&String> = load.brokers().map(|(id, _)| id).collect();
        self.entries.retain(|id, _| alive.contains(id));
    }

    /// One broker's data.
    pub fn get(&self, broker: &str) -> Option<&BrokerLoadEma> {
        self.entries.get(broker)
    }

    /// All brokers in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &BrokerLoadEma)> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LocalBrokerData, ResourceUsage};

    #[test]
    fn ema_advances_once_per_new_report() {
        // BrokerLoadDataTest: weights 0.5, h = 0.75; sample 1 W = 2.0, tp = 3; sample 2 W = 1.5, tp = 11
        // → weightedMaxEMA 1.875, msgThroughputEMA 5.
        let mut s = Settings::default();
        s.load_balancer_cpu_resource_weight = 0.5;
        s.load_balancer_memory_resource_weight = 0.5;
        s.load_balancer_direct_memory_resource_weight = 0.5;
        s.load_balancer_bandwidth_in_resource_weight = 0.5;
        s.load_balancer_bandwidth_out_resource_weight = 0.5;
        s.load_balancer_history_resource_percentage = 0.75;
        let mut ld = LoadData::new();
        let r1 = LocalBrokerData {
            cpu: ResourceUsage::new(400.0, 100.0),
            msg_throughput_in: 1.0,
            msg_throughput_out: 2.0,
            last_update: 1000,
            ..Default::default()
        };
        ld.insert_broker("b1", r1.clone());
        let mut store = ExtensibleLoadStore::default();
        store.observe(&ld, &s, 5000);
        assert_eq!(store.get("b1").unwrap().weighted_max_ema, 2.0);
        store.observe(&ld, &s, 6000);
        assert_eq!(
            store.get("b1").unwrap().weighted_max_ema,
            2.0,
            "same report, no new sample"
        );
        let r2 = LocalBrokerData {
            cpu: ResourceUsage::new(300.0, 100.0),
            msg_throughput_in: 5.0,
            msg_throughput_out: 6.0,
            last_update: 2000,
            ..r1
        };
        ld.insert_broker("b1", r2);
        store.observe(&ld, &s, 7000);
        let e = store.get("b1").unwrap();
        assert_eq!(e.weighted_max_ema, 1.875);
        assert_eq!(e.msg_throughput_ema, 5.0);
        assert_eq!(e.updated_at, 2000);
        store.observe(&LoadData::new(), &s, 8000);
        assert!(store.get("b1").is_none());
    }
}
