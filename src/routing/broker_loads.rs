//! Pulsar brokers as routing targets: broker reports plus failure domains in, router topology and loads out.
//!
//! This is the pure half of the store-fed load source. [`BrokerRouting::update`] takes the current
//! `LocalBrokerData` reports (broker id → report, as read from `/loadbalance/brokers/<id>`) and the
//! failure-domain map (broker id → domain name) and returns a [`BrokerSnapshot`]: a [`Topology`] for
//! [`LoadAwareRouter::set_topology`](super::LoadAwareRouter::set_topology) and per-broker loads for
//! [`LoadMapping::set_remote`](super::LoadMapping::set_remote). [`BrokerRouting::update_reports`] does the
//! same from [`BrokerReport`]s, which also cover the Simple load manager's `LoadReport`.
//!
//! [`StoreLoadSource`](super::StoreLoadSource) is the other half: it reads the reports and failure domains
//! from the metadata store, follows their notifications and calls this module on every change.
//!
//! Mapping, per broker:
//! * **target id**: a stable number per broker id, assigned in order of first appearance and never reused,
//!   so a broker that leaves and comes back keeps its id ([`BrokerRouting::target_id`],
//!   [`BrokerRouting::broker_id`]);
//! * **host**: [`LocalBrokerData::host`] (from the web-service or broker-service URL), else the broker id up
//!   to its last `:` (Pulsar's own rule for a broker's host); an empty host makes the placement unknown;
//! * **worker**: the broker id (one broker process per id);
//! * **rack**: the broker's failure domain; a broker without one is in [`PULSAR_DEFAULT_DOMAIN`], which is
//!   the snapshot topology's default rack;
//! * **load**: [`LocalBrokerData::max_resource_usage`] (largest of CPU, direct memory, NIC in/out usage, as a
//!   fraction; [`LoadReport::max_resource_usage`] for a Simple report), clamped to `0.0..=1.0`. Brokers are never on the sender's worker, so they are remote loads
//!   with no pending part; a connection-aware feeder can add its pending counts with [`Load::remote`].

use std::collections::BTreeMap;

use crate::model::{LoadManagerReport, LoadReport, LocalBrokerData};

use super::load::sanitize;
use super::{Load, Location, TargetId, TargetPlacement, Topology};

/// The failure domain of a broker that belongs to none (Pulsar's name for it).
pub const PULSAR_DEFAULT_DOMAIN: &str = "default";

/// Stable target ids for broker ids, and the conversion of broker reports into router input.
#[derive(Debug, Clone, Default)]
pub struct BrokerRouting {
    ids: BTreeMap<String, TargetId>,
    names: Vec<String>,
}

/// Router input derived from one set of broker reports.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerSnapshot {
    /// The source and one target per reporting broker, in broker-id order; default rack
    /// [`PULSAR_DEFAULT_DOMAIN`].
    pub topology: Topology,
    /// Each reporting broker's load as a fraction in `0.0..=1.0`.
    pub loads: BTreeMap<TargetId, f64>,
}

/// What the router takes from one broker report, whichever load manager wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerReport {
    /// The broker's host from its advertised URLs, if the report has one.
    pub host: Option<String>,
    /// The largest resource usage as a fraction (not yet clamped).
    pub max_usage: f64,
}

impl BrokerReport {
    /// From a modular load manager's `LocalBrokerData`.
    pub fn from_local(report: &LocalBrokerData) -> Self {
        Self {
            host: report.host().map(str::to_string),
            max_usage: report.max_resource_usage(),
        }
    }

    /// From a Simple load manager's `LoadReport` (host from the same URLs, in the same order, as
    /// [`LocalBrokerData::host`]).
    pub fn from_simple(report: &LoadReport) -> Self {
        let urls = LocalBrokerData {
            web_service_url: report.web_service_url.clone(),
            web_service_url_tls: report.web_service_url_tls.clone(),
            pulsar_service_url: report.pulsar_service_url.clone(),
            ..LocalBrokerData::default()
        };
        Self {
            host: urls.host().map(str::to_string),
            max_usage: report.max_resource_usage(),
        }
    }

    /// From either kind of report.
    pub fn from_manager_report(report: &LoadManagerReport) -> Self {
        match report {
            LoadManagerReport::Modular(r) => Self::from_local(r),
            LoadManagerReport::Simple(r) => Self::from_simple(r),
        }
    }

    /// Parses the bytes of a `/loadbalance/brokers/<id>` node with Pulsar's rule for telling the two kinds
    /// apart ([`LoadManagerReport::from_slice`]).
    ///
    /// # Errors
    ///
    /// The JSON error for bytes that are not a report.
    pub fn parse(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        LoadManagerReport::from_slice(bytes).map(|r| Self::from_manager_report(&r))
    }
}

impl BrokerSnapshot {
    /// The loads as remote [`Load`]s (no pending part), ready for
    /// [`LoadMapping::set_remote`](super::LoadMapping::set_remote).
    pub fn remote_loads(&self) -> impl Iterator<Item = (TargetId, Load)> + '_ {
        self.loads.iter().map(|(id, l)| (*id, Load::remote(*l, 0)))
    }
}

impl BrokerRouting {
    /// No brokers known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Converts `reports` (broker id → report) and `domains` (broker id → failure domain; brokers missing
    /// from it are in [`PULSAR_DEFAULT_DOMAIN`]) into router input, as seen from `source` (the sender's own
    /// location; its `rack: None` also means the default domain). New broker ids get new target ids.
    pub fn update(
        &mut self,
        source: &Location,
        reports: &BTreeMap<String, LocalBrokerData>,
        domains: &BTreeMap<String, String>,
    ) -> BrokerSnapshot {
        let reports: BTreeMap<String, BrokerReport> = reports
            .iter()
            .map(|(broker, r)| (broker.clone(), BrokerReport::from_local(r)))
            .collect();
        self.update_reports(source, &reports, domains)
    }

    /// [`Self::update`] from [`BrokerReport`]s (either kind of load report).
    pub fn update_reports(
        &mut self,
        source: &Location,
        reports: &BTreeMap<String, BrokerReport>,
        domains: &BTreeMap<String, String>,
    ) -> BrokerSnapshot {
        let mut targets = Vec::with_capacity(reports.len());
        let mut loads = BTreeMap::new();
        for (broker, report) in reports {
            let id = self.intern(broker);
            let host = report
                .host
                .as_deref()
                .unwrap_or_else(|| host_of_broker_id(broker));
            let location = (!host.is_empty()).then(|| Location {
                host: host.to_string(),
                worker: broker.clone(),
                rack: domains.get(broker).cloned(),
            });
            targets.push(TargetPlacement { id, location });
            loads.insert(id, sanitize(report.max_usage));
        }
        let mut topology = Topology::new(source.clone(), targets);
        topology.default_rack = PULSAR_DEFAULT_DOMAIN.to_string();
        BrokerSnapshot { topology, loads }
    }

    /// The target id of a broker seen before.
    pub fn target_id(&self, broker: &str) -> Option<TargetId> {
        self.ids.get(broker).copied()
    }

    /// The broker id behind a target id.
    pub fn broker_id(&self, target: TargetId) -> Option<&str> {
        self.names.get(target.0 as usize).map(String::as_str)
    }

    fn intern(&mut self, broker: &str) -> TargetId {
        if let Some(id) = self.ids.get(broker) {
            return *id;
        }
        let id =
            TargetId(u32::try_from(self.names.len()).expect("fewer than 2^32 distinct broker ids"));
        self.ids.insert(broker.to_string(), id);
        self.names.push(broker.to_string());
        id
    }
}

/// A broker id is `host:port`; the host is everything before the last `:` (the whole id without one).
fn host_of_broker_id(broker: &str) -> &str {
    broker.rsplit_once(':').map_or(broker, |(host, _)| host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ResourceUsage;
    use crate::routing::{LoadAwareRouter, LoadMapping, RouterConfig, Scope};

    fn report(url: Option<&str>, cpu: f64, nic_out: f64) -> LocalBrokerData {
        LocalBrokerData {
            web_service_url: url.map(str::to_string),
            cpu: ResourceUsage::new(cpu, 100.0),
            bandwidth_out: ResourceUsage::new(nic_out, 100.0),
            ..LocalBrokerData::default()
        }
    }

    fn cluster() -> (BTreeMap<String, LocalBrokerData>, BTreeMap<String, String>) {
        let reports = BTreeMap::from([
            (
                "a.example:8080".to_string(),
                report(Some("http://a.example:8080"), 10.0, 90.0),
            ),
            (
                "a.example:8081".to_string(),
                report(Some("http://a.example:8081"), 20.0, 0.0),
            ),
            (
                "b.example:8080".to_string(),
                report(Some("http://b.example:8080"), 150.0, 0.0),
            ),
            ("c.example:8080".to_string(), report(None, 30.0, 0.0)),
            (
                "d.example:8080".to_string(),
                report(Some("http://d.example:8080"), 0.0, 0.0),
            ),
        ]);
        let domains = BTreeMap::from([
            ("a.example:8080".to_string(), "dc-1".to_string()),
            ("a.example:8081".to_string(), "dc-1".to_string()),
            ("b.example:8080".to_string(), "dc-1".to_string()),
            ("c.example:8080".to_string(), "dc-2".to_string()),
        ]);
        (reports, domains)
    }

    #[test]
    fn reports_become_locations_and_loads() {
        let (reports, domains) = cluster();
        let source = Location::new("a.example", "a.example:8080", "dc-1");
        let mut routing = BrokerRouting::new();
        let snap = routing.update(&source, &reports, &domains);

        let scopes: Vec<(String, Scope)> = snap
            .topology
            .scopes()
            .into_iter()
            .map(|(id, s)| (routing.broker_id(id).unwrap().to_string(), s))
            .collect();
        assert_eq!(
            scopes,
            vec![
                ("a.example:8080".to_string(), Scope::WorkerLocal),
                ("a.example:8081".to_string(), Scope::HostLocal),
                ("b.example:8080".to_string(), Scope::RackLocal),
                ("c.example:8080".to_string(), Scope::Everything),
                // No domain: the default domain, which is not the source's dc-1.
                ("d.example:8080".to_string(), Scope::Everything),
            ]
        );
        let c = &snap.topology.targets[3];
        assert_eq!(
            c.location.as_ref().unwrap().host,
            "c.example",
            "host from the broker id when the report has no URL"
        );

        let load = |broker: &str| snap.loads[&routing.target_id(broker).unwrap()];
        assert!(
            (load("a.example:8080") - 0.9).abs() < 1e-6,
            "largest resource wins"
        );
        assert!((load("a.example:8081") - 0.2).abs() < 1e-6);
        assert_eq!(load("b.example:8080"), 1.0, "over 100 % is clamped");
        assert_eq!(load("d.example:8080"), 0.0);
    }

    #[test]
    fn brokers_without_a_domain_share_the_default_one() {
        let (reports, _) = cluster();
        let source = Location::without_rack("z.example", "z.example:8080");
        let snap = BrokerRouting::new().update(&source, &reports, &BTreeMap::new());
        assert!(snap
            .topology
            .scopes()
            .iter()
            .all(|(_, s)| *s == Scope::RackLocal));
        assert_eq!(snap.topology.default_rack, PULSAR_DEFAULT_DOMAIN);
    }

    #[test]
    fn ids_are_stable_across_updates() {
        let (mut reports, domains) = cluster();
        let source = Location::new("a.example", "a.example:8080", "dc-1");
        let mut routing = BrokerRouting::new();
        routing.update(&source, &reports, &domains);
        let b = routing.target_id("b.example:8080").unwrap();

        let gone = reports.remove("b.example:8080").unwrap();
        reports.insert("0.example:8080".to_string(), report(None, 0.0, 0.0));
        let snap = routing.update(&source, &reports, &domains);
        assert!(!snap.loads.contains_key(&b));
        assert_eq!(
            routing.target_id("0.example:8080"),
            Some(TargetId(5)),
            "new id, not b's"
        );

        reports.insert("b.example:8080".to_string(), gone);
        routing.update(&source, &reports, &domains);
        assert_eq!(routing.target_id("b.example:8080"), Some(b));
        assert_eq!(routing.broker_id(b), Some("b.example:8080"));
        assert_eq!(routing.broker_id(TargetId(99)), None);
    }

    #[test]
    fn a_snapshot_drives_a_router() {
        let (reports, domains) = cluster();
        // The sender is a client on host a.example, not a broker: both a.example brokers are host-local.
        let source = Location::new("a.example", "client", "dc-1");
        let mut routing = BrokerRouting::new();
        let snap = routing.update(&source, &reports, &domains);
        let router = LoadAwareRouter::new(
            &snap.topology,
            RouterConfig {
                seed: Some(1),
                ..RouterConfig::default()
            },
        )
        .unwrap();
        assert_eq!(router.scope(), Scope::HostLocal);
        let loads = LoadMapping::new();
        loads.set_remote(snap.remote_loads());
        router.refresh(&loads);
        let weight = |b: &str| {
            let id = routing.target_id(b).unwrap();
            router
                .weights()
                .into_iter()
                .find(|(t, _)| *t == id)
                .unwrap()
                .1
        };
        assert_eq!(
            weight("a.example:8080"),
            90,
            "0.9 is far above the scope minimum 0.2"
        );
        assert_eq!(weight("a.example:8081"), 100);
    }

    #[test]
    fn both_kinds_of_report_parse() {
        let simple = BrokerReport::parse(
            br#"{"name":"s.example:8080","underLoaded":false,"webServiceUrl":"http://s.example:8080",
                "systemResourceUsage":{"cpu":{"usage":50.0,"limit":200.0},"bandwidthOut":{"usage":30.0,"limit":100.0}}}"#,
        )
        .unwrap();
        assert_eq!(simple.host.as_deref(), Some("s.example"));
        assert!((simple.max_usage - 0.3).abs() < 1e-6);

        let modular = BrokerReport::parse(
            br#"{"pulsarServiceUrl":"pulsar://m.example:6650","cpu":{"usage":75.0,"limit":100.0}}"#,
        )
        .unwrap();
        assert_eq!(modular.host.as_deref(), Some("m.example"));
        assert!((modular.max_usage - 0.75).abs() < 1e-6);

        assert!(BrokerReport::parse(b"{not json").is_err());
        assert!(BrokerReport::parse(b"[1,2]").is_err());

        let reports = BTreeMap::from([
            ("s.example:8080".to_string(), simple),
            ("m.example:8080".to_string(), modular),
        ]);
        let mut routing = BrokerRouting::new();
        let source = Location::without_rack("client", "client");
        let snap = routing.update_reports(&source, &reports, &BTreeMap::new());
        let load = |b: &str| snap.loads[&routing.target_id(b).unwrap()];
        assert!((load("s.example:8080") - 0.3).abs() < 1e-6);
        assert!((load("m.example:8080") - 0.75).abs() < 1e-6);
    }
}
