//! The typed settings: every `broker.conf` key loadmgr knows, its type, default, whether Pulsar lets it change
//! at run time, and its documentation — one table, from which [`Settings`], [`KEYS`] and the text accessors
//! are generated. Parsing files and checking ranges live in the parent module.

use std::collections::BTreeSet;

use super::{LoadManagerKind, PlacementKind, SettingValue, ShedderKind};
use crate::bundle::SplitAlgorithm;

macro_rules! settings {
    ($( $(#[doc = $doc:literal])+ ($key:literal, dynamic = $dynamic:literal) $field:ident : $ty:ty = $default:expr; )+) => {
        /// Every load-balancing setting of `broker.conf` loadmgr honours, with loadmgr's defaults (Pulsar 5.0:
        /// AvgShedder for shedding and placement, `maxUnloadPercentage` 0.5, even distribution off, 32 bundles
        /// per new namespace; everything else as Pulsar 4.x).
        ///
        /// Units are in each field's doc; `*Percentage` integers are percent (0–100) unless a doc says
        /// fraction.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $( $(#[doc = $doc])+ pub $field: $ty, )+
            pub(super) explicit: BTreeSet<&'static str>,
        }

        impl Default for Settings {
            fn default() -> Self {
                Self { $( $field: $default, )+ explicit: BTreeSet::new() }
            }
        }

        /// Every key loadmgr knows, with whether Pulsar lets it change at run time (dynamic configuration).
        pub const KEYS: &[(&str, bool)] = &[ $( ($key, $dynamic), )+ ];

        impl Settings {
            /// Sets one key from its text; `None` when the key is not ours.
            pub(super) fn set_text(&mut self, key: &str, text: &str) -> Option<(&'static str, Result<(), String>)> {
                match key {
                    $( $key => Some(($key, <$ty as SettingValue>::parse_setting(text).map(|v| self.$field = v))), )+
                    _ => None,
                }
            }

            /// The value of `key` as `config check` prints it.
            pub fn get(&self, key: &str) -> Option<String> {
                match key {
                    $( $key => Some(self.$field.render_setting()), )+
                    _ => None,
                }
            }

            /// Every setting as `(key, value)`, sorted by key.
            pub fn entries(&self) -> Vec<(&'static str, String)> {
                let mut all = vec![ $( ($key, self.$field.render_setting()), )+ ];
                all.sort();
                all
            }
        }
    };
}

settings! {
    /// Master switch for reports, shedding and the leader's tasks.
    ("loadBalancerEnabled", dynamic = false) load_balancer_enabled: bool = true;
    /// The load manager implementation.
    ("loadManagerClassName", dynamic = true) load_manager_class_name: LoadManagerKind = LoadManagerKind::Modular;
    /// Shedding strategy (5.0 default AvgShedder). A change takes effect after a restart.
    ("loadBalancerLoadSheddingStrategy", dynamic = true) load_balancer_load_shedding_strategy: ShedderKind = ShedderKind::AvgShedder;
    /// Placement strategy (5.0 default AvgShedder, the same instance as the shedder). After loading, this
    /// holds the effective placement of the pairing rules (see [`Settings::resolve`]).
    ("loadBalancerLoadPlacementStrategy", dynamic = false) load_balancer_load_placement_strategy: PlacementKind = PlacementKind::AvgShedder;
    /// ThresholdShedder also sheds when the least loaded broker is below average − threshold.
    ("lowerBoundarySheddingEnabled", dynamic = false) lower_boundary_shedding_enabled: bool = false;
    /// Percent change of rates, bundles or weighted usage that forces a report write.
    ("loadBalancerReportUpdateThresholdPercentage", dynamic = true) load_balancer_report_update_threshold_percentage: i32 = 10;
    /// Minimum time between report writes, ms (the report check period).
    ("loadBalancerReportUpdateMinIntervalMillis", dynamic = true) load_balancer_report_update_min_interval_millis: i32 = 5000;
    /// A report is written at least this often, minutes.
    ("loadBalancerReportUpdateMaxIntervalMinutes", dynamic = true) load_balancer_report_update_max_interval_minutes: i32 = 15;
    /// Host CPU and NIC sampling period, minutes.
    ("loadBalancerHostUsageCheckIntervalMinutes", dynamic = true) load_balancer_host_usage_check_interval_minutes: i32 = 1;
    /// Automatic unloading (needs `loadBalancerEnabled`).
    ("loadBalancerSheddingEnabled", dynamic = true) load_balancer_shedding_enabled: bool = true;
    /// Shedding period, minutes.
    ("loadBalancerSheddingIntervalMinutes", dynamic = true) load_balancer_shedding_interval_minutes: i32 = 1;
    /// A bundle unloaded within this many minutes is not shed again.
    ("loadBalancerSheddingGracePeriodMinutes", dynamic = true) load_balancer_shedding_grace_period_minutes: i64 = 30;
    /// Namespaces never shed (PIP-380); their bundle data is not flushed and they are placed round-robin.
    ("loadBalancerSheddingExcludedNamespaces", dynamic = true) load_balancer_shedding_excluded_namespaces: BTreeSet<String> = BTreeSet::new();
    /// Prefer brokers with the fewest bundles of the same namespace (5.0 default false; always on for the
    /// system namespace).
    ("loadBalancerDistributeBundlesEvenlyEnabled", dynamic = true) load_balancer_distribute_bundles_evenly_enabled: bool = false;
    /// Deprecated (Simple load manager only).
    ("loadBalancerBrokerUnderloadedThresholdPercentage", dynamic = false) load_balancer_broker_underloaded_threshold_percentage: i32 = 50;
    /// A broker whose weighted max usage is above this percent is overloaded.
    ("loadBalancerBrokerOverloadedThresholdPercentage", dynamic = true) load_balancer_broker_overloaded_threshold_percentage: i32 = 85;
    /// Brokers with more topics are excluded from placement.
    ("loadBalancerBrokerMaxTopics", dynamic = true) load_balancer_broker_max_topics: i32 = 50000;
    /// ThresholdShedder band around the average, percent.
    ("loadBalancerBrokerThresholdShedderPercentage", dynamic = true) load_balancer_broker_threshold_shedder_percentage: i32 = 10;
    /// ThresholdShedder history weight of the moving average, a fraction in [0, 1].
    ("loadBalancerHistoryResourcePercentage", dynamic = true) load_balancer_history_resource_percentage: f64 = 0.9;
    /// ThresholdShedder skips offloads below this, MB/s (× 1 MiB).
    ("loadBalancerBundleUnloadMinThroughputThreshold", dynamic = true) load_balancer_bundle_unload_min_throughput_threshold: f64 = 10.0;
    /// LeastResourceUsageWithWeight candidate band, percent.
    ("loadBalancerAverageResourceUsageDifferenceThresholdPercentage", dynamic = true) load_balancer_average_resource_usage_difference_threshold_percentage: i32 = 10;
    /// CPU weight.
    ("loadBalancerCPUResourceWeight", dynamic = true) load_balancer_cpu_resource_weight: f64 = 1.0;
    /// JVM heap weight (deprecated since 3.0; default 0).
    ("loadBalancerMemoryResourceWeight", dynamic = true) load_balancer_memory_resource_weight: f64 = 0.0;
    /// Direct-memory weight (default 0).
    ("loadBalancerDirectMemoryResourceWeight", dynamic = true) load_balancer_direct_memory_resource_weight: f64 = 0.0;
    /// NIC-in weight (effective value: see the deprecated `loadBalancerBandwithInResourceWeight`).
    ("loadBalancerBandwidthInResourceWeight", dynamic = true) load_balancer_bandwidth_in_resource_weight: f64 = 1.0;
    /// NIC-out weight (effective value: see the deprecated `loadBalancerBandwithOutResourceWeight`).
    ("loadBalancerBandwidthOutResourceWeight", dynamic = true) load_balancer_bandwidth_out_resource_weight: f64 = 1.0;
    /// Deprecated misspelling; used when the new key is left at 1.0.
    ("loadBalancerBandwithInResourceWeight", dynamic = true) load_balancer_bandwith_in_resource_weight: f64 = 1.0;
    /// Deprecated misspelling; used when the new key is left at 1.0.
    ("loadBalancerBandwithOutResourceWeight", dynamic = true) load_balancer_bandwith_out_resource_weight: f64 = 1.0;
    /// UniformLoadShedder: msg-rate gap trigger, percent.
    ("loadBalancerMsgRateDifferenceShedderThreshold", dynamic = true) load_balancer_msg_rate_difference_shedder_threshold: f64 = 50.0;
    /// UniformLoadShedder: throughput ratio trigger.
    ("loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold", dynamic = true) load_balancer_msg_throughput_multiplier_difference_shedder_threshold: f64 = 4.0;
    /// Uniform/Avg shedder: fraction of the gap to move (5.0 default 0.5).
    ("maxUnloadPercentage", dynamic = true) max_unload_percentage: f64 = 0.5;
    /// UniformLoadShedder: maximum bundles per run (-1 = unlimited).
    ("maxUnloadBundleNumPerShedding", dynamic = true) max_unload_bundle_num_per_shedding: i32 = -1;
    /// Uniform/Avg shedder: minimum msg/s worth moving.
    ("minUnloadMessage", dynamic = true) min_unload_message: i32 = 1000;
    /// Uniform/Avg shedder: minimum B/s worth moving.
    ("minUnloadMessageThroughput", dynamic = true) min_unload_message_throughput: i32 = 1_048_576;
    /// Threshold/Overload shedder always pick at least one bundle.
    ("atLeastOneBundleSelected", dynamic = true) at_least_one_bundle_selected: bool = true;
    /// AvgShedder low score-gap threshold, points (0–100).
    ("loadBalancerAvgShedderLowThreshold", dynamic = true) load_balancer_avg_shedder_low_threshold: i32 = 15;
    /// AvgShedder high score-gap threshold, points.
    ("loadBalancerAvgShedderHighThreshold", dynamic = true) load_balancer_avg_shedder_high_threshold: i32 = 40;
    /// Consecutive checks needed above the low threshold.
    ("loadBalancerAvgShedderHitCountLowThreshold", dynamic = true) load_balancer_avg_shedder_hit_count_low_threshold: i32 = 8;
    /// Consecutive checks needed above the high threshold.
    ("loadBalancerAvgShedderHitCountHighThreshold", dynamic = true) load_balancer_avg_shedder_hit_count_high_threshold: i32 = 2;
    /// BandShedder: the cluster is balanced while max − min score is at most this, points (0–100).
    ("loadmgrBandShedderSpreadPercentage", dynamic = true) loadmgr_band_shedder_spread_percentage: f64 = 10.0;
    /// BandShedder: a large plan moves bundles until the predicted spread is at most this, points; below the
    /// trigger spread so that report noise and the plan's own error do not start the next plan. A small
    /// correction keeps half that margin (docs/band-shedder.md, step 5).
    ("loadmgrBandShedderPlanSpreadPercentage", dynamic = true) loadmgr_band_shedder_plan_spread_percentage: f64 = 7.0;
    /// BandShedder: consecutive cycles a broker must be outside the band before a plan is made (a broker with
    /// no bundles, or one that joined since the last cycle, counts at once).
    ("loadmgrBandShedderHitCount", dynamic = true) loadmgr_band_shedder_hit_count: i32 = 2;
    /// BandShedder: most moves one plan may contain (0 = no limit).
    ("loadmgrBandShedderMaxMovesPerCycle", dynamic = true) loadmgr_band_shedder_max_moves_per_cycle: i32 = 100;
    /// BandShedder: seconds after a broker joins, or after a plan that stopped at its move budget, until an
    /// early cycle acts on it (once the last moves show in the reports) instead of the next regular tick;
    /// 0 = regular ticks only.
    ("loadmgrBandShedderEarlyCycleSeconds", dynamic = true) loadmgr_band_shedder_early_cycle_seconds: i64 = 10;
    /// BandShedder: a bundle is never planned back onto a broker it was moved off within this many minutes.
    ("loadmgrBandShedderNoReturnMinutes", dynamic = true) loadmgr_band_shedder_no_return_minutes: i64 = 60;
    /// BandShedder: a broker that left at most this many minutes after another broker came back (and not
    /// before) is in a rolling restart; when it comes back it is left to placement, not refilled by moves,
    /// for that gap plus a shedding interval, while it scores below the others' mean and every other broker
    /// is at least half a band below `loadBalancerBrokerOverloadedThresholdPercentage`; 0 = never.
    ("loadmgrBandShedderRollingRestartMinutes", dynamic = true) loadmgr_band_shedder_rolling_restart_minutes: i64 = 15;
    /// Leader flush period of bundle data and broker time averages, minutes.
    ("loadBalancerResourceQuotaUpdateIntervalMinutes", dynamic = false) load_balancer_resource_quota_update_interval_minutes: i32 = 15;
    /// Deprecated (Simple load manager only).
    ("loadBalancerBrokerComfortLoadLevelPercentage", dynamic = false) load_balancer_broker_comfort_load_level_percentage: i32 = 65;
    /// Leader splits hot bundles.
    ("loadBalancerAutoBundleSplitEnabled", dynamic = true) load_balancer_auto_bundle_split_enabled: bool = true;
    /// Unload the children of an automatic split.
    ("loadBalancerAutoUnloadSplitBundlesEnabled", dynamic = true) load_balancer_auto_unload_split_bundles_enabled: bool = true;
    /// Split trigger: topics in a bundle.
    ("loadBalancerNamespaceBundleMaxTopics", dynamic = true) load_balancer_namespace_bundle_max_topics: i32 = 1000;
    /// Split trigger: producers + consumers (≤ 0 disables).
    ("loadBalancerNamespaceBundleMaxSessions", dynamic = true) load_balancer_namespace_bundle_max_sessions: i32 = 1000;
    /// Split trigger: long-term msg/s in + out.
    ("loadBalancerNamespaceBundleMaxMsgRate", dynamic = true) load_balancer_namespace_bundle_max_msg_rate: i32 = 30000;
    /// Split trigger: long-term MB/s in + out (× 1 MiB).
    ("loadBalancerNamespaceBundleMaxBandwidthMbytes", dynamic = true) load_balancer_namespace_bundle_max_bandwidth_mbytes: i32 = 100;
    /// No split when the namespace already has this many bundles.
    ("loadBalancerNamespaceMaximumBundles", dynamic = true) load_balancer_namespace_maximum_bundles: i32 = 128;
    /// flow_or_qps_equally_divide tolerance, percent.
    ("flowOrQpsDifferenceThresholdPercentage", dynamic = true) flow_or_qps_difference_threshold_percentage: i32 = 10;
    /// Split algorithms the admin API accepts.
    ("supportedNamespaceBundleSplitAlgorithms", dynamic = true) supported_namespace_bundle_split_algorithms: Vec<String> = SplitAlgorithm::ALL.iter().map(|a| a.name().to_owned()).collect();
    /// Split algorithm when a request names none (never specified_positions_divide).
    ("defaultNamespaceBundleSplitAlgorithm", dynamic = true) default_namespace_bundle_split_algorithm: SplitAlgorithm = SplitAlgorithm::RangeEquallyDivide;
    /// Bundles of a new namespace without a bundle spec (5.0 default 32).
    ("defaultNumberOfNamespaceBundles", dynamic = true) default_number_of_namespace_bundles: i32 = 32;
    /// Topic → bundle mapping class (only the consistent-hashing assigner is supported).
    ("topicBundleAssignmentStrategy", dynamic = false) topic_bundle_assignment_strategy: String = "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner".to_owned();
    /// Replaces the detected NIC speed, Gbit/s per NIC.
    ("loadBalancerOverrideBrokerNicSpeedGbps", dynamic = false) load_balancer_override_broker_nic_speed_gbps: Option<f64> = None;
    /// Top-K bundle data per broker written by the leader (≤ 0 = all).
    ("loadBalancerMaxNumberOfBundlesInBundleLoadReport", dynamic = true) load_balancer_max_number_of_bundles_in_bundle_load_report: i32 = 10;
    /// Unload wait, ms.
    ("namespaceBundleUnloadingTimeoutMs", dynamic = true) namespace_bundle_unloading_timeout_ms: i64 = 60000;
    /// BrokerVersionFilter keeps only the newest brokers.
    ("preferLaterVersions", dynamic = true) prefer_later_versions: bool = false;
    /// Anti-affinity spreads across failure domains.
    ("failureDomainsEnabled", dynamic = true) failure_domains_enabled: bool = false;
    /// Extensible: debug logging of decisions.
    ("loadBalancerDebugModeEnabled", dynamic = true) load_balancer_debug_mode_enabled: bool = false;
    /// Deprecated spelling of `loadBalancerDebugModeEnabled` (the key of Pulsar's first TransferShedder);
    /// sets it when that key is not set explicitly.
    ("loadBalancerExtentionsTransferShedderDebugModeEnabled", dynamic = true) load_balancer_extentions_transfer_shedder_debug_mode_enabled: bool = false;
    /// TransferShedder: target standard deviation of broker load (fraction).
    ("loadBalancerBrokerLoadTargetStd", dynamic = true) load_balancer_broker_load_target_std: f64 = 0.25;
    /// TransferShedder: consecutive cycles over target before shedding.
    ("loadBalancerSheddingConditionHitCountThreshold", dynamic = true) load_balancer_shedding_condition_hit_count_threshold: i32 = 3;
    /// TransferShedder: transfer (planned destination) instead of plain unload.
    ("loadBalancerTransferEnabled", dynamic = true) load_balancer_transfer_enabled: bool = true;
    /// TransferShedder: maximum brokers shed per cycle.
    ("loadBalancerMaxNumberOfBrokerSheddingPerCycle", dynamic = true) load_balancer_max_number_of_broker_shedding_per_cycle: i32 = 3;
    /// TransferShedder: cool-down after an unload, seconds.
    ("loadBalanceSheddingDelayInSeconds", dynamic = true) load_balance_shedding_delay_in_seconds: i64 = 180;
    /// TransferShedder: broker load data older than this is ignored, seconds.
    ("loadBalancerBrokerLoadDataTTLInSeconds", dynamic = true) load_balancer_broker_load_data_ttl_in_seconds: i64 = 1800;
    /// Extensible split period, minutes.
    ("loadBalancerSplitIntervalMinutes", dynamic = true) load_balancer_split_interval_minutes: i32 = 1;
    /// Extensible: maximum splits per cycle.
    ("loadBalancerMaxNumberOfBundlesToSplitPerCycle", dynamic = true) load_balancer_max_number_of_bundles_to_split_per_cycle: i32 = 10;
    /// Extensible: consecutive hits before a split.
    ("loadBalancerNamespaceBundleSplitConditionHitCountThreshold", dynamic = true) load_balancer_namespace_bundle_split_condition_hit_count_threshold: i32 = 3;
    /// TransferShedder: also shed bundles with isolation or anti-affinity policies.
    ("loadBalancerSheddingBundlesWithPoliciesEnabled", dynamic = true) load_balancer_shedding_bundles_with_policies_enabled: bool = false;
    /// Extensible: multi-phase bundle unload.
    ("loadBalancerMultiPhaseBundleUnload", dynamic = true) load_balancer_multi_phase_bundle_unload: bool = true;
    /// loadmgr: weight LeastLongTermMessageRate scores by `1 / (overload threshold − max usage)` as the seed
    /// docs describe (Pulsar removed it in PR #442); off = Pulsar's current behaviour.
    ("loadmgrLeastLongTermMessageRateUsageWeighting", dynamic = false) loadmgr_least_long_term_message_rate_usage_weighting: bool = false;
    /// Metadata-store session timeout, ms (`zooKeeperSessionTimeoutMillis` > 0 overrides it).
    ("metadataStoreSessionTimeoutMillis", dynamic = false) metadata_store_session_timeout_millis: i64 = 30000;
    /// Deprecated; overrides `metadataStoreSessionTimeoutMillis` when > 0.
    ("zooKeeperSessionTimeoutMillis", dynamic = false) zoo_keeper_session_timeout_millis: i64 = -1;
    /// Metadata-store operation timeout, s (`zooKeeperOperationTimeoutSeconds` > 0 overrides it).
    ("metadataStoreOperationTimeoutSeconds", dynamic = false) metadata_store_operation_timeout_seconds: i32 = 30;
    /// Deprecated; overrides `metadataStoreOperationTimeoutSeconds` when > 0.
    ("zooKeeperOperationTimeoutSeconds", dynamic = false) zoo_keeper_operation_timeout_seconds: i32 = -1;
    /// Metadata cache expiry, s (`zooKeeperCacheExpirySeconds` > 0 overrides it).
    ("metadataStoreCacheExpirySeconds", dynamic = false) metadata_store_cache_expiry_seconds: i32 = 300;
    /// Deprecated; overrides `metadataStoreCacheExpirySeconds` when > 0.
    ("zooKeeperCacheExpirySeconds", dynamic = false) zoo_keeper_cache_expiry_seconds: i32 = -1;
    /// Metadata store URL (`zk:`, `etcd:` or `memory:`), used when no `--store` is given.
    ("metadataStoreUrl", dynamic = false) metadata_store_url: Option<String> = None;
    /// Pulsar's metadata store configuration file (YAML). loadmgr reads the etcd TLS keys Pulsar defines there:
    /// `useTls`, `tlsTrustCertsFilePath`, `tlsCertificateFilePath`, `tlsKeyFilePath`, `authority`.
    ("metadataStoreConfigPath", dynamic = false) metadata_store_config_path: Option<String> = None;
    /// loadmgr: the user the broker authenticates as on the store — ZooKeeper digest (`addauth digest`) or an
    /// etcd user (Pulsar has no such key: it authenticates to ZooKeeper through SASL and has no etcd users).
    ("loadmgrMetadataStoreUser", dynamic = false) loadmgr_metadata_store_user: Option<String> = None;
    /// loadmgr: that user's password. Prefer `loadmgrMetadataStorePasswordFile`: broker.conf is often readable
    /// by everyone on the machine (`config check` prints it masked).
    ("loadmgrMetadataStorePassword", dynamic = false) loadmgr_metadata_store_password: Option<String> = None;
    /// loadmgr: a file whose first line is that user's password.
    ("loadmgrMetadataStorePasswordFile", dynamic = false) loadmgr_metadata_store_password_file: Option<String> = None;
    /// loadmgr: the ACL of every ZooKeeper node loadmgr creates: `open` (`world:anyone` may do everything,
    /// Pulsar's `OPEN_ACL_UNSAFE`), `creator-all-world-read` (the authenticated user may do everything, anyone
    /// may read; recommended with a user) or `creator-only`. The last two need `loadmgrMetadataStoreUser`.
    ("loadmgrZookeeperAcl", dynamic = false) loadmgr_zookeeper_acl: String = "open".to_owned();
    /// Cluster name (heartbeat namespaces are `pulsar/<cluster>/<broker>`).
    ("clusterName", dynamic = false) cluster_name: Option<String> = None;
    /// Host part of the broker id and URLs (unset: the machine's host name).
    ("advertisedAddress", dynamic = false) advertised_address: Option<String> = None;
    /// Address the broker binds to.
    ("bindAddress", dynamic = false) bind_address: String = "0.0.0.0".to_owned();
    /// HTTP port; the broker id's port when set.
    ("webServicePort", dynamic = false) web_service_port: Option<i32> = Some(8080);
    /// HTTPS port; the broker id's port when there is no HTTP port.
    ("webServicePortTls", dynamic = false) web_service_port_tls: Option<i32> = None;
    /// The web service's certificate chain (PEM), for `webServicePortTls`.
    ("tlsCertificateFilePath", dynamic = false) tls_certificate_file_path: Option<String> = None;
    /// The key of that certificate (PEM: PKCS #8, PKCS #1 or SEC1).
    ("tlsKeyFilePath", dynamic = false) tls_key_file_path: Option<String> = None;
    /// CA certificates (PEM) the broker trusts when it calls another broker over HTTPS (the leader, for a
    /// lookup); the system's roots are not used.
    ("tlsTrustCertsFilePath", dynamic = false) tls_trust_certs_file_path: Option<String> = None;
    /// Whether the web service authenticates clients (with the providers of `authenticationProviders`).
    ("authenticationEnabled", dynamic = false) authentication_enabled: bool = false;
    /// Authentication providers (class names); loadmgr implements
    /// `org.apache.pulsar.broker.authentication.AuthenticationProviderToken` (JWT in `Authorization: Bearer`).
    ("authenticationProviders", dynamic = false) authentication_providers: Vec<String> = Vec::new();
    /// Whether authenticated roles are checked: admin and configuration endpoints need a super-user role.
    ("authorizationEnabled", dynamic = false) authorization_enabled: bool = false;
    /// Roles that may do everything (the `sub` claim of their tokens).
    ("superUserRoles", dynamic = false) super_user_roles: Vec<String> = Vec::new();
    /// The HMAC key of signed tokens: `data:;base64,<key>`, `file:///path`, `env:VAR` or the key in base64.
    ("tokenSecretKey", dynamic = false) token_secret_key: Option<String> = None;
    /// The public key (PEM or DER, same forms as `tokenSecretKey`) of tokens signed with `tokenPublicAlg`.
    ("tokenPublicKey", dynamic = false) token_public_key: Option<String> = None;
    /// The claim that holds the role.
    ("tokenAuthClaim", dynamic = false) token_auth_claim: String = "sub".to_owned();
    /// The algorithm of tokens checked with `tokenPublicKey` (RS256, RS384, RS512, PS256, PS384, PS512, ES256,
    /// ES384).
    ("tokenPublicAlg", dynamic = false) token_public_alg: String = "RS256".to_owned();
    /// The claim that holds the audience; empty: the audience is not checked.
    ("tokenAudienceClaim", dynamic = false) token_audience_claim: Option<String> = None;
    /// The audience a token must name in `tokenAudienceClaim`.
    ("tokenAudience", dynamic = false) token_audience: Option<String> = None;
    /// Whether `/metrics` needs authentication too (Pulsar's broker default: no).
    ("authenticateMetricsEndpoint", dynamic = false) authenticate_metrics_endpoint: bool = false;
    /// Binary protocol port (`pulsar://`).
    ("brokerServicePort", dynamic = false) broker_service_port: Option<i32> = Some(6650);
    /// Binary protocol TLS port (`pulsar+ssl://`).
    ("brokerServicePortTls", dynamic = false) broker_service_port_tls: Option<i32> = None;
    /// Serve persistent topics.
    ("enablePersistentTopics", dynamic = false) enable_persistent_topics: bool = true;
    /// Serve non-persistent topics.
    ("enableNonPersistentTopics", dynamic = false) enable_non_persistent_topics: bool = true;
    /// loadmgr runtime: shedding period in ms; when > 0 it replaces `loadBalancerSheddingIntervalMinutes`
    /// (tests and demos; 0 = use the minute setting).
    ("loadmgrSheddingIntervalMillis", dynamic = false) loadmgr_shedding_interval_millis: i64 = 0;
    /// loadmgr runtime: flush period of bundle data and time averages in ms; when > 0 it replaces
    /// `loadBalancerResourceQuotaUpdateIntervalMinutes` (0 = use the minute setting).
    ("loadmgrResourceQuotaUpdateIntervalMillis", dynamic = false) loadmgr_resource_quota_update_interval_millis: i64 = 0;
    /// loadmgr runtime: host CPU/NIC sampling period in ms; when > 0 it replaces
    /// `loadBalancerHostUsageCheckIntervalMinutes` (0 = use the minute setting).
    ("loadmgrHostUsageCheckIntervalMillis", dynamic = false) loadmgr_host_usage_check_interval_millis: i64 = 0;
    /// loadmgr runtime: forced report period in ms; when > 0 it replaces
    /// `loadBalancerReportUpdateMaxIntervalMinutes` (0 = use the minute setting).
    ("loadmgrReportUpdateMaxIntervalMillis", dynamic = false) loadmgr_report_update_max_interval_millis: i64 = 0;
    /// loadmgr runtime: seed of the leader's random choices (placement among equal brokers); the same seed and
    /// the same inputs give the same decisions.
    ("loadmgrRandomSeed", dynamic = false) loadmgr_random_seed: i64 = 0;
}
