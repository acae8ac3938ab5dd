//! `broker.conf`: parsing, the typed load-balancer settings with loadmgr's (Pulsar 5.0) defaults, and the
//! strategy pairing rules.
//!
//! The file format is Java's properties format as Pulsar brokers read it: one `key=value` per line (`:` or
//! white space also separate key and value), `#` and `!` start comments, a trailing `\` continues a line,
//! values are trimmed, and an empty value keeps the default. Keys loadmgr does not know are warnings, since
//! broker.conf carries many settings that are not about load balancing; a value of the wrong type or out of
//! range is an error naming the file, line, key, value and what was expected.

mod dynamic;
mod periods;
mod settings;
mod strategy;
mod value;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

pub use settings::{Settings, KEYS};
pub use strategy::{LoadManagerKind, PlacementKind, ShedderKind};
pub use value::SettingValue;

use crate::bundle::SplitAlgorithm;
use crate::model::ResourceWeights;

/// Bundles of the system namespace `pulsar/system` created by loadmgr (5.0: 64).
pub const SYSTEM_NAMESPACE_BUNDLES: u64 = 64;
/// Bundles of `public/default` created by loadmgr (5.0: 32).
pub const DEFAULT_NAMESPACE_BUNDLES: u64 = 32;

/// The range a numeric key must be in to work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    /// Above 0: periods, timeouts and TTLs, where 0 or less cannot work.
    Positive,
    /// 0 or more; the text says what 0 means for that key.
    NonNegative(&'static str),
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Range::Positive => f.write_str("> 0"),
            Range::NonNegative("") => f.write_str(">= 0"),
            Range::NonNegative(zero) => write!(f, ">= 0 (0 = {zero})"),
        }
    }
}

/// The numeric keys with a range. Every period, timeout and TTL must be above 0, except where 0 has a
/// documented meaning (no grace period, no cool-down, the minute setting instead of the `loadmgr*Millis`
/// override). The deprecated `zooKeeper*` keys take any value: ≤ 0 means unset.
const RANGE_RULES: &[(&str, Range)] = &[
    ("loadBalancerReportUpdateMinIntervalMillis", Range::Positive),
    (
        "loadBalancerReportUpdateMaxIntervalMinutes",
        Range::Positive,
    ),
    ("loadBalancerHostUsageCheckIntervalMinutes", Range::Positive),
    ("loadBalancerSheddingIntervalMinutes", Range::Positive),
    (
        "loadBalancerResourceQuotaUpdateIntervalMinutes",
        Range::Positive,
    ),
    ("loadBalancerSplitIntervalMinutes", Range::Positive),
    ("loadBalancerBrokerLoadDataTTLInSeconds", Range::Positive),
    ("namespaceBundleUnloadingTimeoutMs", Range::Positive),
    ("metadataStoreSessionTimeoutMillis", Range::Positive),
    ("metadataStoreOperationTimeoutSeconds", Range::Positive),
    ("metadataStoreCacheExpirySeconds", Range::Positive),
    ("defaultNumberOfNamespaceBundles", Range::Positive),
    (
        "loadBalancerSheddingGracePeriodMinutes",
        Range::NonNegative("no grace period"),
    ),
    (
        "loadBalanceSheddingDelayInSeconds",
        Range::NonNegative("no cool-down"),
    ),
    (
        "loadmgrSheddingIntervalMillis",
        Range::NonNegative("use loadBalancerSheddingIntervalMinutes"),
    ),
    (
        "loadmgrResourceQuotaUpdateIntervalMillis",
        Range::NonNegative("use loadBalancerResourceQuotaUpdateIntervalMinutes"),
    ),
    (
        "loadmgrHostUsageCheckIntervalMillis",
        Range::NonNegative("use loadBalancerHostUsageCheckIntervalMinutes"),
    ),
    (
        "loadmgrReportUpdateMaxIntervalMillis",
        Range::NonNegative("use loadBalancerReportUpdateMaxIntervalMinutes"),
    ),
    ("loadBalancerCPUResourceWeight", Range::NonNegative("")),
    ("loadBalancerMemoryResourceWeight", Range::NonNegative("")),
    (
        "loadBalancerDirectMemoryResourceWeight",
        Range::NonNegative(""),
    ),
    (
        "loadBalancerBandwidthInResourceWeight",
        Range::NonNegative(""),
    ),
    (
        "loadBalancerBandwidthOutResourceWeight",
        Range::NonNegative(""),
    ),
    (
        "loadBalancerBrokerOverloadedThresholdPercentage",
        Range::NonNegative(""),
    ),
    ("loadBalancerAvgShedderLowThreshold", Range::NonNegative("")),
    (
        "loadBalancerAvgShedderHighThreshold",
        Range::NonNegative(""),
    ),
    ("loadmgrBandShedderSpreadPercentage", Range::Positive),
    ("loadmgrBandShedderPlanSpreadPercentage", Range::Positive),
    (
        "loadmgrBandShedderHitCount",
        Range::NonNegative("act on the first cycle"),
    ),
    (
        "loadmgrBandShedderMaxMovesPerCycle",
        Range::NonNegative("no limit"),
    ),
    (
        "loadmgrBandShedderEarlyCycleSeconds",
        Range::NonNegative("regular ticks only"),
    ),
    (
        "loadmgrBandShedderNoReturnMinutes",
        Range::NonNegative("no memory beyond the grace period"),
    ),
    (
        "loadmgrBandShedderRollingRestartMinutes",
        Range::NonNegative("a returning broker is refilled at once"),
    ),
];

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file name as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        message: String,
    },
    /// A value of the wrong type or out of range.
    #[error("{origin}: invalid value '{value}' for {key}: expected {expected}")]
    InvalidValue {
        /// Where.
        origin: Origin,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// What the key takes.
        expected: String,
    },
    /// A number outside the range its key can work with (a period or timeout of 0 or less, say).
    #[error("{origin}: {key} must be {rule}, got {value}")]
    OutOfRange {
        /// Where.
        origin: Origin,
        /// The key.
        key: String,
        /// The value as loadmgr read it.
        value: String,
        /// The rule it breaks (`> 0`, `>= 0 (0 = …)`).
        rule: String,
    },
    /// A combination of settings Pulsar refuses.
    #[error("{origin}: {message}")]
    Conflict {
        /// The line of the key that conflicts.
        origin: Origin,
        /// What conflicts.
        message: String,
    },
}

/// Something worth telling the operator that does not stop loadmgr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Where, when it comes from a line.
    pub origin: Option<Origin>,
    /// What.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(origin) => write!(f, "{origin}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Settings read from a file, with the warnings found on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The effective settings (pairing and deprecation rules applied).
    pub settings: Settings,
    /// Unknown keys, duplicates and pairing notices.
    pub warnings: Vec<ConfigWarning>,
}

/// One `key=value` entry of a properties text, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key.
    pub key: String,
    /// The trimmed value.
    pub value: String,
    /// 1-based line where the entry starts.
    pub line: usize,
}

/// Splits properties text into entries (Java properties rules as Pulsar uses them: `java.util.Properties`, then
/// the value trimmed). Escapes are Java's: `\\`, `\t`, `\n`, `\r`, `\f` and `\uXXXX` stand for those characters,
/// a backslash before any other character stands for that character (so `\=`, `\:` and `\ ` do not end a
/// key), and a backslash at the end of a line continues it. A `\u` without four hex digits is kept as `u`
/// and its text (Java refuses the file).
pub fn parse_properties(text: &str) -> Vec<Property> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, raw)) = lines.next() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        let mut logical = trimmed.to_owned();
        // Continuation: an odd number of trailing backslashes.
        while logical.ends_with('\\')
            && (logical.len() - logical.trim_end_matches('\\').len()) % 2 == 1
        {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        // The key ends at the first `=`, `:` or white space that no backslash escapes.
        let mut escaped = false;
        let split_at = logical.char_indices().find_map(|(i, c)| {
            if escaped {
                escaped = false;
                None
            } else if c == '\\' {
                escaped = true;
                None
            } else {
                (c == '=' || c == ':' || c.is_whitespace()).then_some(i)
            }
        });
        let (key, value) = match split_at {
            Some(i) => {
                let key = &logical[..i];
                let rest = logical[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                (
                    unescape_property(key.trim()),
                    unescape_property(rest).trim().to_owned(),
                )
            }
            None => (unescape_property(logical.trim()), String::new()),
        };
        out.push(Property {
            key,
            value,
            line: index + 1,
        });
    }
    out
}

/// Java's `loadConvert`: the text of a key or value with its escapes replaced (see [`parse_properties`]).
fn unescape_property(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                {
                    Some(code) => {
                        // A lone surrogate half is no char: it becomes U+FFFD, as a Java string would when
                        // written as UTF-8.
                        out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                        chars.nth(3);
                    }
                    None => out.push('u'),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// One `key=value` line of a properties text (no line end), escaped so that [`parse_properties`] reads back
/// exactly `key` and `value`: backslashes, control characters, separators in the key and a leading space of
/// the value are escaped. `config check` prints the effective settings with it.
pub fn format_property(key: &str, value: &str) -> String {
    fn escape(out: &mut String, text: &str, is_key: bool) {
        for (i, c) in text.chars().enumerate() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\u{c}' => out.push_str("\\f"),
                c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
                '=' | ':' | '#' | '!' if is_key => {
                    out.push('\\');
                    out.push(c);
                }
                c if c.is_whitespace() && (is_key || i == 0) => {
                    out.push('\\');
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    let mut out = String::with_capacity(key.len() + value.len() + 1);
    escape(&mut out, key, true);
    out.push('=');
    escape(&mut out, value, false);
    out
}

impl Settings {
    /// Reads a `broker.conf` file.
    pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
        let file = path.display().to_string();
        let text = crate::model::input::read_file_to_string(path).map_err(|e| ConfigError::Io {
            file: file.clone(),
            message: e.reason,
        })?;
        Self::from_text(&text, &file)
    }

    /// Reads `broker.conf` text; `file` names it in messages.
    pub fn from_text(text: &str, file: &str) -> Result<LoadedConfig, ConfigError> {
        let mut settings = Settings::default();
        let mut warnings = Vec::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut origins: BTreeMap<&'static str, Origin> = BTreeMap::new();
        for p in parse_properties(text) {
            let origin = Origin {
                file: file.to_owned(),
                line: p.line,
            };
            if let Some(first) = seen.insert(p.key.clone(), p.line) {
                warnings.push(ConfigWarning {
                    origin: Some(origin.clone()),
                    message: format!(
                        "{} is set again (first on line {first}); the last value wins",
                        p.key
                    ),
                });
            }
            if p.value.is_empty() {
                // Pulsar skips blank values: the default stays.
                continue;
            }
            match settings.set_text(&p.key, &p.value) {
                Some((key, Ok(()))) => {
                    settings.explicit.insert(key);
                    origins.insert(key, origin);
                }
                Some((_, Err(expected))) => {
                    return Err(ConfigError::InvalidValue {
                        origin,
                        key: p.key,
                        value: p.value,
                        expected,
                    })
                }
                None => warnings.push(ConfigWarning {
                    origin: Some(origin),
                    message: format!(
                        "unknown key {} (not a load-balancer setting; ignored)",
                        p.key
                    ),
                }),
            }
        }
        let no_origin = Origin {
            file: file.to_owned(),
            line: 0,
        };
        let origin_of = |key: &str| {
            origins
                .get(key)
                .cloned()
                .unwrap_or_else(|| no_origin.clone())
        };
        settings.validate(&origin_of)?;
        let pairing = settings
            .resolve()
            .map_err(|message| ConfigError::Conflict {
                origin: origin_of("loadBalancerLoadPlacementStrategy"),
                message,
            })?;
        warnings.extend(pairing.into_iter().map(|message| ConfigWarning {
            origin: None,
            message,
        }));
        Ok(LoadedConfig { settings, warnings })
    }

    /// Whether `key` was set in the file (rather than left at its default).
    pub fn is_explicit(&self, key: &str) -> bool {
        self.explicit.contains(key)
    }

    /// Whether Pulsar treats `key` as a dynamic setting.
    pub fn is_dynamic(key: &str) -> Option<bool> {
        KEYS.iter().find(|(k, _)| *k == key).map(|(_, d)| *d)
    }

    /// Sets one key at run time (the admin `update-dynamic-config` path); refuses keys that are not dynamic.
    pub fn set_dynamic(&mut self, key: &str, value: &str) -> Result<(), String> {
        match Self::is_dynamic(key) {
            None => return Err(format!("unknown key {key}")),
            Some(false) => {
                return Err(format!(
                    "{key} is not dynamic: change broker.conf and restart"
                ))
            }
            Some(true) => {}
        }
        let mut candidate = self.clone();
        match candidate.set_text(key, value.trim()) {
            Some((k, Ok(()))) => {
                candidate.explicit.insert(k);
            }
            Some((_, Err(expected))) => {
                return Err(format!(
                    "invalid value '{value}' for {key}: expected {expected}"
                ))
            }
            None => return Err(format!("unknown key {key}")),
        }
        candidate
            .validate(&|_| Origin {
                file: "dynamic configuration".into(),
                line: 0,
            })
            .map_err(|e| e.to_string())?;
        // The strategy pairing follows the same rules as in a file: a new shedder brings its default placement
        // unless the placement was set explicitly, and an explicit AvgShedder placement refuses another shedder.
        // Without this, a dynamic ThresholdShedder kept the default AvgShedder placement, which places at random
        // (it has no plan) and which a broker.conf naming the same shedder never produces.
        candidate.resolve()?;
        *self = candidate;
        Ok(())
    }

    fn validate(&self, origin_of: &dyn Fn(&str) -> Origin) -> Result<(), ConfigError> {
        let invalid = |key: &str, value: String, expected: &str| ConfigError::InvalidValue {
            origin: origin_of(key),
            key: key.to_owned(),
            value,
            expected: expected.to_owned(),
        };
        for (key, rule) in RANGE_RULES {
            let value = self.get(key).unwrap_or_default();
            let v: f64 = value.parse().unwrap_or(f64::NAN);
            let ok = match rule {
                Range::Positive => v > 0.0,
                Range::NonNegative(_) => v >= 0.0,
            };
            if !ok {
                return Err(ConfigError::OutOfRange {
                    origin: origin_of(key),
                    key: (*key).to_owned(),
                    value,
                    rule: rule.to_string(),
                });
            }
        }
        let fractions: [(&str, f64, bool); 2] = [
            (
                "loadBalancerHistoryResourcePercentage",
                self.load_balancer_history_resource_percentage,
                true,
            ),
            ("maxUnloadPercentage", self.max_unload_percentage, false),
        ];
        for (key, v, zero_ok) in fractions {
            if !(0.0..=1.0).contains(&v) || (!zero_ok && v == 0.0) {
                let expected = if zero_ok {
                    "a fraction from 0 to 1"
                } else {
                    "a fraction above 0 and at most 1"
                };
                return Err(invalid(key, self.get(key).unwrap_or_default(), expected));
            }
        }
        if let Some(gbps) = self.load_balancer_override_broker_nic_speed_gbps {
            if gbps <= 0.0 {
                return Err(invalid(
                    "loadBalancerOverrideBrokerNicSpeedGbps",
                    self.get("loadBalancerOverrideBrokerNicSpeedGbps")
                        .unwrap_or_default(),
                    "a speed above 0 Gbit/s",
                ));
            }
        }
        if self.load_manager_class_name == LoadManagerKind::Simple {
            return Err(invalid(
                "loadManagerClassName",
                LoadManagerKind::Simple.class_name().to_owned(),
                "ModularLoadManagerImpl or ExtensibleLoadManagerImpl (loadmgr does not implement the Simple load manager)",
            ));
        }
        if self.topic_bundle_assignment_strategy
            != "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner"
        {
            return Err(invalid(
                "topicBundleAssignmentStrategy",
                self.topic_bundle_assignment_strategy.clone(),
                "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner (the only assigner loadmgr implements)",
            ));
        }
        if !["open", "creator-all-world-read", "creator-only"]
            .contains(&self.loadmgr_zookeeper_acl.as_str())
        {
            return Err(invalid(
                "loadmgrZookeeperAcl",
                self.loadmgr_zookeeper_acl.clone(),
                "open, creator-all-world-read or creator-only",
            ));
        }
        let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.trim().is_empty());
        let user = set(&self.loadmgr_metadata_store_user);
        let password = set(&self.loadmgr_metadata_store_password);
        let password_file = set(&self.loadmgr_metadata_store_password_file);
        if password && password_file {
            return Err(invalid(
                "loadmgrMetadataStorePasswordFile",
                self.loadmgr_metadata_store_password_file
                    .clone()
                    .unwrap_or_default(),
                "either loadmgrMetadataStorePassword or loadmgrMetadataStorePasswordFile, not both",
            ));
        }
        if user != (password || password_file) {
            let key = if user {
                "loadmgrMetadataStoreUser"
            } else if password {
                "loadmgrMetadataStorePassword"
            } else {
                "loadmgrMetadataStorePasswordFile"
            };
            let value = if key == "loadmgrMetadataStorePassword" {
                "********".to_owned()
            } else {
                self.get(key).unwrap_or_default()
            };
            return Err(invalid(
                key,
                value,
                "a user together with its password (loadmgrMetadataStoreUser with loadmgrMetadataStorePassword or loadmgrMetadataStorePasswordFile)",
            ));
        }
        if self.loadmgr_zookeeper_acl != "open" && !user {
            return Err(invalid(
                "loadmgrZookeeperAcl",
                self.loadmgr_zookeeper_acl.clone(),
                "open unless loadmgrMetadataStoreUser is set (a creator ACL needs an authenticated creator)",
            ));
        }
        for name in &self.supported_namespace_bundle_split_algorithms {
            if name.parse::<SplitAlgorithm>().is_err() {
                return Err(invalid(
                    "supportedNamespaceBundleSplitAlgorithms",
                    name.clone(),
                    "split algorithm names",
                ));
            }
        }
        Ok(())
    }

    /// Applies the deprecated-key overrides and the Pulsar 5.0 strategy pairing rules, returning warnings.
    ///
    /// * `Bandwith` weights: the new key wins if it is not 1.0, else the old one if it is not 1.0.
    /// * `zooKeeper*` timeouts override their `metadataStore*` keys when > 0.
    /// * `loadBalancerExtentionsTransferShedderDebugModeEnabled` (set explicitly) sets `loadBalancerDebugModeEnabled`
    ///   unless that key is set explicitly too, which then wins; either way a deprecation warning.
    /// * Extensible load manager: always TransferShedder (any other shedder falls back, with a warning) and
    ///   LeastResourceUsageWithWeight placement.
    /// * Classic shedder with the placement key left unset: placement falls back to LeastLongTermMessageRate.
    /// * AvgShedder with another explicit placement: accepted, with a warning that its plans are not honoured.
    /// * AvgShedder placement set explicitly with another shedder: refused, as Pulsar refuses it (the two keys
    ///   must name the same class when the placement strategy is also a shedder).
    pub fn resolve(&mut self) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        if self.load_balancer_bandwidth_in_resource_weight == 1.0
            && self.load_balancer_bandwith_in_resource_weight != 1.0
        {
            self.load_balancer_bandwidth_in_resource_weight =
                self.load_balancer_bandwith_in_resource_weight;
            warnings.push("loadBalancerBandwithInResourceWeight is deprecated; use loadBalancerBandwidthInResourceWeight".into());
        }
        if self.load_balancer_bandwidth_out_resource_weight == 1.0
            && self.load_balancer_bandwith_out_resource_weight != 1.0
        {
            self.load_balancer_bandwidth_out_resource_weight =
                self.load_balancer_bandwith_out_resource_weight;
            warnings.push("loadBalancerBandwithOutResourceWeight is deprecated; use loadBalancerBandwidthOutResourceWeight".into());
        }
        if self.zoo_keeper_session_timeout_millis > 0 {
            self.metadata_store_session_timeout_millis = self.zoo_keeper_session_timeout_millis;
            warnings.push("zooKeeperSessionTimeoutMillis is deprecated and overrides metadataStoreSessionTimeoutMillis".into());
        }
        if self.zoo_keeper_operation_timeout_seconds > 0 {
            self.metadata_store_operation_timeout_seconds =
                self.zoo_keeper_operation_timeout_seconds;
            warnings.push("zooKeeperOperationTimeoutSeconds is deprecated and overrides metadataStoreOperationTimeoutSeconds".into());
        }
        if self.zoo_keeper_cache_expiry_seconds > 0 {
            self.metadata_store_cache_expiry_seconds = self.zoo_keeper_cache_expiry_seconds;
            warnings.push("zooKeeperCacheExpirySeconds is deprecated and overrides metadataStoreCacheExpirySeconds".into());
        }
        if self.is_explicit("loadBalancerExtentionsTransferShedderDebugModeEnabled") {
            if !self.is_explicit("loadBalancerDebugModeEnabled") {
                self.load_balancer_debug_mode_enabled =
                    self.load_balancer_extentions_transfer_shedder_debug_mode_enabled;
            }
            warnings.push("loadBalancerExtentionsTransferShedderDebugModeEnabled is deprecated; use loadBalancerDebugModeEnabled".into());
        }
        let shedder = self.load_balancer_load_shedding_strategy;
        let placement_explicit = self.is_explicit("loadBalancerLoadPlacementStrategy");
        if self.load_manager_class_name == LoadManagerKind::Extensible {
            if shedder != ShedderKind::TransferShedder
                && self.is_explicit("loadBalancerLoadSheddingStrategy")
            {
                warnings.push(format!(
                    "the extensible load manager always uses TransferShedder; {shedder} is ignored"
                ));
            }
            self.load_balancer_load_shedding_strategy = ShedderKind::TransferShedder;
            self.load_balancer_load_placement_strategy =
                PlacementKind::LeastResourceUsageWithWeight;
            return Ok(warnings);
        }
        let placement = self.load_balancer_load_placement_strategy;
        match (shedder, placement_explicit) {
            (ShedderKind::AvgShedder, true) if placement != PlacementKind::AvgShedder => warnings.push(format!(
                "AvgShedder shedding with {placement} placement: AvgShedder's planned destinations are not honoured"
            )),
            (ShedderKind::AvgShedder, true) => {}
            // A dynamic change back to AvgShedder (`set_dynamic`) restores its pairing, as a file naming it would.
            (ShedderKind::AvgShedder, false) => {
                self.load_balancer_load_placement_strategy = PlacementKind::AvgShedder;
            }
            // BandShedder's plans are binding, so any placement keeps them; placement then only places new and
            // orphaned bundles.
            (ShedderKind::BandShedder, true) => {}
            (ShedderKind::BandShedder, false) => {
                self.load_balancer_load_placement_strategy = PlacementKind::BandShedder;
            }
            (other, false) => {
                self.load_balancer_load_placement_strategy = other.default_placement();
                warnings.push(format!(
                    "{other} is configured while loadBalancerLoadPlacementStrategy is left at its default: placement falls back to {}",
                    other.default_placement()
                ));
            }
            (other, true) if placement == PlacementKind::AvgShedder => {
                return Err(format!(
                    "loadBalancerLoadPlacementStrategy=AvgShedder is also a shedding strategy and needs loadBalancerLoadSheddingStrategy=AvgShedder, not {other}"
                ))
            }
            (_, true) => {}
        }
        if self.loadmgr_band_shedder_plan_spread_percentage
            > self.loadmgr_band_shedder_spread_percentage
        {
            return Err(format!(
                "loadmgrBandShedderPlanSpreadPercentage ({}) must not exceed loadmgrBandShedderSpreadPercentage ({}): a plan must end inside the band that starts it",
                self.loadmgr_band_shedder_plan_spread_percentage,
                self.loadmgr_band_shedder_spread_percentage
            ));
        }
        if self.max_unload_percentage == 0.5
            && !self.is_explicit("maxUnloadPercentage")
            && self.load_balancer_load_shedding_strategy == ShedderKind::UniformLoadShedder
        {
            warnings.push("maxUnloadPercentage defaults to 0.5 since 5.0 (was 0.2) and also applies to UniformLoadShedder".into());
        }
        Ok(warnings)
    }

    /// The configured resource weights (effective bandwidth weights).
    pub fn resource_weights(&self) -> ResourceWeights {
        ResourceWeights {
            cpu: self.load_balancer_cpu_resource_weight,
            memory: self.load_balancer_memory_resource_weight,
            direct_memory: self.load_balancer_direct_memory_resource_weight,
            bandwidth_in: self.load_balancer_bandwidth_in_resource_weight,
            bandwidth_out: self.load_balancer_bandwidth_out_resource_weight,
        }
    }

    /// The broker id `advertisedAddress:port` (web port, else the TLS web port), as Pulsar builds it; `host`
    /// is used when `advertisedAddress` is unset.
    pub fn broker_id(&self, host: &str) -> Result<String, String> {
        let address = self.advertised_address.as_deref().unwrap_or(host);
        let port = self.web_service_port.or(self.web_service_port_tls).ok_or(
            "neither webServicePort nor webServicePortTls is set: a broker needs one for its id",
        )?;
        Ok(format!("{address}:{port}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<LoadedConfig, ConfigError> {
        Settings::from_text(text, "broker.conf")
    }

    #[test]
    fn defaults_follow_pulsar_5() {
        let s = load("").unwrap().settings;
        assert_eq!(
            s.load_balancer_load_shedding_strategy,
            ShedderKind::AvgShedder
        );
        assert_eq!(
            s.load_balancer_load_placement_strategy,
            PlacementKind::AvgShedder
        );
        assert_eq!(s.max_unload_percentage, 0.5);
        assert!(!s.load_balancer_distribute_bundles_evenly_enabled);
        assert_eq!(s.default_number_of_namespace_bundles, 32);
        assert_eq!(s.load_balancer_resource_quota_update_interval_minutes, 15);
        assert_eq!(s.load_balancer_memory_resource_weight, 0.0);
        assert_eq!(
            s.get("loadBalancerHistoryResourcePercentage").as_deref(),
            Some("0.9")
        );
        assert!(s.entries().windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(s.entries().len(), KEYS.len());
    }

    #[test]
    fn properties_syntax() {
        let props = parse_properties("# c\n! c\n\n a = 1 \nb:2\nc 3\nd=x\\\n  y\ne\nf=\n");
        let pairs: Vec<(&str, &str, usize)> = props
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str(), p.line))
            .collect();
        assert_eq!(
            pairs,
            [
                ("a", "1", 4),
                ("b", "2", 5),
                ("c", "3", 6),
                ("d", "xy", 7),
                ("e", "", 9),
                ("f", "", 10)
            ]
        );
    }

    /// Found by fuzzing (fuzz/fuzz_targets/broker_conf.rs): a value ending in a backslash, printed by
    /// `config check` as `key=value`, continued onto the next line when read back. Escapes are Java's now, on
    /// both sides.
    #[test]
    fn properties_escapes_are_javas_and_round_trip() {
        let props = parse_properties(
            "a\\=b=c\\\\d\n k\\ ey : \\u0041\\t\\x\ne=\\uZZ\nf=tail\\\\\u{b}\ng=h\n",
        );
        let pairs: Vec<(&str, &str)> = props
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("a=b", "c\\d"),
                ("k ey", "A\tx"),
                ("e", "uZZ"),
                ("f", "tail\\"),
                ("g", "h")
            ]
        );
        for (key, value) in [
            ("loadBalancerSheddingExcludedNamespaces", "tail\\"),
            ("k=:# !", " lead\u{b}\n\r\t\u{c}\u{1}é\\u0041"),
        ] {
            let line = format_property(key, value);
            let back = parse_properties(&format!("{line}\nnext=1\n"));
            assert_eq!(back[0].key, key, "{line}");
            assert_eq!(back[0].value, value.trim(), "{line}");
            assert_eq!(
                (back[1].key.as_str(), back[1].value.as_str()),
                ("next", "1")
            );
        }
    }

    #[test]
    fn bad_values_name_file_line_key_value_and_expectation() {
        let err = load("loadBalancerEnabled=true\nloadBalancerSheddingIntervalMinutes=soon\n")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "broker.conf:2: invalid value 'soon' for loadBalancerSheddingIntervalMinutes: expected a whole number between -2147483648 and 2147483647"
        );
        let err = load("maxUnloadPercentage=1.5\n").unwrap_err().to_string();
        assert!(
            err.starts_with("broker.conf:1: invalid value '1.5' for maxUnloadPercentage"),
            "{err}"
        );
        let err = load("loadBalancerLoadSheddingStrategy=FancyShedder\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("FancyShedder") && err.contains("ThresholdShedder"),
            "{err}"
        );
        let err = load("defaultNamespaceBundleSplitAlgorithm=specified_positions_divide\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("admin-API only"), "{err}");
        let err = load("loadBalancerSheddingIntervalMinutes=0\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "broker.conf:1: loadBalancerSheddingIntervalMinutes must be > 0, got 0"
        );
    }

    fn range_error(text: &str) -> String {
        load(text).unwrap_err().to_string()
    }

    #[test]
    fn session_timeout_must_be_positive() {
        assert_eq!(
            range_error("metadataStoreSessionTimeoutMillis=-1\n"),
            "broker.conf:1: metadataStoreSessionTimeoutMillis must be > 0, got -1"
        );
        assert_eq!(
            range_error("metadataStoreSessionTimeoutMillis=0\n"),
            "broker.conf:1: metadataStoreSessionTimeoutMillis must be > 0, got 0"
        );
        // The deprecated key keeps its meaning: ≤ 0 is unset, > 0 overrides.
        let s = load("zooKeeperSessionTimeoutMillis=0\n").unwrap().settings;
        assert_eq!(s.metadata_store_session_timeout_millis, 30000);
    }

    #[test]
    fn band_shedder_brings_its_placement_and_checks_its_spreads() {
        let loaded = load("loadBalancerLoadSheddingStrategy=io.loadmgr.BandShedder\n").unwrap();
        let s = loaded.settings;
        assert_eq!(
            s.load_balancer_load_shedding_strategy,
            ShedderKind::BandShedder
        );
        assert_eq!(
            s.load_balancer_load_placement_strategy,
            PlacementKind::BandShedder
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        // Another placement keeps the binding plans: allowed without a warning.
        let s = load("loadBalancerLoadSheddingStrategy=BandShedder\nloadBalancerLoadPlacementStrategy=LeastLongTermMessageRate\n")
            .unwrap()
            .settings;
        assert_eq!(
            s.load_balancer_load_placement_strategy,
            PlacementKind::LeastLongTermMessageRate
        );
        let err = load("loadmgrBandShedderPlanSpreadPercentage=12\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("must not exceed loadmgrBandShedderSpreadPercentage"),
            "{err}"
        );
        assert_eq!(
            range_error("loadmgrBandShedderSpreadPercentage=0\n"),
            "broker.conf:1: loadmgrBandShedderSpreadPercentage must be > 0, got 0.0"
        );
    }

    #[test]
    fn operation_timeout_and_cache_expiry_must_be_positive() {
        assert_eq!(
            range_error("\nmetadataStoreOperationTimeoutSeconds=-5\n"),
            "broker.conf:2: metadataStoreOperationTimeoutSeconds must be > 0, got -5"
        );
        assert!(range_error("metadataStoreCacheExpirySeconds=0\n")
            .contains("metadataStoreCacheExpirySeconds must be > 0, got 0"));
        assert!(load("zooKeeperOperationTimeoutSeconds=-1\n").is_ok());
    }

    #[test]
    fn every_period_and_ttl_must_be_positive() {
        for key in [
            "loadBalancerReportUpdateMinIntervalMillis",
            "loadBalancerReportUpdateMaxIntervalMinutes",
            "loadBalancerHostUsageCheckIntervalMinutes",
            "loadBalancerSheddingIntervalMinutes",
            "loadBalancerResourceQuotaUpdateIntervalMinutes",
            "loadBalancerSplitIntervalMinutes",
            "loadBalancerBrokerLoadDataTTLInSeconds",
            "namespaceBundleUnloadingTimeoutMs",
        ] {
            for value in ["0", "-3"] {
                assert_eq!(
                    range_error(&format!("{key}={value}\n")),
                    format!("broker.conf:1: {key} must be > 0, got {value}")
                );
            }
        }
    }

    #[test]
    fn millisecond_overrides_take_0_for_the_minute_setting_but_not_negatives() {
        let s = load("loadmgrSheddingIntervalMillis=0\n").unwrap().settings;
        assert_eq!(s.shedding_interval(), std::time::Duration::from_secs(60));
        assert_eq!(
            range_error("loadmgrSheddingIntervalMillis=-1\n"),
            "broker.conf:1: loadmgrSheddingIntervalMillis must be >= 0 (0 = use loadBalancerSheddingIntervalMinutes), got -1"
        );
        for key in [
            "loadmgrResourceQuotaUpdateIntervalMillis",
            "loadmgrHostUsageCheckIntervalMillis",
            "loadmgrReportUpdateMaxIntervalMillis",
        ] {
            assert!(load(&format!("{key}=0\n")).is_ok());
            assert!(range_error(&format!("{key}=-250\n"))
                .contains(&format!("{key} must be >= 0 (0 = use ")));
        }
    }

    #[test]
    fn grace_period_and_shedding_delay_take_0_for_none() {
        assert!(load(
            "loadBalancerSheddingGracePeriodMinutes=0\nloadBalanceSheddingDelayInSeconds=0\n"
        )
        .is_ok());
        assert!(
            range_error("loadBalancerSheddingGracePeriodMinutes=-1\n").contains(
                "loadBalancerSheddingGracePeriodMinutes must be >= 0 (0 = no grace period), got -1"
            )
        );
        assert!(range_error("loadBalanceSheddingDelayInSeconds=-1\n")
            .contains("loadBalanceSheddingDelayInSeconds must be >= 0 (0 = no cool-down), got -1"));
    }

    #[test]
    fn weights_and_thresholds_must_not_be_negative() {
        assert!(range_error("loadBalancerCPUResourceWeight=-0.5\n")
            .contains("loadBalancerCPUResourceWeight must be >= 0, got -0.5"));
        assert!(range_error("loadBalancerAvgShedderLowThreshold=-1\n")
            .contains("loadBalancerAvgShedderLowThreshold must be >= 0, got -1"));
    }

    #[test]
    fn dynamic_changes_follow_the_same_rules() {
        let mut s = Settings::default();
        let e = s
            .set_dynamic("loadBalancerSplitIntervalMinutes", "0")
            .unwrap_err();
        assert!(
            e.contains("loadBalancerSplitIntervalMinutes must be > 0, got 0"),
            "{e}"
        );
        assert_eq!(s.load_balancer_split_interval_minutes, 1);
    }

    #[test]
    fn unknown_and_duplicate_keys_warn() {
        let loaded = load("managedLedgerDefaultEnsembleSize=2\nloadBalancerSheddingEnabled=false\nloadBalancerSheddingEnabled=true\n").unwrap();
        let text: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            text[0].starts_with("broker.conf:1: unknown key managedLedgerDefaultEnsembleSize"),
            "{text:?}"
        );
        assert!(text[1].contains("set again (first on line 2)"), "{text:?}");
        assert!(loaded.settings.load_balancer_shedding_enabled);
    }

    #[test]
    fn short_and_full_strategy_names() {
        let s = load("loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\nloadBalancerLoadPlacementStrategy=LeastResourceUsageWithWeight\n").unwrap().settings;
        assert_eq!(
            s.load_balancer_load_shedding_strategy,
            ShedderKind::ThresholdShedder
        );
        assert_eq!(
            s.load_balancer_load_placement_strategy,
            PlacementKind::LeastResourceUsageWithWeight
        );
    }

    #[test]
    fn pairing_rules_of_5_0() {
        // Classic shedder, placement left at default: falls back to LLTMR with a warning.
        let l = load("loadBalancerLoadSheddingStrategy=ThresholdShedder\n").unwrap();
        assert_eq!(
            l.settings.load_balancer_load_placement_strategy,
            PlacementKind::LeastLongTermMessageRate
        );
        assert!(l
            .warnings
            .iter()
            .any(|w| w.message.contains("falls back to LeastLongTermMessageRate")));
        // Explicit classic pairing: as configured, no pairing warning.
        let l = load("loadBalancerLoadSheddingStrategy=OverloadShedder\nloadBalancerLoadPlacementStrategy=LeastResourceUsageWithWeight\n").unwrap();
        assert_eq!(
            l.settings.load_balancer_load_placement_strategy,
            PlacementKind::LeastResourceUsageWithWeight
        );
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        // AvgShedder with a different placement: accepted, warned.
        let l = load("loadBalancerLoadPlacementStrategy=LeastLongTermMessageRate\n").unwrap();
        assert_eq!(
            l.settings.load_balancer_load_shedding_strategy,
            ShedderKind::AvgShedder
        );
        assert!(l
            .warnings
            .iter()
            .any(|w| w.message.contains("not honoured")));
        // AvgShedder placement with a classic shedder: refused.
        let err = load("loadBalancerLoadSheddingStrategy=ThresholdShedder\nloadBalancerLoadPlacementStrategy=AvgShedder\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Conflict { ref origin, .. } if origin.line == 2),
            "{err}"
        );
        // Extensible: TransferShedder whatever is configured.
        let l = load("loadManagerClassName=org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl\nloadBalancerLoadSheddingStrategy=ThresholdShedder\n").unwrap();
        assert_eq!(
            l.settings.load_balancer_load_shedding_strategy,
            ShedderKind::TransferShedder
        );
        assert!(l
            .warnings
            .iter()
            .any(|w| w.message.contains("always uses TransferShedder")));
        assert!(load("loadManagerClassName=org.apache.pulsar.broker.loadbalance.impl.SimpleLoadManagerImpl\n").is_err());
    }

    #[test]
    fn deprecated_spellings_are_honoured_like_java() {
        let s = load("loadBalancerBandwithInResourceWeight=2.0\n")
            .unwrap()
            .settings;
        assert_eq!(s.resource_weights().bandwidth_in, 2.0);
        let s = load(
            "loadBalancerBandwithInResourceWeight=2.0\nloadBalancerBandwidthInResourceWeight=3.0\n",
        )
        .unwrap()
        .settings;
        assert_eq!(s.resource_weights().bandwidth_in, 3.0);
        let s = load("zooKeeperSessionTimeoutMillis=5000\n")
            .unwrap()
            .settings;
        assert_eq!(s.metadata_store_session_timeout_millis, 5000);
        let l = load("loadBalancerExtentionsTransferShedderDebugModeEnabled=true\n").unwrap();
        assert!(l.settings.load_balancer_debug_mode_enabled);
        let messages: Vec<&str> = l.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            ["loadBalancerExtentionsTransferShedderDebugModeEnabled is deprecated; use loadBalancerDebugModeEnabled"]
        );
        let s = load(
            "loadBalancerExtentionsTransferShedderDebugModeEnabled=true\nloadBalancerDebugModeEnabled=false\n",
        )
        .unwrap()
        .settings;
        assert!(!s.load_balancer_debug_mode_enabled, "the new key wins");
    }

    #[test]
    fn dynamic_keys_and_runtime_changes() {
        assert_eq!(
            Settings::is_dynamic("loadBalancerSheddingEnabled"),
            Some(true)
        );
        assert_eq!(
            Settings::is_dynamic("loadBalancerResourceQuotaUpdateIntervalMinutes"),
            Some(false)
        );
        assert_eq!(Settings::is_dynamic("nope"), None);
        let mut s = Settings::default();
        s.set_dynamic("loadBalancerSheddingEnabled", "false")
            .unwrap();
        assert!(!s.load_balancer_shedding_enabled);
        assert!(s
            .set_dynamic("loadBalancerEnabled", "false")
            .unwrap_err()
            .contains("not dynamic"));
        assert!(s
            .set_dynamic("maxUnloadPercentage", "7")
            .unwrap_err()
            .contains("fraction"));
        assert_eq!(s.max_unload_percentage, 0.5);
    }

    /// Found by fuzzing (fuzz/fuzz_targets/dynamic_config.rs): a dynamic shedder kept the placement paired with
    /// the old one, a combination no broker.conf loads to.
    #[test]
    fn dynamic_shedder_follows_the_pairing_rules() {
        let threshold = "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder";
        let mut s = Settings::default();
        s.set_dynamic("loadBalancerLoadSheddingStrategy", threshold)
            .unwrap();
        let from_file = load(&format!("loadBalancerLoadSheddingStrategy={threshold}\n"))
            .unwrap()
            .settings;
        assert_eq!(
            s.load_balancer_load_shedding_strategy,
            ShedderKind::ThresholdShedder
        );
        assert_eq!(
            s.load_balancer_load_placement_strategy,
            from_file.load_balancer_load_placement_strategy
        );
        s.set_dynamic("loadBalancerLoadSheddingStrategy", "AvgShedder")
            .unwrap();
        assert_eq!(
            s.load_balancer_load_placement_strategy,
            PlacementKind::AvgShedder
        );
        let mut explicit = load("loadBalancerLoadPlacementStrategy=AvgShedder\n")
            .unwrap()
            .settings;
        let e = explicit
            .set_dynamic("loadBalancerLoadSheddingStrategy", threshold)
            .unwrap_err();
        assert!(
            e.contains("needs loadBalancerLoadSheddingStrategy=AvgShedder"),
            "{e}"
        );
        assert_eq!(
            explicit.load_balancer_load_shedding_strategy,
            ShedderKind::AvgShedder
        );
    }

    #[test]
    fn broker_id_from_identity_keys() {
        let s = load("advertisedAddress=broker-1.example\n")
            .unwrap()
            .settings;
        assert_eq!(s.broker_id("ignored").unwrap(), "broker-1.example:8080");
        let s = load("webServicePort=\nwebServicePortTls=8443\n")
            .unwrap()
            .settings;
        // A blank value keeps the default, so the plain port is still 8080.
        assert_eq!(s.broker_id("h").unwrap(), "h:8080");
        let mut s = Settings {
            web_service_port: None,
            web_service_port_tls: Some(8443),
            ..Default::default()
        };
        assert_eq!(s.broker_id("h").unwrap(), "h:8443");
        s.web_service_port_tls = None;
        assert!(s.broker_id("h").is_err());
    }
}
