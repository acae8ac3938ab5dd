//! [`World::from_snapshot`]: a world rebuilt from a decision-core snapshot of a live cluster — brokers with
//! the capacities their reports give, the cost model calibrated to the reported CPU, every bundle on its
//! reporter with its reported traffic spread over its topics, and the snapshot's stored data.

use std::collections::BTreeMap;

use super::{
    crc32_topic_hash, invalid, minutes, BrokerSpec, InitialBundle, NamespaceSpec, TopicSpec, World,
};
use crate::bundle::{
    BundleName, BundleRange, NamespaceBundles, FULL_LOWER_BOUND, FULL_UPPER_BOUND,
};
use crate::core::is_system_service_bundle;
use crate::core::snapshot::Snapshot;
use crate::runtime::synthetic::{Capacity, CostModel, Rates};
use crate::sim::scenario::check_duration_minutes;
use crate::sim::SimError;

/// Topic names tried, over a whole snapshot, to name the topics of bundles whose topics it does not list
/// (each name hashes into a bundle with the probability of the bundle's width): about 10 s of CRC32.
const NAME_TRIES: u64 = 50_000_000;

/// Names tried for a bundle once it has one (counting from its first try): the 5,000 names a bundle may want
/// in a bundle of 1/400 of the hash space, about 500 in one of 1/4,000.
const EXTRA_NAME_TRIES: u64 = 2_000_000;

impl World {
    /// Builds a world from a live cluster's snapshot: brokers with the capacities their reports give (CPU limit
    /// / 100 cores, NIC limit in Gbit/s; 8 cores and 10 Gbit/s when a limit is unknown), the model's CPU costs
    /// scaled by one cluster-wide factor fitted by least squares to the reported CPU (capped so no broker's
    /// traffic costs more than its CPU) and each broker's base CPU set so the model reproduces its reported CPU
    /// at the start, every non-system bundle of every report on
    /// its reporter with the traffic of its `lastStats` spread evenly over its topics (the snapshot's
    /// `bundleTopics` when listed, else generated names hashing into the bundle), the snapshot's bundle data as
    /// the stored data, its recently unloaded bundles and brokers and its extensible EMAs as the first leader's
    /// state, no events. Namespace boundaries come from the snapshot, else from the bundles seen (gaps become
    /// bundles without topics); anti-affinity groups and failure domains come from the snapshot (its isolation
    /// policies are not simulated).
    /// Naming topics is bounded: at most `NAME_TRIES` names are tried over the whole snapshot, so a snapshot of
    /// many very narrow bundles without `bundleTopics` is refused in seconds, not hours.
    pub fn from_snapshot(
        snap: &Snapshot,
        name: &str,
        duration_minutes: f64,
        model: CostModel,
    ) -> Result<Self, SimError> {
        Self::from_snapshot_within(snap, name, duration_minutes, model, NAME_TRIES)
    }

    /// [`World::from_snapshot`] with `name_tries` names to try in all.
    pub(super) fn from_snapshot_within(
        snap: &Snapshot,
        name: &str,
        duration_minutes: f64,
        model: CostModel,
        name_tries: u64,
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
                failure_domain: policies.domains.get(id).cloned(),
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
        // Names tried for bundles without listed topics, over the whole snapshot (see `NAME_TRIES`).
        let mut tries_left = name_tries;
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
                    // Once the bundle has a name, more are worth only a bounded search: a narrow bundle
                    // gets fewer simulated topics rather than seconds of hashing.
                    while out.len() < want
                        && tries_left > 0
                        && (out.is_empty() || k < EXTRA_NAME_TRIES)
                    {
                        let n = format!("persistent://{ns_name}/sim-topic-{k}");
                        if range.contains(crc32_topic_hash(&n)) {
                            out.push((n, None));
                        }
                        k += 1;
                        tries_left -= 1;
                    }
                    if out.is_empty() {
                        return Err(err(format!(
                            "cannot generate a topic name that hashes into {bundle} within {name_tries} \
                             tries for the whole snapshot (its bundles are too narrow or too many): list its \
                             topics in bundleTopics"
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
                anti_affinity_group: policies.anti_affinity_group(ns_name).map(str::to_owned),
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
            recently_unloaded_brokers: snap.recently_unloaded_brokers.clone(),
            extensible_ema: snap
                .extensible_emas()
                .map(|(b, e)| (b.clone(), e))
                .collect(),
            events: Vec::new(),
            spikes: Vec::new(),
        })
    }
}
