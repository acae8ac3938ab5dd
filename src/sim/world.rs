//! The starting state of a run — brokers, namespaces, topics with their traffic, initial owners and the
//! timeline — built from a [`Scenario`] and a seed, or from a decision-core [`Snapshot`] of a live cluster.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::Rng;

use super::scenario::{
    check_duration_minutes, BundleHistory, Distribution, Event, InitialPlacement, Scenario,
};
use super::SimError;
use crate::bundle::{
    BundleName, BundleRange, NamespaceBundles, FULL_LOWER_BOUND, FULL_UPPER_BOUND,
};
use crate::core::is_system_service_bundle;
use crate::core::random::{stream_rng, Stream};
use crate::core::snapshot::Snapshot;
use crate::model::BundleData;
use crate::runtime::synthetic::{Capacity, CostModel, Rates};

/// Virtual epoch of a scenario run: `now` of the first instant, epoch milliseconds (2023-11-14T22:13:20Z).
pub const SIM_EPOCH_MS: i64 = 1_700_000_000_000;

/// One broker.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerSpec {
    /// `host:port`.
    pub id: String,
    /// Hardware and base load.
    pub capacity: Capacity,
    /// When it first starts, ms after the start.
    pub join_ms: i64,
}

/// A traffic wave of one namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wave {
    /// Relative amplitude.
    pub amplitude: f64,
    /// Period, ms.
    pub period_ms: f64,
    /// Phase shift, ms.
    pub phase_ms: f64,
}

impl Wave {
    /// The multiplier at `t` ms after the start.
    pub fn at(&self, t: i64) -> f64 {
        1.0 + self.amplitude
            * (2.0 * std::f64::consts::PI * (t as f64 - self.phase_ms) / self.period_ms).sin()
    }
}

/// One namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceSpec {
    /// `tenant/ns`.
    pub name: String,
    /// Initial bundles.
    pub bundles: NamespaceBundles,
    /// Daily wave, if any.
    pub wave: Option<Wave>,
}

/// One topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSpec {
    /// Full name `persistent://tenant/ns/topic`.
    pub name: String,
    /// CRC32 of the name.
    pub hash: u64,
    /// Namespace index.
    pub ns: usize,
    /// Traffic at multiplier 1.
    pub base: Rates,
    /// Producers connected to it; its bundle reports the sum over its topics as `producerCount`.
    pub producers: i32,
    /// Consumers connected to it; its bundle reports the sum over its topics as `consumerCount`.
    pub consumers: i32,
}

/// A bundle at the start and its owner (broker index), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct InitialBundle {
    /// Namespace index (into [`World::namespaces`]).
    pub ns: usize,
    /// The bundle's hash range, one of its namespace's initial bundles.
    pub range: BundleRange,
    /// The owning broker's index (into [`World::brokers`]); `None` for a bundle nobody owns at the start,
    /// which the leader places when it is looked up.
    pub owner: Option<usize>,
}

/// A timeline entry.
#[derive(Debug, Clone, PartialEq)]
pub enum WorldEvent {
    /// Broker leaves for good.
    Stop {
        /// Broker index.
        broker: usize,
        /// Graceful (else a crash).
        graceful: bool,
    },
    /// Broker restarts: down for `down_ms`, back empty.
    Restart {
        /// Broker index.
        broker: usize,
        /// Downtime, ms.
        down_ms: i64,
    },
    /// Topics ramp linearly to `factor` over `ramp_ms`.
    Ramp {
        /// Topic indices.
        topics: Vec<usize>,
        /// Final multiplier.
        factor: f64,
        /// Ramp length, ms.
        ramp_ms: i64,
    },
}

/// Extra CPU on a broker during `[start_ms, end_ms)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike {
    /// Broker index.
    pub broker: usize,
    /// Start, ms after the start.
    pub start_ms: i64,
    /// End, ms after the start.
    pub end_ms: i64,
    /// CPU added while it lasts, in percentage points of the broker's CPU limit (40 adds 40 % of all its
    /// cores).
    pub points: f64,
}

/// Everything a run starts from.
#[derive(Debug, Clone)]
pub struct World {
    /// Scenario name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// `now` at the start, epoch ms.
    pub start_ms: i64,
    /// Length, ms.
    pub duration_ms: i64,
    /// Convergence is measured from here, ms after the start.
    pub converge_after_ms: i64,
    /// How long a moving bundle serves nowhere, ms.
    pub move_ms: i64,
    /// Cost model.
    pub model: CostModel,
    /// The scenario's broker.conf lines.
    pub settings_text: String,
    /// Every broker that is ever up; the other fields name brokers by their index here.
    pub brokers: Vec<BrokerSpec>,
    /// Every namespace; topics and bundles name theirs by its index here.
    pub namespaces: Vec<NamespaceSpec>,
    /// Every topic with its base traffic; timeline events name topics by their index here.
    pub topics: Vec<TopicSpec>,
    /// Bundles at the start.
    pub bundles: Vec<InitialBundle>,
    /// Stored bundle data at the start (`/loadbalance/bundle-data`).
    pub stored_bundle_data: BTreeMap<String, BundleData>,
    /// Recently unloaded bundles at the start (from a snapshot).
    pub recently_unloaded: BTreeMap<String, i64>,
    /// Timeline, sorted by time (ms after the start).
    pub events: Vec<(i64, WorldEvent)>,
    /// CPU spikes.
    pub spikes: Vec<Spike>,
}

/// A topic's bundle hash: CRC32 (IEEE) of its full name, as [`crate::bundle::topic_hash`].
pub fn crc32_topic_hash(full_name: &str) -> u64 {
    crc32fast::hash(full_name.as_bytes()) as u64
}

/// Most times one `cpuSpike` event may repeat (`everyMinutes`) within the simulated length.
pub const MAX_SPIKE_REPEATS: i64 = 1_000_000;

fn minutes(m: f64) -> i64 {
    (m * 60_000.0).round() as i64
}

fn pad(i: usize, count: usize) -> String {
    let width = count.to_string().len().max(2);
    format!("{i:0width$}")
}

fn bundle_index(nb: &NamespaceBundles, hash: u64) -> usize {
    let b = nb.boundaries();
    let i = b.partition_point(|x| *x <= hash);
    i.saturating_sub(1).min(nb.len() - 1)
}

fn invalid(scenario: &str, message: String) -> SimError {
    SimError::Scenario {
        origin: scenario.to_owned(),
        message,
    }
}

impl World {
    /// Builds the world of a scenario; `seed` drives every random choice of the generation.
    pub fn from_scenario(s: &Scenario, seed: u64) -> Result<Self, SimError> {
        let mut rng = stream_rng(seed, Stream::World, 0);
        let name = &s.name;
        s.check_limits().map_err(|m| invalid(name, m))?;
        // Brokers.
        let mut per_template: BTreeMap<&str, usize> = BTreeMap::new();
        for g in &s.brokers {
            *per_template.entry(g.name.as_str()).or_default() += g.count as usize;
        }
        let mut counters: BTreeMap<&str, usize> = BTreeMap::new();
        let mut brokers = Vec::new();
        for g in &s.brokers {
            for _ in 0..g.count {
                let c = counters.entry(g.name.as_str()).or_default();
                *c += 1;
                let host = g
                    .name
                    .replace("{i}", &pad(*c, per_template[g.name.as_str()]));
                brokers.push(BrokerSpec {
                    id: format!("{host}:{}", g.port),
                    capacity: Capacity {
                        cpu_cores: g.cpu_cores,
                        nic_gbps: g.nic_gbps,
                        base_cpu_cores: s.model.base_cpu_cores,
                    },
                    join_ms: minutes(g.join_at_minute),
                });
            }
        }
        let mut ids: Vec<&str> = brokers.iter().map(|b| b.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(invalid(name, format!("broker id {} is used twice", w[0])));
        }
        let find_broker = |n: &str| -> Result<usize, SimError> {
            brokers
                .iter()
                .position(|b| b.id == n || b.id.rsplit_once(':').is_some_and(|(h, _)| h == n))
                .ok_or_else(|| invalid(name, format!("unknown broker {n}")))
        };
        // Namespaces, topics and traffic.
        let mut namespaces: Vec<NamespaceSpec> = Vec::new();
        let mut topics: Vec<TopicSpec> = Vec::new();
        let mut bundles: Vec<InitialBundle> = Vec::new();
        for g in &s.namespaces {
            let first_bundle = bundles.len();
            let mut bundle_topics: Vec<Vec<usize>> = Vec::new();
            for i in 0..g.count as usize {
                let ns_name = g.name.replace("{i}", &pad(i, g.count as usize));
                if crate::bundle::NamespaceName::parse(&ns_name).is_err()
                    || namespaces.iter().any(|n| n.name == ns_name)
                {
                    return Err(invalid(
                        name,
                        format!("namespace name {ns_name} is invalid or used twice"),
                    ));
                }
                let nb = NamespaceBundles::initial(g.bundles as u64)
                    .map_err(|e| invalid(name, e.to_string()))?;
                let ns = namespaces.len();
                let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); nb.len()];
                let total = ((g.bundles as f64 * g.topics_per_bundle).round() as usize)
                    .max(g.bundles as usize);
                let mut add_topic = |topic: String, buckets: &mut Vec<Vec<usize>>| {
                    let hash = crc32_topic_hash(&topic);
                    let b = bundle_index(&nb, hash);
                    buckets[b].push(topics.len());
                    topics.push(TopicSpec {
                        name: topic,
                        hash,
                        ns,
                        base: Rates::default(),
                        producers: g.producers_per_topic as i32,
                        consumers: g.consumers_per_topic as i32,
                    });
                };
                for k in 0..total {
                    add_topic(format!("persistent://{ns_name}/topic-{k}"), &mut buckets);
                }
                // Every bundle gets at least one topic: more names until each empty bundle is hit.
                let mut empty = buckets.iter().filter(|b| b.is_empty()).count();
                let mut k = 0u64;
                while empty > 0 {
                    let topic = format!("persistent://{ns_name}/topic-x{k}");
                    let hash = crc32_topic_hash(&topic);
                    if buckets[bundle_index(&nb, hash)].is_empty() {
                        add_topic(topic, &mut buckets);
                        empty -= 1;
                    }
                    k += 1;
                    if k > 50_000_000 {
                        return Err(invalid(
                            name,
                            format!("cannot give every bundle of {ns_name} a topic"),
                        ));
                    }
                }
                for (range, t) in nb.ranges().zip(buckets) {
                    bundles.push(InitialBundle {
                        ns,
                        range,
                        owner: None,
                    });
                    bundle_topics.push(t);
                }
                let wave = g.diurnal.map(|d| Wave {
                    amplitude: d.amplitude,
                    period_ms: d.period_minutes * 60_000.0,
                    phase_ms: i as f64 * d.phase_step_minutes * 60_000.0,
                });
                namespaces.push(NamespaceSpec {
                    name: ns_name,
                    bundles: nb,
                    wave,
                });
            }
            let n = bundle_topics.len();
            let weights: Vec<f64> = match &g.distribution {
                Distribution::Uniform { jitter } => (0..n)
                    .map(|_| 1.0 + jitter * (2.0 * rng.random::<f64>() - 1.0))
                    .collect(),
                Distribution::Zipf { exponent } => {
                    let mut ranks: Vec<usize> = (1..=n).collect();
                    ranks.shuffle(&mut rng);
                    ranks.iter().map(|r| (*r as f64).powf(-exponent)).collect()
                }
            };
            let sum: f64 = weights.iter().sum();
            for (j, ts) in bundle_topics.iter().enumerate() {
                let rate = if sum > 0.0 {
                    g.msg_rate_in * weights[j] / sum
                } else {
                    0.0
                };
                let share = rate / ts.len() as f64;
                for t in ts {
                    topics[*t].base = Rates {
                        rate_in: share,
                        rate_out: share * g.fan_out,
                        tp_in: share * g.msg_size_bytes,
                        tp_out: share * g.fan_out * g.msg_size_bytes,
                    };
                }
            }
            debug_assert_eq!(bundles.len() - first_bundle, n);
        }
        // Initial placement.
        let present: Vec<usize> = (0..brokers.len())
            .filter(|i| brokers[*i].join_ms == 0)
            .collect();
        if present.is_empty() {
            return Err(invalid(name, "no broker is present at minute 0".into()));
        }
        match &s.placement {
            InitialPlacement::RoundRobin => {
                for (j, b) in bundles.iter_mut().enumerate() {
                    b.owner = Some(present[j % present.len()]);
                }
            }
            InitialPlacement::Random => {
                for b in bundles.iter_mut() {
                    b.owner = Some(present[rng.random_range(0..present.len())]);
                }
            }
            InitialPlacement::Brokers { brokers: list } => {
                let mut on = Vec::new();
                for n in list {
                    let i = find_broker(n)?;
                    if brokers[i].join_ms != 0 {
                        return Err(invalid(
                            name,
                            format!("placement broker {n} is not present at minute 0"),
                        ));
                    }
                    on.push(i);
                }
                for (j, b) in bundles.iter_mut().enumerate() {
                    b.owner = Some(on[j % on.len()]);
                }
            }
        }
        // Timeline.
        let duration_ms = minutes(s.duration_minutes);
        let mut events: Vec<(i64, WorldEvent)> = Vec::new();
        let mut spikes = Vec::new();
        for e in &s.events {
            match e {
                Event::Stop {
                    at_minute,
                    brokers: list,
                    graceful,
                } => {
                    for n in list {
                        events.push((
                            minutes(*at_minute),
                            WorldEvent::Stop {
                                broker: find_broker(n)?,
                                graceful: *graceful,
                            },
                        ));
                    }
                }
                Event::Restart {
                    at_minute,
                    brokers: list,
                    every_minutes,
                    down_seconds,
                } => {
                    let order: Vec<usize> = if list.is_empty() {
                        let mut p = present.clone();
                        p.sort_by(|a, b| brokers[*a].id.cmp(&brokers[*b].id));
                        p
                    } else {
                        list.iter()
                            .map(|n| find_broker(n))
                            .collect::<Result<_, _>>()?
                    };
                    for (k, b) in order.into_iter().enumerate() {
                        events.push((
                            minutes(at_minute + k as f64 * every_minutes),
                            WorldEvent::Restart {
                                broker: b,
                                down_ms: (down_seconds * 1000.0).round() as i64,
                            },
                        ));
                    }
                }
                Event::Traffic {
                    at_minute,
                    namespace,
                    bundle,
                    factor,
                    ramp_minutes,
                } => {
                    let ns = namespaces
                        .iter()
                        .position(|n| &n.name == namespace)
                        .ok_or_else(|| invalid(name, format!("unknown namespace {namespace}")))?;
                    let range = bundle
                        .as_deref()
                        .map(BundleRange::parse)
                        .transpose()
                        .map_err(|e| invalid(name, e.to_string()))?;
                    if let Some(r) = range {
                        if !namespaces[ns].bundles.contains_range(r) {
                            return Err(invalid(
                                name,
                                format!("{r} is not an initial bundle of {namespace}"),
                            ));
                        }
                    }
                    let chosen: Vec<usize> = topics
                        .iter()
                        .enumerate()
                        .filter(|(_, t)| t.ns == ns && range.map_or(true, |r| r.contains(t.hash)))
                        .map(|(i, _)| i)
                        .collect();
                    events.push((
                        minutes(*at_minute),
                        WorldEvent::Ramp {
                            topics: chosen,
                            factor: *factor,
                            ramp_ms: minutes(*ramp_minutes),
                        },
                    ));
                }
                Event::CpuSpike {
                    at_minute,
                    broker,
                    points,
                    duration_seconds,
                    every_minutes,
                } => {
                    let b = find_broker(broker)?;
                    let len = (duration_seconds * 1000.0).round() as i64;
                    let mut start = minutes(*at_minute);
                    if let Some(every) = every_minutes.map(minutes).filter(|e| *e > 0) {
                        let repeats = (duration_ms - start).max(0) / every;
                        if repeats > MAX_SPIKE_REPEATS {
                            return Err(invalid(
                                name,
                                format!(
                                    "cpuSpike on {broker} everyMinutes {} repeats {repeats} times, above the limit of {MAX_SPIKE_REPEATS}",
                                    every_minutes.unwrap_or_default()
                                ),
                            ));
                        }
                    }
                    loop {
                        spikes.push(Spike {
                            broker: b,
                            start_ms: start,
                            end_ms: start + len,
                            points: *points,
                        });
                        match every_minutes {
                            Some(every) if minutes(*every) > 0 => start += minutes(*every),
                            _ => break,
                        }
                        if start >= duration_ms {
                            break;
                        }
                    }
                }
            }
        }
        events.sort_by_key(|(t, _)| *t);
        let mut world = World {
            name: s.name.clone(),
            description: s.description.clone(),
            start_ms: SIM_EPOCH_MS,
            duration_ms,
            converge_after_ms: minutes(s.converge_after_minutes),
            move_ms: (s.move_seconds * 1000.0).round() as i64,
            model: s.model,
            settings_text: s.settings_text(),
            brokers,
            namespaces,
            topics,
            bundles,
            stored_bundle_data: BTreeMap::new(),
            recently_unloaded: BTreeMap::new(),
            events,
            spikes,
        };
        if s.bundle_history == BundleHistory::Warm {
            world.stored_bundle_data = world.warm_bundle_data();
        }
        Ok(world)
    }

    /// Full name of an initial bundle.
    pub fn bundle_name(&self, b: &InitialBundle) -> String {
        format!("{}/{}", self.namespaces[b.ns].name, b.range)
    }

    /// Bundle data with full windows at every initial bundle's starting traffic.
    fn warm_bundle_data(&self) -> BTreeMap<String, BundleData> {
        let mut per_bundle: Vec<Rates> = vec![Rates::default(); self.bundles.len()];
        let mut topic_count = vec![0i32; self.bundles.len()];
        let index: BTreeMap<(usize, u64), usize> = self
            .bundles
            .iter()
            .enumerate()
            .map(|(i, b)| ((b.ns, b.range.lower()), i))
            .collect();
        for t in &self.topics {
            let ns = &self.namespaces[t.ns];
            let range = ns.bundles.find(t.hash);
            let i = index[&(t.ns, range.lower())];
            let m = ns.wave.map_or(1.0, |w| w.at(0));
            per_bundle[i].add_scaled(&t.base, m);
            topic_count[i] += 1;
        }
        self.bundles
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let r = per_bundle[i];
                let mut d = BundleData::default();
                for w in [&mut d.short_term_data, &mut d.long_term_data] {
                    w.num_samples = w.max_samples;
                    w.msg_rate_in = r.rate_in;
                    w.msg_rate_out = r.rate_out;
                    w.msg_throughput_in = r.tp_in;
                    w.msg_throughput_out = r.tp_out;
                }
                d.topics = topic_count[i];
                (self.bundle_name(b), d)
            })
            .collect()
    }

    /// Builds a world from a live cluster's snapshot: brokers with the capacities their reports give (CPU limit
    /// / 100 cores, NIC limit in Gbit/s; 8 cores and 10 Gbit/s when a limit is unknown), the model's CPU costs
    /// scaled by one cluster-wide factor fitted by least squares to the reported CPU (capped so no broker's
    /// traffic costs more than its CPU) and each broker's base CPU set so the model reproduces its reported CPU
    /// at the start, every non-system bundle of every report on
    /// its reporter with the traffic of its `lastStats` spread evenly over its topics (the snapshot's
    /// `bundleTopics` when listed, else generated names hashing into the bundle), the snapshot's bundle data as
    /// the stored data, no events. Namespace boundaries come from the snapshot, else from the bundles seen
    /// (gaps become bundles without topics).
    pub fn from_snapshot(
        snap: &Snapshot,
        name: &str,
        duration_minutes: f64,
        model: CostModel,
    ) -> Result<Self, SimError> {
        let err = |m: String| invalid(name, m);
        check_duration_minutes("the simulated length", duration_minutes).map_err(err)?;
        let policies = snap.policies().map_err(|e| err(e.to_string()))?;
        if snap.brokers.is_empty() {
            return Err(err("the snapshot has no brokers".into()));
        }
        // Calibration: scale the per-message and per-byte CPU costs by one cluster-wide factor k fitted by
        // least squares to the reported CPU (cores = base + k × traffic cost), capped so that no broker's
        // traffic costs more than its reported CPU; the rest of each broker's CPU is its own base, so the model
        // reproduces every report at the start.
        let served: Vec<(f64, f64)> = snap
            .brokers
            .values()
            .map(|r| {
                let traffic = Rates {
                    rate_in: r.msg_rate_in,
                    rate_out: r.msg_rate_out,
                    tp_in: r.msg_throughput_in,
                    tp_out: r.msg_throughput_out,
                };
                (model.traffic_cores(&traffic), r.cpu.usage.max(0.0) / 100.0)
            })
            .collect();
        let n = served.len() as f64;
        let mean_c = served.iter().map(|(c, _)| c).sum::<f64>() / n;
        let mean_y = served.iter().map(|(_, y)| y).sum::<f64>() / n;
        let var = served
            .iter()
            .map(|(c, _)| (c - mean_c).powi(2))
            .sum::<f64>();
        let cov = served
            .iter()
            .map(|(c, y)| (c - mean_c) * (y - mean_y))
            .sum::<f64>();
        let mut k = if var > 0.0 { cov / var } else { f64::NAN };
        if !(k.is_finite() && k > 0.0) {
            k = if mean_c > 0.0 {
                ((mean_y - model.base_cpu_cores) / mean_c).max(0.0)
            } else {
                1.0
            };
        }
        // No broker may need a negative base: k is capped so traffic explains at most each broker's CPU.
        let cap = served
            .iter()
            .filter(|(c, _)| *c > 0.0)
            .map(|(c, y)| y / c)
            .fold(f64::INFINITY, f64::min);
        k = k.min(cap);
        let mut model = model;
        model.cpu_micros_per_message *= k;
        model.cpu_micros_per_kib *= k;
        let mut brokers = Vec::new();
        for ((id, r), (cost, used)) in snap.brokers.iter().zip(&served) {
            let cores = if r.cpu.limit > 0.0 {
                r.cpu.limit / 100.0
            } else {
                8.0
            };
            let nic_limit = r.bandwidth_in.limit.max(r.bandwidth_out.limit);
            let nic = if nic_limit > 0.0 {
                nic_limit / 1e6
            } else {
                10.0
            };
            brokers.push(BrokerSpec {
                id: id.clone(),
                capacity: Capacity {
                    cpu_cores: cores,
                    nic_gbps: nic,
                    base_cpu_cores: (used - k * cost).max(0.0),
                },
                join_ms: 0,
            });
        }

        // Bundles per namespace.
        let mut seen: BTreeMap<String, Vec<(BundleRange, usize, String)>> = BTreeMap::new();
        for (bi, (_, r)) in snap.brokers.iter().enumerate() {
            for bundle in r.last_stats.keys() {
                if is_system_service_bundle(bundle) {
                    continue;
                }
                let parsed = BundleName::parse(bundle).map_err(|e| err(e.to_string()))?;
                seen.entry(parsed.namespace().to_string())
                    .or_default()
                    .push((parsed.range(), bi, bundle.clone()));
            }
        }
        let mut namespaces = Vec::new();
        let mut topics: Vec<TopicSpec> = Vec::new();
        let mut bundles = Vec::new();
        for (ns_name, list) in &seen {
            let nb = match policies
                .namespaces
                .get(ns_name)
                .and_then(|p| p.bundles.clone())
            {
                Some(nb) => nb,
                None => {
                    let mut points: Vec<u64> = vec![FULL_LOWER_BOUND, FULL_UPPER_BOUND];
                    for (r, _, _) in list {
                        points.push(r.lower());
                        points.push(r.upper());
                    }
                    points.sort_unstable();
                    points.dedup();
                    NamespaceBundles::from_boundaries(points).map_err(|e| err(e.to_string()))?
                }
            };
            let ns = namespaces.len();
            let owners: BTreeMap<u64, (usize, &String)> =
                list.iter().map(|(r, b, n)| (r.lower(), (*b, n))).collect();
            for range in nb.ranges() {
                let Some((owner, bundle)) = owners.get(&range.lower()).copied() else {
                    bundles.push(InitialBundle {
                        ns,
                        range,
                        owner: None,
                    });
                    continue;
                };
                if !nb.contains_range(range) {
                    return Err(err(format!("{bundle} is not a bundle of {ns_name}")));
                }
                let stats = snap.brokers.values().nth(owner).expect("index").last_stats[bundle];
                let listed: Vec<(String, f64, f64)> = snap
                    .bundle_topics
                    .get(bundle)
                    .map(|m| {
                        m.iter()
                            .map(|(n, t)| (n.clone(), t.msg_rate, t.throughput))
                            .collect()
                    })
                    .unwrap_or_default();
                let names: Vec<(String, Option<(f64, f64)>)> = if listed.is_empty() {
                    let want = stats.topics.clamp(1, 5000) as usize;
                    let mut out = Vec::new();
                    let mut k = 0u64;
                    while out.len() < want && k < 20_000_000 {
                        let n = format!("persistent://{ns_name}/sim-topic-{k}");
                        if range.contains(crc32_topic_hash(&n)) {
                            out.push((n, None));
                        }
                        k += 1;
                    }
                    if out.is_empty() {
                        return Err(err(format!(
                            "cannot generate a topic name that hashes into {bundle}"
                        )));
                    }
                    out
                } else {
                    listed
                        .into_iter()
                        .map(|(n, r, t)| (n, Some((r, t))))
                        .collect()
                };
                let total_rate = stats.total_msg_rate();
                let total_tp = stats.total_msg_throughput();
                let count = names.len() as f64;
                for (topic, traffic) in names {
                    let hash = crc32_topic_hash(&topic);
                    if !range.contains(hash) {
                        return Err(err(format!("topic {topic} does not hash into {bundle}")));
                    }
                    let (fr, ft) = match traffic {
                        Some((r, t)) => (
                            if total_rate > 0.0 {
                                r / total_rate
                            } else {
                                1.0 / count
                            },
                            if total_tp > 0.0 {
                                t / total_tp
                            } else {
                                1.0 / count
                            },
                        ),
                        None => (1.0 / count, 1.0 / count),
                    };
                    topics.push(TopicSpec {
                        name: topic,
                        hash,
                        ns,
                        base: Rates {
                            rate_in: stats.msg_rate_in * fr,
                            rate_out: stats.msg_rate_out * fr,
                            tp_in: stats.msg_throughput_in * ft,
                            tp_out: stats.msg_throughput_out * ft,
                        },
                        producers: (stats.producer_count as f64 / count).round() as i32,
                        consumers: (stats.consumer_count as f64 / count).round() as i32,
                    });
                }
                bundles.push(InitialBundle {
                    ns,
                    range,
                    owner: Some(owner),
                });
            }
            namespaces.push(NamespaceSpec {
                name: ns_name.clone(),
                bundles: nb,
                wave: None,
            });
        }
        Ok(World {
            name: name.to_owned(),
            description: format!(
                "{} brokers and {} bundles from a snapshot taken at {}",
                brokers.len(),
                bundles.iter().filter(|b| b.owner.is_some()).count(),
                snap.now
            ),
            start_ms: snap.now,
            duration_ms: minutes(duration_minutes),
            converge_after_ms: 0,
            move_ms: 5_000,
            model,
            settings_text: String::new(),
            brokers,
            namespaces,
            topics,
            bundles,
            stored_bundle_data: snap.bundle_data.clone(),
            recently_unloaded: snap.recently_unloaded.clone(),
            events: Vec::new(),
            spikes: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        Scenario::from_json(text, "test").unwrap()
    }

    #[test]
    fn generation_is_seeded_and_gives_every_bundle_a_topic() {
        let s = Scenario::built_in("skewed-start").unwrap();
        let a = World::from_scenario(&s, 1).unwrap();
        let b = World::from_scenario(&s, 1).unwrap();
        let c = World::from_scenario(&s, 2).unwrap();
        assert_eq!(a.topics, b.topics);
        assert_ne!(
            a.topics, c.topics,
            "the Zipf ranks are shuffled by the seed"
        );
        assert_eq!(a.bundles.len(), 1000);
        assert_eq!(a.brokers[0].id, "broker-01:8080");
        assert_eq!(a.brokers[9].id, "broker-10:8080");
        let mut per_bundle = vec![0usize; a.bundles.len()];
        let mut total_in = 0.0;
        for t in &a.topics {
            let ns = &a.namespaces[t.ns];
            let r = ns.bundles.find(t.hash);
            let i = a
                .bundles
                .iter()
                .position(|b| b.ns == t.ns && b.range == r)
                .unwrap();
            per_bundle[i] += 1;
            total_in += t.base.rate_in;
        }
        assert!(per_bundle.iter().all(|c| *c >= 1));
        assert!((total_in - 182_000.0).abs() < 1e-6, "{total_in}");
        let owners: std::collections::BTreeSet<usize> =
            a.bundles.iter().filter_map(|b| b.owner).collect();
        assert_eq!(owners.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn timeline_restarts_spikes_and_ramps() {
        let s = scenario(
            r#"{"name":"t","durationMinutes":30,"brokers":[{"count":3},{"count":1,"name":"late-{i}","joinAtMinute":5}],
                "namespaces":[{"name":"t/n-{i}","count":2,"bundles":4,"msgRateIn":1000}],
                "events":[{"kind":"restart","atMinute":2,"everyMinutes":3,"downSeconds":30},
                          {"kind":"cpuSpike","atMinute":1,"broker":"broker-02","points":40,"durationSeconds":90,"everyMinutes":10},
                          {"kind":"traffic","atMinute":4,"namespace":"t/n-01","bundle":"0x40000000_0x80000000","factor":3},
                          {"kind":"stop","atMinute":20,"brokers":["late-01:8080"],"graceful":false}]}"#,
        );
        let w = World::from_scenario(&s, 0).unwrap();
        assert_eq!(w.brokers[3].id, "late-01:8080");
        assert_eq!(w.brokers[3].join_ms, 300_000);
        let restarts: Vec<(i64, usize)> = w
            .events
            .iter()
            .filter_map(|(t, e)| match e {
                WorldEvent::Restart { broker, down_ms } => {
                    assert_eq!(*down_ms, 30_000);
                    Some((*t, *broker))
                }
                _ => None,
            })
            .collect();
        assert_eq!(restarts, [(120_000, 0), (300_000, 1), (480_000, 2)]);
        assert_eq!(w.spikes.len(), 3);
        assert_eq!(w.spikes[1].start_ms, 660_000);
        assert_eq!(w.spikes[1].end_ms, 750_000);
        let ramp = w
            .events
            .iter()
            .find_map(|(_, e)| match e {
                WorldEvent::Ramp { topics, .. } => Some(topics.clone()),
                _ => None,
            })
            .unwrap();
        assert!(!ramp.is_empty());
        assert!(ramp.iter().all(
            |t| w.topics[*t].ns == 1 && (0x4000_0000..0x8000_0000).contains(&w.topics[*t].hash)
        ));
        assert!(matches!(
            w.events.last().unwrap().1,
            WorldEvent::Stop {
                broker: 3,
                graceful: false
            }
        ));
    }

    #[test]
    fn bad_references_are_errors() {
        let bad = scenario(
            r#"{"name":"t","durationMinutes":3,"brokers":[{"count":2}],"namespaces":[],
                "events":[{"kind":"stop","atMinute":1,"brokers":["broker-09"]}]}"#,
        );
        assert!(World::from_scenario(&bad, 0)
            .unwrap_err()
            .to_string()
            .contains("unknown broker broker-09"));
        let late = scenario(
            r#"{"name":"t","durationMinutes":3,"brokers":[{"count":2,"joinAtMinute":1}],"namespaces":[]}"#,
        );
        assert!(World::from_scenario(&late, 0).is_err());
    }

    #[test]
    fn a_spike_repeated_too_often_and_a_too_long_snapshot_run_are_errors() {
        let often = scenario(
            r#"{"name":"t","durationMinutes":525600,"brokers":[{"count":1}],"namespaces":[],
                "events":[{"kind":"cpuSpike","atMinute":0,"broker":"broker-01","points":10,"durationSeconds":1,"everyMinutes":0.01}]}"#,
        );
        assert_eq!(
            World::from_scenario(&often, 0).unwrap_err().to_string(),
            "scenario t: cpuSpike on broker-01 everyMinutes 0.01 repeats 52560000 times, above the limit of 1000000"
        );
        let mut long =
            scenario(r#"{"name":"t","durationMinutes":1,"brokers":[{"count":1}],"namespaces":[]}"#);
        long.duration_minutes = 1e12;
        assert!(World::from_scenario(&long, 0)
            .unwrap_err()
            .to_string()
            .contains("durationMinutes 1000000000000 is above the limit of 525600 minutes"));
        let snap = Snapshot::from_json(include_str!("../../examples/snapshot.json")).unwrap();
        let e = World::from_snapshot(&snap, "s", 6e5, CostModel::default())
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "scenario s: the simulated length 600000 is above the limit of 525600 minutes (365 days)"
        );
        assert!(World::from_snapshot(&snap, "s", 60.0, CostModel::default()).is_ok());
    }
}
