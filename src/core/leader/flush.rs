//! The flush: what bundle data and time averages the leader writes, and what it deletes.

use std::collections::BTreeMap;

use crate::core::namespace_of;
use crate::model::BundleData;

use super::{Command, FlushedNode, FlushedValue, Leader, Level, Outcome, Pending};

#[cfg(test)]
mod still_current_tests {
    use super::*;
    use crate::model::TimeAverageBrokerData;

    #[test]
    fn sample_counts_alone_do_not_count_as_a_change() {
        let mut a = BundleData::default();
        a.short_term_data.max_samples = 10;
        a.long_term_data.max_samples = 1000;
        a.long_term_data.msg_rate_in = 100.0;
        let mut b = a;
        b.long_term_data.num_samples += 1;
        b.long_term_data.msg_rate_in = 100.5;
        let (a, b) = (FlushedValue::BundleData(a), FlushedValue::BundleData(b));
        assert!(a.still_current(&b));
        let mut c = match b {
            FlushedValue::BundleData(d) => d,
            _ => unreachable!(),
        };
        c.long_term_data.msg_rate_in = 102.0;
        assert!(!a.still_current(&FlushedValue::BundleData(c)));
        // From nothing to something is a change.
        let zero = FlushedValue::TimeAverage(TimeAverageBrokerData::default());
        let some = FlushedValue::TimeAverage(TimeAverageBrokerData {
            long_term_msg_rate_in: 0.5,
            ..TimeAverageBrokerData::default()
        });
        assert!(!zero.still_current(&some));
        assert!(zero.still_current(&zero));
    }
}

/// A flushed value is written again only when one of its rates or throughputs moved by more than this
/// fraction of the larger of the old and new value since it was last written (or its topic count changed):
/// the sample counts grow at every flush (the long-term one for 1,000 flushes), so comparing the bytes would
/// rewrite every node every time even when no traffic changed.
pub const FLUSH_CHANGE_FRACTION: f64 = 0.01;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= FLUSH_CHANGE_FRACTION * a.abs().max(b.abs())
}

fn close_windows(
    a: &crate::model::TimeAverageMessageData,
    b: &crate::model::TimeAverageMessageData,
) -> bool {
    a.max_samples == b.max_samples
        && close(a.msg_rate_in, b.msg_rate_in)
        && close(a.msg_rate_out, b.msg_rate_out)
        && close(a.msg_throughput_in, b.msg_throughput_in)
        && close(a.msg_throughput_out, b.msg_throughput_out)
}

impl FlushedValue {
    /// Whether `self` may stand for `newer` in the store (see [`FLUSH_CHANGE_FRACTION`]).
    pub fn still_current(&self, newer: &FlushedValue) -> bool {
        match (self, newer) {
            (FlushedValue::BundleData(a), FlushedValue::BundleData(b)) => {
                a.topics == b.topics
                    && close_windows(&a.short_term_data, &b.short_term_data)
                    && close_windows(&a.long_term_data, &b.long_term_data)
            }
            (FlushedValue::TimeAverage(a), FlushedValue::TimeAverage(b)) => {
                close(
                    a.short_term_msg_throughput_in,
                    b.short_term_msg_throughput_in,
                ) && close(
                    a.short_term_msg_throughput_out,
                    b.short_term_msg_throughput_out,
                ) && close(a.short_term_msg_rate_in, b.short_term_msg_rate_in)
                    && close(a.short_term_msg_rate_out, b.short_term_msg_rate_out)
                    && close(a.long_term_msg_throughput_in, b.long_term_msg_throughput_in)
                    && close(
                        a.long_term_msg_throughput_out,
                        b.long_term_msg_throughput_out,
                    )
                    && close(a.long_term_msg_rate_in, b.long_term_msg_rate_in)
                    && close(a.long_term_msg_rate_out, b.long_term_msg_rate_out)
            }
            _ => false,
        }
    }
}

/// A flush batch awaiting its outcome.
#[derive(Debug)]
pub(super) struct FlushWrite {
    writes: Vec<(FlushedNode, FlushedValue)>,
    /// The bundle data written, to become the seeds of bundles seen anew.
    bundles: BTreeMap<String, BundleData>,
}

impl Leader {
    /// The bundles whose data a flush writes: Pulsar's top `loadBalancerMaxNumberOfBundlesInBundleLoadReport ×
    /// max(1, brokers)` (all when the setting is ≤ 0), shedding-excluded namespaces left out, ranked by long-term
    /// msg rate in + out, then long-term throughput, then name.
    ///
    /// The order is total (names are unique), so the bundles are taken in no particular order, the top `k`
    /// selected in linear time and only those sorted: at 100,000 bundles, sorting them all by name and then by
    /// rate was most of a flush, during which the leader's loop takes no report.
    pub fn flush_choice(&self) -> Vec<(&String, &BundleData)> {
        let excluded = &self.settings.load_balancer_shedding_excluded_namespaces;
        let mut ranked: Vec<(&String, &BundleData)> = self
            .load
            .bundle_keys()
            .filter(|b| excluded.is_empty() || !excluded.contains(namespace_of(b)))
            .filter_map(|b| self.load.bundle(b).map(|d| (b, d)))
            .collect();
        let order = |a: &(&String, &BundleData), b: &(&String, &BundleData)| {
            b.1.long_term_data
                .total_msg_rate()
                .total_cmp(&a.1.long_term_data.total_msg_rate())
                .then(
                    b.1.long_term_data
                        .total_msg_throughput()
                        .total_cmp(&a.1.long_term_data.total_msg_throughput()),
                )
                .then_with(|| a.0.cmp(b.0))
        };
        let k = self
            .settings
            .load_balancer_max_number_of_bundles_in_bundle_load_report;
        if k > 0 {
            let k = k as usize * self.load.broker_count().max(1);
            if k < ranked.len() {
                ranked.select_nth_unstable_by(k, order);
                ranked.truncate(k);
            }
        }
        ranked.sort_unstable_by(order);
        ranked
    }

    /// One flush: a sample for every bundle, then the changed values and the status in one batch. Skipped
    /// while the previous flush's batch is still being written (a runtime writes it beside the other events, so
    /// a large first flush does not hold up the reports behind it).
    pub(super) fn flush(&mut self, now: i64) {
        if self
            .pending
            .values()
            .any(|p| matches!(p, Pending::Flush(_)))
        {
            self.log(
                Level::Info,
                "flush skipped: the previous flush is still being written",
            );
            return;
        }
        self.load.resample_all();
        let mut writes = Vec::new();
        let mut bundles = BTreeMap::new();
        let chosen: Vec<(String, BundleData)> = self
            .flush_choice()
            .into_iter()
            .map(|(b, d)| (b.clone(), *d))
            .collect();
        for (b, d) in chosen {
            let node = FlushedNode::BundleData(b.clone());
            let value = FlushedValue::BundleData(d);
            if !self
                .flushed
                .get(&node)
                .is_some_and(|old| old.still_current(&value))
            {
                writes.push((node, value));
            }
            bundles.insert(b, d);
        }
        for (id, e) in self.load.brokers() {
            let node = FlushedNode::TimeAverage(id.clone());
            let value = FlushedValue::TimeAverage(e.time_average);
            if !self
                .flushed
                .get(&node)
                .is_some_and(|old| old.still_current(&value))
            {
                writes.push((node, value));
            }
        }
        self.status.flushes += 1;
        self.status.updated_ms = now;
        let ticket = self.ticket();
        self.emit(Command::Flush {
            ticket,
            writes: writes.clone(),
            status: self.status.clone(),
        });
        self.pending
            .insert(ticket, Pending::Flush(FlushWrite { writes, bundles }));
    }

    pub(super) fn flush_done(&mut self, f: FlushWrite, outcome: Outcome) {
        match outcome {
            Outcome::Written(_) => {
                let n = f.writes.len();
                for (node, value) in f.writes {
                    match &node {
                        FlushedNode::BundleData(b) => {
                            self.stored_bundle_data.insert(b.clone());
                        }
                        FlushedNode::TimeAverage(b) => {
                            self.stored_time_averages.insert(b.clone());
                        }
                    }
                    self.flushed.insert(node, value);
                }
                for (b, d) in f.bundles {
                    self.seeds.bundle_data.insert(b, d);
                }
                self.log(Level::Debug, format!("flushed {n} changed value(s)"));
                self.delete_gone();
            }
            Outcome::Conflict => self.log(Level::Warn, "flush: a version check failed"),
            Outcome::Failed(e) => self.log(Level::Warn, format!("flush: {e}")),
        }
    }

    /// Deletes the flushed data of brokers that are gone and of bundles nobody serves or is assigned, one node
    /// at a time (a batch fails as a whole on a node someone else removed).
    fn delete_gone(&mut self) {
        let gone_brokers: Vec<String> = self
            .stored_time_averages
            .iter()
            .filter(|b| !self.registered.contains(*b))
            .cloned()
            .collect();
        let gone_bundles: Vec<String> = self
            .stored_bundle_data
            .iter()
            .filter(|b| self.load.bundle(b).is_none() && !self.records.contains_key(*b))
            .cloned()
            .collect();
        for b in gone_brokers {
            self.delete_flushed(FlushedNode::TimeAverage(b), "the broker is gone".into());
        }
        for b in gone_bundles {
            self.delete_flushed(
                FlushedNode::BundleData(b),
                "no broker serves the bundle and none is assigned it".into(),
            );
        }
    }

    pub(super) fn delete_flushed(&mut self, node: FlushedNode, why: String) {
        if self
            .pending
            .values()
            .any(|p| matches!(p, Pending::Delete(n) if *n == node))
        {
            return;
        }
        let ticket = self.ticket();
        self.emit(Command::Delete {
            ticket,
            node: node.clone(),
            why,
        });
        self.pending.insert(ticket, Pending::Delete(node));
    }

    pub(super) fn delete_done(&mut self, node: FlushedNode, outcome: Outcome) {
        match outcome {
            Outcome::Written(_) => {
                match &node {
                    FlushedNode::BundleData(b) => {
                        self.stored_bundle_data.remove(b);
                    }
                    FlushedNode::TimeAverage(b) => {
                        self.stored_time_averages.remove(b);
                    }
                }
                self.flushed.remove(&node);
            }
            Outcome::Conflict | Outcome::Failed(_) => {
                // Tried again at the next flush.
            }
        }
    }
}
