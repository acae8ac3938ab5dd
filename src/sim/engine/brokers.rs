//! The brokers of a run: joining and leaving (registration, election of the leader, the session timeout of a
//! crash), and their report checks and writes, by the rules a broker agent follows
//! ([`crate::core::report_rules`]).

use crate::core::leader::Event;
use crate::core::random::noise;
use crate::core::report_rules::{
    forced_report_reason, update_trigger, weighted_usage, ReportFigures,
};
use crate::model::{LocalBrokerData, SystemResourceUsage};
use crate::sim::metrics::ReportRecord;

use super::{Ev, Sim, Written};

fn add_usage(a: &mut SystemResourceUsage, b: &SystemResourceUsage) {
    for (x, y) in [
        (&mut a.cpu, &b.cpu),
        (&mut a.memory, &b.memory),
        (&mut a.direct_memory, &b.direct_memory),
        (&mut a.bandwidth_in, &b.bandwidth_in),
        (&mut a.bandwidth_out, &b.bandwidth_out),
    ] {
        x.usage += y.usage;
        x.limit = y.limit;
    }
}

fn mean_usage(sum: &SystemResourceUsage, n: u32) -> SystemResourceUsage {
    let mut m = *sum;
    for r in [
        &mut m.cpu,
        &mut m.memory,
        &mut m.direct_memory,
        &mut m.bandwidth_in,
        &mut m.bandwidth_out,
    ] {
        r.usage /= n.max(1) as f64;
    }
    m
}

impl<'w> Sim<'w> {
    pub(super) fn join(&mut self, b: usize, t: i64) {
        let spec = &self.world.brokers[b];
        let host = spec
            .id
            .rsplit_once(':')
            .map_or(spec.id.as_str(), |(h, _)| h);
        let port = spec.id.rsplit_once(':').map_or("8080", |(_, p)| p);
        let local = LocalBrokerData {
            web_service_url: Some(format!("http://{host}:{port}")),
            pulsar_service_url: Some(format!("pulsar://{host}:6650")),
            broker_version_string: Some("loadmgr-sim".into()),
            load_manager_class_name: Some(self.class_name.to_owned()),
            start_timestamp: Some(self.world.start_ms + t),
            ..Default::default()
        };
        self.log(t, format!("broker {} starts", self.world.brokers[b].id));
        let br = &mut self.brokers[b];
        br.up = true;
        br.registered = true;
        br.epoch += 1;
        br.local = local;
        br.reported_deltas = Some(Default::default());
        br.last = None;
        br.checks = 0;
        br.acc = (SystemResourceUsage::default(), 0);
        br.acc_from = None;
        br.host_from = t;
        br.settled.reset();
        br.owners_changed = false;
        br.checked_hash = br.set_hash;
        br.last_loss = None;
        // The registration is the first report, with the host's usage and the bundles served (the runtime's agent
        // registers so): the broker's first check is now, and a leader sees one report, not an empty
        // registration then a report (the extensible EMAs start from the first report they see).
        self.check(b, t);
        if self.leader.is_none() && !self.electing {
            // Elected once every broker joining at this instant is registered.
            self.electing = true;
            self.push(t, Ev::Elect);
        }
        // Its agent takes what the records name it destination of.
        self.acquire_recorded(t, b);
        let notices: Vec<_> = self.notices.drain(..).collect();
        for n in notices {
            self.leader_step(t, n);
        }
        // Lookups that found no broker are tried again.
        let unplaced: Vec<usize> = std::mem::take(&mut self.unplaced).into_iter().collect();
        for bi in unplaced {
            if self.bundles[bi].live && self.bundles[bi].node.is_none() {
                self.look_up(t, bi);
            }
        }
    }

    /// The registered broker with the lowest id becomes leader.
    pub(super) fn elect(&mut self, t: i64) {
        self.electing = false;
        if self.leader.is_some() {
            return;
        }
        let next = (0..self.brokers.len())
            .filter(|i| self.brokers[*i].registered)
            .min_by(|a, c| self.id(*a).cmp(self.id(*c)));
        if let Some(n) = next {
            self.start_leader(n, t);
        }
    }

    /// Broker `b`'s registration vanishes (a graceful stop, or the session of a crashed one expired): the
    /// ownership nodes of its session go with it.
    pub(super) fn deregister(&mut self, b: usize, t: i64) {
        self.brokers[b].registered = false;
        let held: Vec<usize> = (0..self.bundles.len())
            .filter(|i| self.bundles[*i].node == Some(b))
            .collect();
        for &bi in &held {
            self.release(bi);
        }
        // Agents waiting for these nodes take them now (moves off the crashed broker planned before its session
        // expired).
        for &bi in &held {
            self.hand_over(t, bi);
        }
        let id = self.id(b).to_owned();
        if self.leader_idx == Some(b) {
            self.notices.clear();
            let next = (0..self.brokers.len())
                .filter(|i| self.brokers[*i].registered)
                .min_by(|a, c| self.id(*a).cmp(self.id(*c)));
            self.leader = None;
            self.leader_idx = None;
            self.leader_epoch += 1;
            if next.is_some() {
                self.elect(t);
            }
        } else {
            let notices: Vec<_> = self.notices.drain(..).collect();
            for n in notices {
                self.leader_step(t, n);
            }
            self.leader_step(t, Event::BrokerGone { broker: id });
        }
    }

    pub(super) fn leave(&mut self, b: usize, t: i64, graceful: bool) {
        if !self.brokers[b].up {
            return;
        }
        self.log(
            t,
            format!(
                "broker {} {} with {} bundles",
                self.world.brokers[b].id,
                if graceful { "stops" } else { "crashes" },
                self.brokers[b].bundles.len()
            ),
        );
        self.brokers[b].up = false;
        self.brokers[b].epoch += 1;
        let serving: Vec<usize> = self.brokers[b].bundles.iter().copied().collect();
        for bi in serving {
            self.unown(bi);
        }
        if graceful {
            self.deregister(b, t);
        } else {
            let timeout = self.settings.metadata_store_session_timeout_millis.max(0);
            let epoch = self.brokers[b].epoch;
            self.push(t + timeout, Ev::Deregister(b, epoch));
        }
    }

    pub(super) fn check(&mut self, b: usize, t: i64) {
        let period = self.check_ms;
        let host_every = self.host_every;
        let rates = self.broker_rates(b, t);
        let inst = self.world.model.usage(
            &self.world.brokers[b].capacity,
            &rates,
            self.spike(b, t),
            noise(self.seed, b as u64, self.brokers[b].checks),
        );
        let br = &mut self.brokers[b];
        if br.set_hash != br.checked_hash {
            br.owners_changed = true;
            br.checked_hash = br.set_hash;
        }
        add_usage(&mut br.acc.0, &inst);
        br.acc.1 += 1;
        br.acc_from.get_or_insert(t);
        if br.checks % host_every == 0 {
            br.host = mean_usage(&br.acc.0, br.acc.1);
            br.host_from = br.acc_from.take().unwrap_or(t);
            br.acc = (SystemResourceUsage::default(), 0);
        }
        br.checks += 1;
        let next = if br.checks == 1 {
            t + br.phase_ms
        } else {
            t + period
        };
        let epoch = br.epoch;
        let current = ReportFigures {
            msg_rate: rates.total_rate(),
            throughput: rates.total_tp(),
            bundles: br.bundles.len() as i32,
            weighted_usage: weighted_usage(&br.host, &self.settings),
        };
        let threshold = self
            .settings
            .load_balancer_report_update_threshold_percentage as f64;
        let (need, forced) = match br.last {
            None => (true, None),
            Some(last) => {
                let need = update_trigger(
                    &last.figures,
                    &current,
                    t - last.at,
                    self.report_max_ms,
                    threshold,
                )
                .is_some();
                let forced = (self.extensible_reports && !need)
                    .then(|| {
                        forced_report_reason(
                            br.owners_changed,
                            br.last_loss,
                            last.at,
                            t,
                            self.settings
                                .load_balance_shedding_delay_in_seconds
                                .saturating_mul(1000),
                        )
                    })
                    .flatten();
                let forced = forced.or_else(|| {
                    (self.settled_reports && !need)
                        .then(|| br.settled.due(br.owners_changed, br.host_from))
                        .flatten()
                });
                (need, forced)
            }
        };
        self.push(next, Ev::Check(b, epoch));
        if let Some(why) = forced {
            let line = format!("report {} forced: {why}", self.world.brokers[b].id);
            self.log(t, line);
        }
        if need || forced.is_some() {
            self.write_report(b, t);
        }
    }

    pub(super) fn write_report(&mut self, b: usize, t: i64) {
        let waves = self.waves(t).to_vec();
        let stats = self.brokers[b]
            .bundles
            .iter()
            .map(|bi| {
                let bd = &self.bundles[*bi];
                let m = waves[bd.ns];
                (
                    bd.name.clone(),
                    crate::model::NamespaceBundleStats {
                        msg_rate_in: bd.rates.rate_in.max(0.0) * m,
                        msg_rate_out: bd.rates.rate_out.max(0.0) * m,
                        msg_throughput_in: bd.rates.tp_in.max(0.0) * m,
                        msg_throughput_out: bd.rates.tp_out.max(0.0) * m,
                        consumer_count: bd.consumers,
                        producer_count: bd.producers,
                        topics: bd.topics.len() as i64,
                        cache_size: 0,
                    },
                )
            })
            .collect();
        let now = self.world.start_ms + t;
        let br = &mut self.brokers[b];
        let host = br.host;
        br.local.update(&host, stats);
        br.local.last_update = now;
        let report = br.local.clone();
        br.local.clean_deltas();
        let bundles_changed = std::mem::replace(&mut br.owners_changed, false);
        let figures = ReportFigures::of(&report, &self.settings);
        if self.settled_reports {
            let before = br.last.as_ref().map(|l| &l.figures);
            br.settled.written_figures(
                before,
                &figures,
                &self.settings,
                (t, br.host_from),
                bundles_changed,
            );
        }
        br.last = Some(Written { figures, at: t });
        if self.trace.is_some() {
            self.reports.push(ReportRecord {
                at_ms: t,
                broker: self.world.brokers[b].id.clone(),
                usage: host,
                figures,
            });
        }
        self.recorder.counts.reports_written += 1;
        if !br.registered {
            return;
        }
        let id = self.world.brokers[b].id.clone();
        // What a new leader would read: the report is `local` with the deltas cleared after the write, so only the
        // deltas are kept (a copy of every report would cost the run a deep clone per write).
        self.brokers[b].reported_deltas = Some((
            report.last_bundle_gains.clone(),
            report.last_bundle_losses.clone(),
        ));
        self.leader_step(
            t,
            Event::Report {
                broker: id,
                report: Ok(report),
            },
        );
    }
}
