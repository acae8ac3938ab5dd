//! Scenario files: the JSON format users write (schema `metadata-schemas/Scenario.schema.json`) and the
//! built-in scenarios, which are files in the same format under `scenarios/`.
//!
//! ```json
//! {
//!   "name": "scale-out",
//!   "description": "5 brokers at 60 %; 5 more join at minute 10.",
//!   "durationMinutes": 70,
//!   "convergeAfterMinutes": 10,
//!   "moveSeconds": 5,
//!   "settings": { "loadBalancerSheddingIntervalMinutes": 1 },
//!   "model": { "cpuMicrosPerMessage": 15 },
//!   "brokers": [
//!     { "count": 5, "cpuCores": 8, "nicGbps": 10 },
//!     { "count": 5, "cpuCores": 8, "nicGbps": 10, "joinAtMinute": 10 }
//!   ],
//!   "namespaces": [
//!     { "name": "tenant/ns-{i}", "count": 10, "bundles": 50, "topicsPerBundle": 4, "msgRateIn": 200000,
//!       "msgSizeBytes": 2048, "distribution": { "kind": "uniform", "jitter": 0.3 } }
//!   ],
//!   "placement": { "kind": "roundRobin" },
//!   "events": [ { "kind": "stop", "atMinute": 30, "brokers": ["broker-03"] } ]
//! }
//! ```
//!
//! * `brokers`: groups; ids are `name` with `{i}` replaced by a 1-based index per name template, zero-padded to
//!   the width of that template's count (at least 2), then `:port` (`broker-01:8080`). Events name brokers with
//!   or without the port.
//! * `failureDomain` (broker group): the failure domain its brokers belong to (Pulsar's
//!   `/admin/clusters/<cluster>/failureDomain/<domain>`); brokers without one are in `default`. Placement
//!   uses domains only when the settings enable `failureDomainsEnabled`.
//! * `namespaces`: groups of `count` namespaces (`{i}` is 0-based, padded likewise), each with `bundles`
//!   initial bundles (Pulsar's initial boundaries) and `bundles × topicsPerBundle` topics named
//!   `persistent://<ns>/topic-<k>` that land in bundles by their CRC32 hash (every bundle gets at least one).
//!   `msgRateIn` is the group's total; it is spread over the group's bundles by `distribution` (Zipf by rank
//!   with a seeded shuffle, or uniform with ± `jitter`) and evenly over each bundle's topics. Each message has
//!   `msgSizeBytes`; `fanOut` subscriptions read it (msg out = in × fanOut); `producersPerTopic` and
//!   `consumersPerTopic` count sessions. `diurnal` multiplies a namespace's traffic by
//!   `1 + amplitude × sin(2π (t − phaseMinutes − i × phaseStepMinutes) / periodMinutes)`. `antiAffinityGroup` sets each
//!   namespace's `namespaceAntiAffinityGroup` (its local policies), with `{i}` replaced as in `name`: two
//!   namespace groups of the same count and the template `g-{i}` put their i-th namespaces in group `g-<i>`;
//!   a template without `{i}` puts the whole group in one anti-affinity group.
//! * `placement`: where the bundles start: `roundRobin` over the brokers present at minute 0 (bundles in
//!   namespace then hash order), `random` (seeded), or `brokers` (round robin over the listed ones).
//! * `events`: `stop` (brokers leave for good; `graceful: false` is a crash noticed after the session
//!   timeout), `restart` (brokers go down for `downSeconds` one after the other, `everyMinutes` apart, and come
//!   back empty; `graceful: false` crashes them, and a crashed broker comes back once its session expired
//!   too), `traffic` (the topics of one bundle — or a whole namespace — ramp linearly to `factor` times
//!   their traffic over `rampMinutes`), `cpuSpike` (a broker uses `points` more CPU for `durationSeconds`,
//!   repeated `everyMinutes` when given).
//! * `settings`: `broker.conf` keys for this scenario; a `--config` file overrides them.
//! * `bundleHistory`: `cold` (default: no stored bundle data; windows start with the first report) or `warm`
//!   (the store holds every bundle's starting traffic with full windows, as in a long-running cluster — long-term
//!   averages then move slowly and splits driven by them take hours, as in Pulsar).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;

use super::SimError;
use crate::runtime::synthetic::CostModel;

/// The scenario schema text.
pub const SCHEMA: &str = include_str!("../../metadata-schemas/Scenario.schema.json");

/// Built-in scenarios: name and file text, in suite order.
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "skewed-start",
        include_str!("../../scenarios/skewed-start.json"),
    ),
    (
        "rolling-restart",
        include_str!("../../scenarios/rolling-restart.json"),
    ),
    ("scale-out", include_str!("../../scenarios/scale-out.json")),
    ("scale-in", include_str!("../../scenarios/scale-in.json")),
    (
        "hot-bundle",
        include_str!("../../scenarios/hot-bundle.json"),
    ),
    (
        "transient-spike",
        include_str!("../../scenarios/transient-spike.json"),
    ),
    (
        "heterogeneous",
        include_str!("../../scenarios/heterogeneous.json"),
    ),
    ("diurnal", include_str!("../../scenarios/diurnal.json")),
    (
        "heterogeneous-large",
        include_str!("../../scenarios/heterogeneous-large.json"),
    ),
    (
        "skew-crash",
        include_str!("../../scenarios/skew-crash.json"),
    ),
    (
        "anti-affinity",
        include_str!("../../scenarios/anti-affinity.json"),
    ),
    (
        "scale-out-2x",
        include_str!("../../scenarios/scale-out-2x.json"),
    ),
    (
        "diurnal-hot-tenant",
        include_str!("../../scenarios/diurnal-hot-tenant.json"),
    ),
    ("large", include_str!("../../scenarios/large.json")),
];

/// Most brokers a scenario may have, over all groups.
pub const MAX_BROKERS: u64 = 100_000;
/// Most namespaces a scenario may have, over all groups.
pub const MAX_NAMESPACES: u64 = 1_000_000;
/// Most initial bundles a scenario may have, over all namespaces.
pub const MAX_BUNDLES: u64 = 10_000_000;
/// Most topics a scenario may have, over all namespaces (`bundles × topicsPerBundle`, at least one a bundle).
pub const MAX_TOPICS: u64 = 20_000_000;
/// Longest simulated time, minutes: 365 days (`durationMinutes`, `simulate --minutes`).
pub const MAX_DURATION_MINUTES: f64 = 365.0 * 24.0 * 60.0;

/// Checks a simulated length: above 0 and at most [`MAX_DURATION_MINUTES`]; `what` names the input.
pub fn check_duration_minutes(what: &str, minutes: f64) -> Result<(), String> {
    if !(minutes > 0.0 && minutes.is_finite()) {
        return Err(format!("{what} must be a positive number, got {minutes}"));
    }
    if minutes > MAX_DURATION_MINUTES {
        return Err(format!(
            "{what} {minutes} is above the limit of {MAX_DURATION_MINUTES} minutes (365 days)"
        ));
    }
    Ok(())
}

/// The built-ins the default suite runs (all but `large`).
pub fn default_suite() -> Vec<&'static str> {
    BUILT_IN
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| *n != "large")
        .collect()
}

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Editor hint; ignored.
    #[serde(rename = "$schema", default)]
    pub schema: Option<String>,
    /// Short name (tables, file names).
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// Simulated time, minutes.
    pub duration_minutes: f64,
    /// Convergence is measured from this minute (after the last disruption).
    #[serde(default)]
    pub converge_after_minutes: f64,
    /// How long a moving bundle serves nowhere, seconds.
    #[serde(default = "default_move_seconds")]
    pub move_seconds: f64,
    /// `cold` or `warm` bundle history (see the module docs).
    #[serde(default)]
    pub bundle_history: BundleHistory,
    /// broker.conf keys for this scenario.
    #[serde(default)]
    pub settings: BTreeMap<String, serde_json::Value>,
    /// Cost model overrides.
    #[serde(default)]
    pub model: CostModel,
    /// Broker groups.
    pub brokers: Vec<BrokerGroup>,
    /// Namespace groups.
    pub namespaces: Vec<NamespaceGroup>,
    /// Initial placement.
    #[serde(default)]
    pub placement: InitialPlacement,
    /// Timeline.
    #[serde(default)]
    pub events: Vec<Event>,
}

fn default_move_seconds() -> f64 {
    5.0
}

/// Whether the store starts with bundle data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BundleHistory {
    /// No stored bundle data.
    #[default]
    Cold,
    /// Full windows at the starting traffic.
    Warm,
}

/// A group of identical brokers.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrokerGroup {
    /// How many.
    pub count: u32,
    /// Id template (`{i}` = index).
    #[serde(default = "default_broker_name")]
    pub name: String,
    /// Port of the id.
    #[serde(default = "default_port")]
    pub port: u16,
    /// CPU cores.
    #[serde(default = "default_cores")]
    pub cpu_cores: f64,
    /// NIC speed, Gbit/s.
    #[serde(default = "default_nic")]
    pub nic_gbps: f64,
    /// When they start, minutes.
    #[serde(default)]
    pub join_at_minute: f64,
    /// Failure domain of every broker of the group (default: none, Pulsar's `default` domain); placement
    /// uses domains when `failureDomainsEnabled` is set.
    #[serde(default)]
    pub failure_domain: Option<String>,
}

fn default_broker_name() -> String {
    "broker-{i}".into()
}
fn default_port() -> u16 {
    8080
}
fn default_cores() -> f64 {
    8.0
}
fn default_nic() -> f64 {
    10.0
}

/// A group of namespaces with the same shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceGroup {
    /// Name template `tenant/ns-{i}`.
    pub name: String,
    /// How many.
    #[serde(default = "one")]
    pub count: u32,
    /// Initial bundles per namespace.
    pub bundles: u32,
    /// Topics per bundle, on average.
    #[serde(default = "default_topics_per_bundle")]
    pub topics_per_bundle: f64,
    /// Total msg/s in of the group.
    pub msg_rate_in: f64,
    /// Bytes per message.
    #[serde(default = "default_msg_size")]
    pub msg_size_bytes: f64,
    /// Subscriptions reading each message.
    #[serde(default = "one_f")]
    pub fan_out: f64,
    /// Producers per topic.
    #[serde(default = "one")]
    pub producers_per_topic: u32,
    /// Consumers per topic.
    #[serde(default = "one")]
    pub consumers_per_topic: u32,
    /// How traffic is spread over the group's bundles.
    #[serde(default)]
    pub distribution: Distribution,
    /// Daily wave.
    #[serde(default)]
    pub diurnal: Option<Diurnal>,
    /// `namespaceAntiAffinityGroup` of every namespace of the group; `{i}` is replaced as in `name`, so groups
    /// with the same template and count pair their i-th namespaces.
    #[serde(default)]
    pub anti_affinity_group: Option<String>,
}

fn one() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}
fn default_topics_per_bundle() -> f64 {
    2.0
}
fn default_msg_size() -> f64 {
    2048.0
}

/// Traffic spread over bundles.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Distribution {
    /// Every bundle gets `1 ± jitter` (uniform) shares.
    Uniform {
        /// Relative jitter in [0, 1).
        #[serde(default)]
        jitter: f64,
    },
    /// Bundle of rank r (seeded shuffle) gets `r^-exponent` shares.
    Zipf {
        /// Zipf exponent.
        exponent: f64,
    },
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::Uniform { jitter: 0.0 }
    }
}

/// A daily wave.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Diurnal {
    /// Relative amplitude in [0, 1].
    pub amplitude: f64,
    /// Period, minutes.
    #[serde(default = "day")]
    pub period_minutes: f64,
    /// Phase shift per namespace of the group, minutes.
    #[serde(default)]
    pub phase_step_minutes: f64,
    /// Phase shift of the group's first namespace, minutes.
    #[serde(default)]
    pub phase_minutes: f64,
}

fn day() -> f64 {
    1440.0
}

/// Where bundles start.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum InitialPlacement {
    /// Round robin over the brokers present at minute 0.
    #[default]
    RoundRobin,
    /// Seeded uniform random broker.
    Random,
    /// Round robin over the listed brokers.
    Brokers {
        /// Broker names.
        brokers: Vec<String>,
    },
}

/// A timeline event.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Event {
    /// Brokers leave for good.
    #[serde(rename_all = "camelCase")]
    Stop {
        /// When, minutes.
        at_minute: f64,
        /// Which.
        brokers: Vec<String>,
        /// Graceful shutdown (default) or crash.
        #[serde(default = "yes")]
        graceful: bool,
    },
    /// Rolling restart.
    #[serde(rename_all = "camelCase")]
    Restart {
        /// First restart, minutes.
        at_minute: f64,
        /// Which (default: every broker present at minute 0, in id order).
        #[serde(default)]
        brokers: Vec<String>,
        /// Gap between two restarts, minutes.
        #[serde(default)]
        every_minutes: f64,
        /// Downtime of each, seconds.
        #[serde(default = "default_down")]
        down_seconds: f64,
        /// Graceful shutdown (default) or crash (noticed after the session timeout; the broker comes back no
        /// sooner than that).
        #[serde(default = "yes")]
        graceful: bool,
    },
    /// Traffic ramp of one bundle's topics or a whole namespace.
    #[serde(rename_all = "camelCase")]
    Traffic {
        /// Start, minutes.
        at_minute: f64,
        /// Namespace.
        namespace: String,
        /// Initial bundle range `0x…_0x…` (absent: the whole namespace).
        #[serde(default)]
        bundle: Option<String>,
        /// Final multiplier.
        factor: f64,
        /// Ramp length, minutes (0 = step).
        #[serde(default)]
        ramp_minutes: f64,
    },
    /// Extra CPU on one broker.
    #[serde(rename_all = "camelCase")]
    CpuSpike {
        /// Start, minutes.
        at_minute: f64,
        /// Broker.
        broker: String,
        /// Extra CPU, percentage points.
        points: f64,
        /// Length, seconds.
        duration_seconds: f64,
        /// Repeat period, minutes.
        #[serde(default)]
        every_minutes: Option<f64>,
    },
}

fn yes() -> bool {
    true
}
fn default_down() -> f64 {
    60.0
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: serde_json::Value =
            serde_json::from_str(SCHEMA).expect("bundled scenario schema is JSON");
        jsonschema::draft202012::new(&schema).expect("bundled scenario schema compiles")
    })
}

impl Scenario {
    /// Parses and validates scenario text; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, SimError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| SimError::Scenario {
                origin: origin.to_owned(),
                message: format!("not valid JSON: {e}"),
            })?;
        if let Some(err) = validator().iter_errors(&value).next() {
            let ptr = err.instance_path.to_string();
            return Err(SimError::Scenario {
                origin: origin.to_owned(),
                message: format!(
                    "at {}: {err}",
                    if ptr.is_empty() { "/" } else { ptr.as_str() }
                ),
            });
        }
        Self::decode(value, origin)
    }

    /// Decodes a scenario that needs no schema check (a built-in one: the test
    /// `every_built_in_parses_and_validates` checks them all) and checks its limits.
    fn decode(value: serde_json::Value, origin: &str) -> Result<Self, SimError> {
        let s: Scenario = serde_json::from_value(value).map_err(|e| SimError::Scenario {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        s.check_limits().map_err(|message| SimError::Scenario {
            origin: origin.to_owned(),
            message,
        })?;
        Ok(s)
    }

    /// Checks the sizes and the length against [`MAX_BROKERS`], [`MAX_NAMESPACES`], [`MAX_BUNDLES`],
    /// [`MAX_TOPICS`] and [`MAX_DURATION_MINUTES`], before any of it is built.
    pub fn check_limits(&self) -> Result<(), String> {
        check_duration_minutes("durationMinutes", self.duration_minutes)?;
        let brokers: u64 = self.brokers.iter().map(|g| u64::from(g.count)).sum();
        let namespaces: u64 = self.namespaces.iter().map(|g| u64::from(g.count)).sum();
        let bundles: u64 = self
            .namespaces
            .iter()
            .map(|g| u64::from(g.count) * u64::from(g.bundles))
            .sum();
        let topics: f64 = self
            .namespaces
            .iter()
            .map(|g| {
                let per_ns = (f64::from(g.bundles) * g.topics_per_bundle)
                    .round()
                    .max(f64::from(g.bundles));
                f64::from(g.count) * per_ns
            })
            .sum();
        for (what, n, limit) in [
            (
                "brokers (the sum of brokers[].count)",
                brokers as f64,
                MAX_BROKERS,
            ),
            (
                "namespaces (the sum of namespaces[].count)",
                namespaces as f64,
                MAX_NAMESPACES,
            ),
            (
                "bundles (the sum of namespaces[].count × bundles)",
                bundles as f64,
                MAX_BUNDLES,
            ),
            (
                "topics (the sum of namespaces[].count × bundles × topicsPerBundle)",
                topics,
                MAX_TOPICS,
            ),
        ] {
            if n > limit as f64 {
                return Err(format!("{what} is {n}, above the limit of {limit}"));
            }
        }
        Ok(())
    }

    /// A built-in scenario by name.
    pub fn built_in(name: &str) -> Option<Self> {
        BUILT_IN.iter().find(|(n, _)| *n == name).map(|(n, text)| {
            // Compiling the schema costs more than most runs; the built-ins are checked against it by a test.
            let value = serde_json::from_str(text).expect("built-in scenarios are JSON");
            Self::decode(value, n).expect("built-in scenarios are valid")
        })
    }

    /// A built-in name, or else a file path.
    pub fn load(name_or_path: &str) -> Result<Self, SimError> {
        if let Some(s) = Self::built_in(name_or_path) {
            return Ok(s);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
            return Err(SimError::Scenario {
                origin: name_or_path.to_owned(),
                message: format!(
                    "neither a built-in scenario ({}) nor a file",
                    names.join(", ")
                ),
            });
        }
        let text =
            crate::model::input::read_file_to_string(path).map_err(|e| SimError::Scenario {
                origin: name_or_path.to_owned(),
                message: e.reason,
            })?;
        Self::from_json(&text, name_or_path)
    }

    /// The scenario's settings as `broker.conf` lines.
    pub fn settings_text(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.settings {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            out.push_str(&crate::config::format_property(k, &text));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_parses_and_validates() {
        for (name, text) in BUILT_IN {
            let s = Scenario::from_json(text, name).unwrap();
            assert_eq!(&s.name, name);
            assert!(s.duration_minutes > 0.0);
        }
        assert_eq!(default_suite().len(), BUILT_IN.len() - 1);
        assert!(!default_suite().contains(&"large"));
    }

    fn limit_error(brokers: &str, namespaces: &str, minutes: &str) -> String {
        Scenario::from_json(
            &format!(
                r#"{{"name":"x","durationMinutes":{minutes},"brokers":{brokers},"namespaces":{namespaces}}}"#
            ),
            "x.json",
        )
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn sizes_and_length_have_limits() {
        let one = r#"[{"count":1}]"#;
        assert_eq!(
            limit_error(r#"[{"count":60000},{"count":40001,"name":"b-{i}"}]"#, "[]", "1"),
            "scenario x.json: brokers (the sum of brokers[].count) is 100001, above the limit of 100000"
        );
        assert_eq!(
            limit_error(one, r#"[{"name":"t/n-{i}","count":1000001,"bundles":1,"msgRateIn":1}]"#, "1"),
            "scenario x.json: namespaces (the sum of namespaces[].count) is 1000001, above the limit of 1000000"
        );
        assert_eq!(
            limit_error(one, r#"[{"name":"t/n-{i}","count":1001,"bundles":10000,"msgRateIn":1}]"#, "1"),
            "scenario x.json: bundles (the sum of namespaces[].count × bundles) is 10010000, above the limit of 10000000"
        );
        assert_eq!(
            limit_error(
                one,
                r#"[{"name":"t/n-{i}","count":10,"bundles":1000,"topicsPerBundle":2001,"msgRateIn":1}]"#,
                "1"
            ),
            "scenario x.json: topics (the sum of namespaces[].count × bundles × topicsPerBundle) is 20010000, above the limit of 20000000"
        );
        assert_eq!(
            limit_error(one, "[]", "525601"),
            "scenario x.json: durationMinutes 525601 is above the limit of 525600 minutes (365 days)"
        );
        // At the limits: accepted (nothing is built yet).
        assert!(Scenario::from_json(
            r#"{"name":"x","durationMinutes":525600,"brokers":[{"count":100000}],
                "namespaces":[{"name":"t/n-{i}","count":1000,"bundles":10000,"topicsPerBundle":2,"msgRateIn":1}]}"#,
            "x.json"
        )
        .is_ok());
    }

    #[test]
    fn errors_name_the_bad_key() {
        let err = Scenario::from_json(
            r#"{"name":"x","durationMinutes":"long","brokers":[{"count":1}],"namespaces":[]}"#,
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("x.json") && err.contains("/durationMinutes"),
            "{err}"
        );
        let err = Scenario::from_json(
            r#"{"name":"x","durationMinutes":1,"brokers":[{"count":1,"cpus":3}],"namespaces":[]}"#,
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("cpus"), "{err}");
        let err = Scenario::from_json(
            r#"{"name":"x","durationMinutes":1,"brokers":[{"count":1}],"namespaces":[],
                "events":[{"kind":"explode","atMinute":1}]}"#,
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/events/0"), "{err}");
        assert!(Scenario::load("no-such-scenario")
            .unwrap_err()
            .to_string()
            .contains("skewed-start"));
    }

    #[test]
    fn settings_become_broker_conf_lines() {
        let s = Scenario::from_json(
            r#"{"name":"x","durationMinutes":1,"brokers":[{"count":1}],"namespaces":[],
                "settings":{"loadBalancerSheddingIntervalMinutes":2,"loadBalancerSheddingEnabled":false,
                            "loadBalancerLoadSheddingStrategy":"ThresholdShedder"}}"#,
            "x",
        )
        .unwrap();
        assert_eq!(
            s.settings_text(),
            "loadBalancerLoadSheddingStrategy=ThresholdShedder\nloadBalancerSheddingEnabled=false\nloadBalancerSheddingIntervalMinutes=2\n"
        );
    }
}
