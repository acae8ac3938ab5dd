//! [`World::from_scenario`]: a world generated from a scenario and a seed — brokers from their templates,
//! namespaces with topics hashed into every initial bundle and traffic spread by the scenario's
//! distribution, the initial placement, the timeline (stops, restarts, traffic ramps, CPU spikes) and, for a
//! warm start, stored bundle data at the starting traffic.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::Rng;

use super::{
    crc32_topic_hash, invalid, minutes, BrokerSpec, InitialBundle, NamespaceSpec, Spike, TopicSpec,
    Wave, World, WorldEvent, MAX_SPIKE_REPEATS, SIM_EPOCH_MS,
};
use crate::bundle::{BundleRange, NamespaceBundles};
use crate::core::random::{stream_rng, Stream};
use crate::model::BundleData;
use crate::runtime::synthetic::{Capacity, Rates};
use crate::sim::scenario::{BundleHistory, Distribution, Event, InitialPlacement, Scenario};
use crate::sim::SimError;

fn pad(i: usize, count: usize) -> String {
    let width = count.to_string().len().max(2);
    format!("{i:0width$}")
}

fn bundle_index(nb: &NamespaceBundles, hash: u64) -> usize {
    let b = nb.boundaries();
    let i = b.partition_point(|x| *x <= hash);
    i.saturating_sub(1).min(nb.len() - 1)
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
                    failure_domain: g.failure_domain.clone(),
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
                    phase_ms: (d.phase_minutes + i as f64 * d.phase_step_minutes) * 60_000.0,
                });
                let anti_affinity_group = g
                    .anti_affinity_group
                    .as_ref()
                    .map(|t| t.replace("{i}", &pad(i, g.count as usize)));
                namespaces.push(NamespaceSpec {
                    name: ns_name,
                    bundles: nb,
                    wave,
                    anti_affinity_group,
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
                    graceful,
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
                                graceful: *graceful,
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
            recently_unloaded_brokers: BTreeMap::new(),
            extensible_ema: BTreeMap::new(),
            events,
            spikes,
        };
        if s.bundle_history == BundleHistory::Warm {
            world.stored_bundle_data = world.warm_bundle_data();
        }
        Ok(world)
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
}
