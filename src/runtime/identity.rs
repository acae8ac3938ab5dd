//! A broker's identity: its id `advertisedAddress:webServicePort` and the URLs built from it, as Pulsar's
//! `PulsarService.java` builds them (the broker id, `webServiceAddress`, `brokerServiceUrl`), and the nodes that
//! carry them: the `LocalBrokerData` registration, the `LeaderBroker` election node and the
//! `NamespaceEphemeralData` ownership node (their paths: the table in `docs/compatibility.md`, "The paths").

use crate::config::Settings;
use crate::model::{LeaderBroker, LocalBrokerData, NamespaceEphemeralData};

use super::RuntimeError;

/// Who a broker is and where it listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    /// Host part of the id and URLs (`advertisedAddress`, else the machine's host name).
    pub advertised_address: String,
    /// `webServicePort` (HTTP).
    pub web_service_port: Option<u16>,
    /// `webServicePortTls` (HTTPS).
    pub web_service_port_tls: Option<u16>,
    /// `brokerServicePort` (`pulsar://`).
    pub broker_service_port: Option<u16>,
    /// `brokerServicePortTls` (`pulsar+ssl://`).
    pub broker_service_port_tls: Option<u16>,
    /// `enablePersistentTopics`.
    pub persistent_topics_enabled: bool,
    /// `enableNonPersistentTopics`.
    pub non_persistent_topics_enabled: bool,
    /// `brokerVersionString` (a semantic version, for `BrokerVersionFilter`).
    pub version: String,
    /// The `loadManagerClassName` written into reports (Pulsar 3.0+ leaders drop brokers whose value differs
    /// from theirs).
    pub load_manager_class_name: String,
}

fn port(value: Option<i32>, key: &str) -> Result<Option<u16>, RuntimeError> {
    match value {
        None => Ok(None),
        Some(p) if (1..=65535).contains(&p) => Ok(Some(p as u16)),
        Some(p) => Err(RuntimeError::Config(format!(
            "{key}={p} is not a TCP port (1-65535)"
        ))),
    }
}

/// The machine's host name (`/proc/sys/kernel/hostname`, `/etc/hostname`, `$HOSTNAME`), or `localhost`.
pub fn local_host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .chain(std::env::var("HOSTNAME").ok())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

impl BrokerIdentity {
    /// The identity `broker.conf` describes (`advertisedAddress`, the four ports, the topic switches,
    /// `loadManagerClassName`). Errors name the key that is wrong.
    pub fn from_settings(settings: &Settings) -> Result<Self, RuntimeError> {
        let identity = Self {
            advertised_address: settings
                .advertised_address
                .clone()
                .filter(|a| !a.trim().is_empty())
                .unwrap_or_else(local_host_name),
            web_service_port: port(settings.web_service_port, "webServicePort")?,
            web_service_port_tls: port(settings.web_service_port_tls, "webServicePortTls")?,
            broker_service_port: port(settings.broker_service_port, "brokerServicePort")?,
            broker_service_port_tls: port(
                settings.broker_service_port_tls,
                "brokerServicePortTls",
            )?,
            persistent_topics_enabled: settings.enable_persistent_topics,
            non_persistent_topics_enabled: settings.enable_non_persistent_topics,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            load_manager_class_name: settings.load_manager_class_name.class_name().to_owned(),
        };
        identity.validate()?;
        Ok(identity)
    }

    /// Checks that the identity can name a broker.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        if self.web_service_port.is_none() && self.web_service_port_tls.is_none() {
            return Err(RuntimeError::Config(
                "neither webServicePort nor webServicePortTls is set: a broker needs one for its id".into(),
            ));
        }
        let a = &self.advertised_address;
        if a.is_empty() || a.contains('/') || a.chars().any(char::is_whitespace) {
            return Err(RuntimeError::Config(format!(
                "advertisedAddress '{a}' is not a host name or address"
            )));
        }
        Ok(())
    }

    /// The broker id: `advertisedAddress:webServicePort` (the TLS web port when there is no plain one).
    pub fn broker_id(&self) -> String {
        let port = self
            .web_service_port
            .or(self.web_service_port_tls)
            .expect("validated: a web port is set");
        format!("{}:{port}", self.advertised_address)
    }

    fn url(&self, scheme: &str, port: Option<u16>) -> Option<String> {
        port.map(|p| format!("{scheme}://{}:{p}", self.advertised_address))
    }

    /// `http://host:webServicePort`.
    pub fn web_service_url(&self) -> Option<String> {
        self.url("http", self.web_service_port)
    }

    /// `https://host:webServicePortTls`.
    pub fn web_service_url_tls(&self) -> Option<String> {
        self.url("https", self.web_service_port_tls)
    }

    /// `pulsar://host:brokerServicePort`.
    pub fn pulsar_service_url(&self) -> Option<String> {
        self.url("pulsar", self.broker_service_port)
    }

    /// `pulsar+ssl://host:brokerServicePortTls`.
    pub fn pulsar_service_url_tls(&self) -> Option<String> {
        self.url("pulsar+ssl", self.broker_service_port_tls)
    }

    /// A report with the identity filled in and no load (`loadReportType` and the sums are computed).
    pub fn empty_report(&self, now_ms: i64) -> LocalBrokerData {
        LocalBrokerData {
            broker_id: Some(self.broker_id()),
            web_service_url: self.web_service_url(),
            web_service_url_tls: self.web_service_url_tls(),
            pulsar_service_url: self.pulsar_service_url(),
            pulsar_service_url_tls: self.pulsar_service_url_tls(),
            persistent_topics_enabled: self.persistent_topics_enabled,
            non_persistent_topics_enabled: self.non_persistent_topics_enabled,
            last_update: now_ms,
            broker_version_string: Some(self.version.clone()),
            load_manager_class_name: Some(self.load_manager_class_name.clone()),
            start_timestamp: Some(now_ms),
            ..Default::default()
        }
    }

    /// The ownership payload this broker writes at `/namespace/<bundle>`.
    pub fn ownership_data(&self) -> NamespaceEphemeralData {
        NamespaceEphemeralData {
            native_url: self.pulsar_service_url(),
            native_url_tls: self.pulsar_service_url_tls(),
            http_url: self.web_service_url(),
            http_url_tls: self.web_service_url_tls(),
            disabled: false,
            advertised_listeners: Default::default(),
        }
    }

    /// The leader-election value (`{"brokerId":…,"serviceUrl":…}`, Pulsar 3.2+).
    pub fn leader_value(&self) -> LeaderBroker {
        let service = self
            .web_service_url()
            .or_else(|| self.web_service_url_tls())
            .expect("validated: a web port is set");
        LeaderBroker::new(self.broker_id(), service)
    }
}

/// The broker id an ownership node names: the host and port of its `httpUrl` (else `httpUrlTls`), which is
/// `advertisedAddress:webServicePort` for Java brokers and loadmgr alike.
pub fn owner_of(data: &NamespaceEphemeralData) -> Option<String> {
    let url = data.http_url.as_deref().or(data.http_url_tls.as_deref())?;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    (!authority.is_empty()).then(|| authority.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::json::to_json_string;

    fn identity() -> BrokerIdentity {
        let mut s = Settings::default();
        s.advertised_address = Some("broker-1.example".into());
        BrokerIdentity::from_settings(&s).unwrap()
    }

    #[test]
    fn pulsar_id_and_urls() {
        let id = identity();
        assert_eq!(id.broker_id(), "broker-1.example:8080");
        assert_eq!(
            id.web_service_url().as_deref(),
            Some("http://broker-1.example:8080")
        );
        assert_eq!(
            id.pulsar_service_url().as_deref(),
            Some("pulsar://broker-1.example:6650")
        );
        assert_eq!(id.web_service_url_tls(), None);
        assert_eq!(
            to_json_string(&id.leader_value()),
            r#"{"brokerId":"broker-1.example:8080","serviceUrl":"http://broker-1.example:8080"}"#
        );
        let own = id.ownership_data();
        assert_eq!(
            to_json_string(&own),
            r#"{"nativeUrl":"pulsar://broker-1.example:6650","httpUrl":"http://broker-1.example:8080","disabled":false,"advertisedListeners":{}}"#
        );
        assert_eq!(owner_of(&own).as_deref(), Some("broker-1.example:8080"));
        let report = id.empty_report(5);
        assert_eq!(
            report.load_manager_class_name.as_deref(),
            Some("org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl")
        );
        assert_eq!(report.last_update, 5);
        assert!(to_json_string(&report).contains(r#""loadReportType":"LocalBrokerData""#));
    }

    #[test]
    fn tls_only_and_bad_settings() {
        let mut s = Settings::default();
        s.advertised_address = Some("b".into());
        s.web_service_port = None;
        s.web_service_port_tls = Some(8443);
        let id = BrokerIdentity::from_settings(&s).unwrap();
        assert_eq!(id.broker_id(), "b:8443");
        assert_eq!(
            id.leader_value().service_url.as_deref(),
            Some("https://b:8443")
        );
        assert_eq!(owner_of(&id.ownership_data()).as_deref(), Some("b:8443"));
        s.web_service_port_tls = None;
        let e = BrokerIdentity::from_settings(&s).unwrap_err().to_string();
        assert!(e.contains("webServicePort"), "{e}");
        s.web_service_port = Some(70000);
        let e = BrokerIdentity::from_settings(&s).unwrap_err().to_string();
        assert!(e.contains("webServicePort=70000"), "{e}");
        s.web_service_port = Some(8080);
        s.advertised_address = Some("a b".into());
        assert!(BrokerIdentity::from_settings(&s).is_err());
        assert!(!local_host_name().is_empty());
    }
}
