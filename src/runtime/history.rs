//! What the leader has seen lately, kept in memory for the dashboard and `/loadmgr/v1/{cluster,history,moves}`:
//! each broker's latest load summary and its score over the last hour, the latest moves (assignment records as
//! the leader wrote them) and the splits it applied.
//!
//! # Contract
//!
//! * Fed by the leader task only, from the events it hands its core and the commands it executes
//!   ([`History::observe_event`], [`History::observe_record`], [`History::observe_split`]); starts empty
//!   when a broker starts leading (the records a new leader loads seed the moves, the loaded reports one
//!   score each).
//! * A broker's **score** is Pulsar's `getMaxResourceUsageWithWeight` of its latest report in percent (the
//!   usage AvgShedder and ThresholdShedder compare), with the weights of the leader's settings.
//! * Samples are kept [`RETENTION_MS`] (one hour); a broker's samples but its latest are at least
//!   [`SAMPLE_SPACING_MS`] apart (the latest is replaced by a newer report while it is closer than that to the
//!   one before it), so the latest report is always the last sample. A broker whose registration went is
//!   listed as gone for [`GONE_KEPT_MS`], then forgotten. Both expire with an event, at most once a second.
//! * At most [`MAX_MOVES`] moves and [`MAX_SPLITS`] splits are kept, newest last; a move's entry is updated in
//!   place when its record is rewritten (the destination took ownership), which gives the move's duration.
//! * Memory is bounded: O(brokers × 720) samples plus the two lists.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;
use utoipa::ToSchema;

use crate::core::leader::Event;
use crate::model::records::{AssignmentState, BundleAssignment};
use crate::model::{LocalBrokerData, ResourceWeights};

/// How long samples and moves are kept, ms.
pub const RETENTION_MS: i64 = 3_600_000;
/// Smallest gap between two kept samples of one broker, ms.
pub const SAMPLE_SPACING_MS: i64 = 5_000;
/// How long a broker whose registration went stays listed, ms.
pub const GONE_KEPT_MS: i64 = 600_000;
/// A broker first seen within this long is new, ms.
pub const NEW_FOR_MS: i64 = 300_000;
/// Moves kept.
pub const MAX_MOVES: usize = 2_000;
/// Splits kept.
pub const MAX_SPLITS: usize = 500;

/// A broker's latest report, reduced to what an operator compares; usages in percent of the limit.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerSummary {
    /// Weighted maximum usage (see the module docs), percent.
    pub score: f64,
    /// CPU usage, percent.
    pub cpu: f64,
    /// JVM heap usage, percent.
    pub memory: f64,
    /// Direct memory usage, percent.
    pub direct_memory: f64,
    /// NIC receive usage, percent.
    pub bandwidth_in: f64,
    /// NIC transmit usage, percent.
    pub bandwidth_out: f64,
    /// Bundles served.
    pub bundles: i64,
    /// Topics served.
    pub topics: i64,
    /// Messages in, msg/s.
    pub msg_rate_in: f64,
    /// Messages out, msg/s.
    pub msg_rate_out: f64,
    /// Bytes in, B/s.
    pub msg_throughput_in: f64,
    /// Bytes out, B/s.
    pub msg_throughput_out: f64,
    /// When the broker wrote the report, epoch ms.
    pub last_update_ms: i64,
    /// The broker's version, when it reports one.
    pub version: Option<String>,
}

impl BrokerSummary {
    /// The summary of `report` under `weights`.
    pub fn of(report: &LocalBrokerData, weights: &ResourceWeights) -> Self {
        let pct = |r: &crate::model::ResourceUsage| finite(r.percent_usage() as f64);
        BrokerSummary {
            score: finite(report.max_resource_usage_with_weight(weights) * 100.0),
            cpu: pct(&report.cpu),
            memory: pct(&report.memory),
            direct_memory: pct(&report.direct_memory),
            bandwidth_in: pct(&report.bandwidth_in),
            bandwidth_out: pct(&report.bandwidth_out),
            bundles: report.bundles.len() as i64,
            topics: report.num_topics,
            msg_rate_in: finite(report.msg_rate_in),
            msg_rate_out: finite(report.msg_rate_out),
            msg_throughput_in: finite(report.msg_throughput_in),
            msg_throughput_out: finite(report.msg_throughput_out),
            last_update_ms: report.last_update,
            version: report.broker_version_string.clone(),
        }
    }
}

/// NaN and infinities (a limit of 0) as 0, so the JSON stays numbers.
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// One move as the leader wrote its record.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveEntry {
    /// Full bundle name.
    pub bundle: String,
    /// The owner when the move was decided; absent for an unowned bundle.
    pub source: Option<String>,
    /// The broker that must own it.
    pub destination: String,
    /// Why (`lookup`, `shedding`, `unload`, `orphan`, `replaced`, `split`, `adopted`).
    pub cause: String,
    /// `assigning` until the destination holds it, then `assigned`; `superseded` when another move of the
    /// bundle was decided before this one completed.
    pub state: String,
    /// The decision's reason.
    pub reason: String,
    /// When the move was decided, epoch ms.
    pub created_ms: i64,
    /// When the destination took ownership, epoch ms; absent while it has not.
    pub completed_ms: Option<i64>,
}

/// One split the leader applied.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SplitEntry {
    /// The bundle that was split.
    pub parent: String,
    /// The bundles it became.
    pub children: Vec<String>,
    /// Why.
    pub reason: String,
    /// When, epoch ms.
    pub at_ms: i64,
}

#[derive(Debug, Default)]
struct Track {
    first_seen_ms: i64,
    gone_ms: Option<i64>,
    latest: Option<BrokerSummary>,
    /// Why the latest report could not be read, when it could not.
    error: Option<String>,
    samples: VecDeque<(i64, f64)>,
}

/// A broker as [`History::brokers`] lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerState {
    /// Broker id.
    pub id: String,
    /// When this leader first saw it, epoch ms.
    pub first_seen_ms: i64,
    /// First seen within [`NEW_FOR_MS`] of now (and not when this leader started: every broker is first
    /// seen then).
    pub new: bool,
    /// When its registration went, epoch ms; absent while it is registered.
    pub gone_ms: Option<i64>,
    /// Its latest report, absent when none could be read.
    pub summary: Option<BrokerSummary>,
    /// Why its latest report could not be read.
    pub error: Option<String>,
}

/// See the module docs.
#[derive(Debug)]
pub struct History {
    since_ms: i64,
    weights: ResourceWeights,
    brokers: BTreeMap<String, Track>,
    moves: VecDeque<MoveEntry>,
    /// Bundle → sequence number of its latest move; `moves[i]` has sequence `first_seq + i`.
    latest_move: HashMap<String, u64>,
    first_seq: u64,
    splits: VecDeque<SplitEntry>,
    /// When the last expiry ran, epoch ms.
    expired_ms: i64,
}

/// Expiry runs at most this often, ms: it looks at every broker, and a lookup storm hands the leader thousands
/// of events a second (at 1,000 brokers, an expiry at every event was a tenth of the leader's time).
const EXPIRE_EVERY_MS: i64 = 1_000;

impl History {
    /// An empty history started at `now_ms`, scoring with `weights`.
    pub fn new(now_ms: i64, weights: ResourceWeights) -> Self {
        History {
            since_ms: now_ms,
            weights,
            brokers: BTreeMap::new(),
            moves: VecDeque::new(),
            latest_move: HashMap::new(),
            first_seq: 0,
            splits: VecDeque::new(),
            expired_ms: i64::MIN,
        }
    }

    /// When this history started (the leader took over), epoch ms.
    pub fn since_ms(&self) -> i64 {
        self.since_ms
    }

    /// Uses `weights` for the scores of reports from now on.
    pub fn set_weights(&mut self, weights: ResourceWeights) {
        self.weights = weights;
    }

    /// Notes what `event` tells of the brokers (reports, registrations gone) and of moves (loaded records).
    pub fn observe_event(&mut self, now_ms: i64, event: &Event) {
        match event {
            Event::Loaded(state) => {
                for (broker, report) in &state.reports {
                    self.report(now_ms, broker, report);
                }
                let mut records: Vec<&BundleAssignment> =
                    state.records.iter().map(|(r, _)| r).collect();
                records.sort_by_key(|r| (r.updated_ms, r.created_ms));
                let skip = records.len().saturating_sub(MAX_MOVES);
                for r in records.into_iter().skip(skip) {
                    self.observe_record(r);
                }
            }
            Event::Report { broker, report } => self.report(now_ms, broker, report),
            Event::BrokerGone { broker } => {
                if let Some(t) = self.brokers.get_mut(broker) {
                    t.gone_ms.get_or_insert(now_ms);
                }
            }
            _ => {}
        }
        if now_ms.saturating_sub(self.expired_ms) >= EXPIRE_EVERY_MS {
            self.expired_ms = now_ms;
            self.expire(now_ms);
        }
    }

    fn report(&mut self, now_ms: i64, broker: &str, report: &Result<LocalBrokerData, String>) {
        let track = self
            .brokers
            .entry(broker.to_owned())
            .or_insert_with(|| Track {
                first_seen_ms: now_ms,
                ..Track::default()
            });
        if track.gone_ms.take().is_some() {
            // Registered again: a new incarnation.
            track.first_seen_ms = now_ms;
        }
        match report {
            Ok(r) => {
                let summary = BrokerSummary::of(r, &self.weights);
                let sample = (now_ms, summary.score);
                // The latest sample is provisional while it is within the spacing of the one before it.
                let n = track.samples.len();
                if n >= 2 && track.samples[n - 1].0 - track.samples[n - 2].0 < SAMPLE_SPACING_MS {
                    track.samples[n - 1] = sample;
                } else {
                    track.samples.push_back(sample);
                }
                track.latest = Some(summary);
                track.error = None;
            }
            Err(why) => track.error = Some(why.clone()),
        }
    }

    /// Notes a record the leader wrote (or loaded): a new move, or the completion of one.
    pub fn observe_record(&mut self, record: &BundleAssignment) {
        let state = match record.state {
            AssignmentState::Assigning => "assigning",
            AssignmentState::Assigned => "assigned",
        };
        let completed_ms = (record.state == AssignmentState::Assigned).then_some(record.updated_ms);
        if let Some(&seq) = self.latest_move.get(&record.bundle) {
            if let Some(entry) = seq
                .checked_sub(self.first_seq)
                .and_then(|i| self.moves.get_mut(i as usize))
            {
                if entry.created_ms == record.created_ms && entry.destination == record.destination
                {
                    entry.state = state.to_owned();
                    entry.completed_ms = completed_ms;
                    return;
                }
                // A new decision for the bundle before the last one completed (a split child placed anew, a
                // destination that went): the earlier move will not complete as decided.
                if entry.state == "assigning" {
                    entry.state = "superseded".to_owned();
                }
            }
        }
        if self.moves.len() == MAX_MOVES {
            if let Some(old) = self.moves.pop_front() {
                let seq = self.first_seq;
                self.first_seq += 1;
                if self.latest_move.get(&old.bundle) == Some(&seq) {
                    self.latest_move.remove(&old.bundle);
                }
            }
        }
        self.latest_move.insert(
            record.bundle.clone(),
            self.first_seq + self.moves.len() as u64,
        );
        self.moves.push_back(MoveEntry {
            bundle: record.bundle.clone(),
            source: record.source.clone(),
            destination: record.destination.clone(),
            cause: record.cause.name().to_owned(),
            state: state.to_owned(),
            reason: record.reason.clone(),
            created_ms: record.created_ms,
            completed_ms,
        });
    }

    /// Notes a split the leader applied.
    pub fn observe_split(&mut self, entry: SplitEntry) {
        if self.splits.len() == MAX_SPLITS {
            self.splits.pop_front();
        }
        self.splits.push_back(entry);
    }

    fn expire(&mut self, now_ms: i64) {
        let horizon = now_ms - RETENTION_MS;
        self.brokers.retain(|_, t| {
            while t.samples.front().is_some_and(|s| s.0 < horizon) {
                t.samples.pop_front();
            }
            t.gone_ms.map_or(true, |g| now_ms - g < GONE_KEPT_MS)
        });
    }

    /// Every broker seen within the retention, in id order.
    pub fn brokers(&self, now_ms: i64) -> Vec<BrokerState> {
        self.brokers
            .iter()
            .map(|(id, t)| BrokerState {
                id: id.clone(),
                first_seen_ms: t.first_seen_ms,
                new: t.first_seen_ms > self.since_ms && now_ms - t.first_seen_ms < NEW_FOR_MS,
                gone_ms: t.gone_ms,
                summary: t.latest.clone(),
                error: t.error.clone(),
            })
            .collect()
    }

    /// Each broker's samples `(epoch ms, score)` after `after_ms`, at most `points` per broker (the latest
    /// sample of each of `points` equal time slices from `after_ms` to `now_ms`).
    pub fn scores(
        &self,
        after_ms: i64,
        now_ms: i64,
        points: usize,
    ) -> BTreeMap<String, Vec<(i64, f64)>> {
        let points = points.max(1) as i64;
        // `now_ms - after_ms` falls in the last slice, `points - 1`.
        let slice = (now_ms - after_ms).max(0) / points + 1;
        self.brokers
            .iter()
            .map(|(id, t)| {
                let mut out: Vec<(i64, f64)> = Vec::new();
                let mut last_slice = None;
                for &(at, score) in t.samples.iter().filter(|s| s.0 > after_ms) {
                    let s = (at - after_ms) / slice;
                    if last_slice == Some(s) {
                        *out.last_mut().expect("a sample of this slice") = (at, score);
                    } else {
                        out.push((at, score));
                        last_slice = Some(s);
                    }
                }
                (id.clone(), out)
            })
            .collect()
    }

    /// The latest moves, newest first, that `keep` accepts, at most `limit`.
    pub fn moves(&self, limit: usize, keep: impl Fn(&MoveEntry) -> bool) -> Vec<MoveEntry> {
        self.moves
            .iter()
            .rev()
            .filter(|m| keep(m))
            .take(limit)
            .cloned()
            .collect()
    }

    /// The splits applied, newest first.
    pub fn splits(&self) -> Vec<SplitEntry> {
        self.splits.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::AssignmentCause;
    use crate::model::ResourceUsage;

    fn report(cpu: f64, at: i64) -> Result<LocalBrokerData, String> {
        Ok(LocalBrokerData {
            cpu: ResourceUsage {
                usage: cpu,
                limit: 100.0,
            },
            last_update: at,
            ..LocalBrokerData::default()
        })
    }

    fn record(
        bundle: &str,
        state: AssignmentState,
        created: i64,
        updated: i64,
    ) -> BundleAssignment {
        BundleAssignment {
            bundle: bundle.into(),
            destination: "b:2".into(),
            state,
            source: Some("a:1".into()),
            cause: AssignmentCause::Shedding,
            reason: "why".into(),
            leader: "a:1".into(),
            created_ms: created,
            updated_ms: updated,
            unload_after_acquire: false,
            no_overlap: false,
        }
    }

    fn event(broker: &str, cpu: f64, at: i64) -> Event {
        Event::Report {
            broker: broker.into(),
            report: report(cpu, at),
        }
    }

    #[test]
    fn scores_are_the_weighted_maximum_and_samples_are_spaced() {
        let mut h = History::new(0, ResourceWeights::default());
        h.observe_event(1_000, &event("a:1", 25.0, 1_000));
        h.observe_event(2_000, &event("a:1", 37.5, 2_000));
        h.observe_event(3_000, &event("a:1", 50.0, 3_000));
        h.observe_event(9_000, &event("a:1", 62.5, 9_000));
        // The first sample stays; the later ones replace the second while it is within 5 s of the first.
        assert_eq!(
            h.scores(0, 9_000, 100)["a:1"],
            vec![(1_000, 25.0), (9_000, 62.5)]
        );
        h.observe_event(10_000, &event("a:1", 75.0, 10_000));
        assert_eq!(
            h.scores(0, 10_000, 100)["a:1"],
            vec![(1_000, 25.0), (9_000, 62.5), (10_000, 75.0)]
        );
        let brokers = h.brokers(10_000);
        assert_eq!(brokers[0].summary.as_ref().unwrap().score, 75.0);
        assert_eq!(brokers[0].summary.as_ref().unwrap().cpu, 75.0);
    }

    #[test]
    fn samples_older_than_an_hour_go_and_slices_thin_them() {
        let mut h = History::new(0, ResourceWeights::default());
        for i in 0..1_000 {
            let at = i * 10_000;
            h.observe_event(at, &event("a:1", (i % 100) as f64, at));
        }
        let now = 999 * 10_000;
        let all = h.scores(0, now, 10_000);
        assert_eq!(
            all["a:1"].len(),
            361,
            "an hour of samples 10 s apart, both ends in"
        );
        assert_eq!(all["a:1"][0].0, now - RETENTION_MS);
        let thin = h.scores(now - RETENTION_MS, now, 60);
        assert!(thin["a:1"].len() <= 60, "{}", thin["a:1"].len());
        assert_eq!(
            thin["a:1"].last().unwrap().0,
            now,
            "the latest sample is kept"
        );
    }

    #[test]
    fn a_broker_that_went_is_listed_then_forgotten_and_new_ones_are_marked() {
        let mut h = History::new(0, ResourceWeights::default());
        h.observe_event(0, &event("a:1", 10.0, 0));
        h.observe_event(60_000, &event("b:2", 10.0, 60_000));
        let brokers = h.brokers(60_000);
        assert!(!brokers[0].new, "seen when the leader started");
        assert!(brokers[1].new);
        h.observe_event(
            70_000,
            &Event::BrokerGone {
                broker: "a:1".into(),
            },
        );
        assert_eq!(h.brokers(70_000)[0].gone_ms, Some(70_000));
        h.observe_event(70_000 + GONE_KEPT_MS, &event("b:2", 10.0, 0));
        let ids: Vec<String> = h.brokers(0).into_iter().map(|b| b.id).collect();
        assert_eq!(ids, vec!["b:2".to_owned()]);
    }

    #[test]
    fn a_move_is_completed_in_place_and_the_oldest_go_first() {
        let mut h = History::new(0, ResourceWeights::default());
        h.observe_record(&record("ns/x/0x0_0x1", AssignmentState::Assigning, 10, 10));
        h.observe_record(&record("ns/x/0x0_0x1", AssignmentState::Assigned, 10, 250));
        let moves = h.moves(10, |_| true);
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].completed_ms, Some(250));
        assert_eq!(moves[0].state, "assigned");
        // A later move of the same bundle is a new entry.
        h.observe_record(&record(
            "ns/x/0x0_0x1",
            AssignmentState::Assigning,
            900,
            900,
        ));
        assert_eq!(h.moves(10, |_| true).len(), 2);
        // One decided before it completed supersedes it.
        let mut other = record("ns/x/0x0_0x1", AssignmentState::Assigning, 901, 901);
        other.destination = "c:3".into();
        h.observe_record(&other);
        let states: Vec<String> = h.moves(10, |_| true).into_iter().map(|m| m.state).collect();
        assert_eq!(states, vec!["assigning", "superseded", "assigned"]);
        for i in 0..MAX_MOVES {
            h.observe_record(&record(
                &format!("ns/x/{i}"),
                AssignmentState::Assigning,
                1_000 + i as i64,
                1_000 + i as i64,
            ));
        }
        let moves = h.moves(usize::MAX, |_| true);
        assert_eq!(moves.len(), MAX_MOVES);
        assert_eq!(moves[0].bundle, format!("ns/x/{}", MAX_MOVES - 1));
        // The evicted bundle's completion finds no entry and starts one.
        h.observe_record(&record("ns/x/0x0_0x1", AssignmentState::Assigned, 900, 950));
        assert_eq!(h.moves(1, |_| true)[0].completed_ms, Some(950));
        let only = h.moves(10, |m| m.bundle == "ns/x/5");
        assert_eq!(only.len(), 1);
    }
}
