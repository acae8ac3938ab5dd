//! Namespace and topic names as Pulsar spells them.

use std::fmt;
use std::str::FromStr;

use super::BundleError;

/// A namespace: `tenant/ns` (V2) or `property/cluster/ns` (V1, still found in old clusters and in brokers'
/// heartbeat namespaces `pulsar/<cluster>/<host:port>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamespaceName {
    tenant: String,
    cluster: Option<String>,
    local: String,
}

/// Pulsar's rule for each part of a name (`NamedEntity.checkName`, Java's `^[-=:.\w]*$` where `\w` is ASCII):
/// ASCII letters and digits, `_`, `-`, `=`, `:`, `.`; not empty.
fn check_part(kind: &'static str, whole: &str, part: &str) -> Result<(), BundleError> {
    let ok = !part.is_empty()
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '=' | ':' | '.'));
    if ok {
        Ok(())
    } else {
        Err(BundleError::InvalidName {
            kind,
            value: whole.to_owned(),
            reason: format!(
                "'{part}' must be non-empty and use only ASCII letters, digits, _ - = : ."
            ),
        })
    }
}

impl NamespaceName {
    /// Parses `tenant/ns` or `property/cluster/ns`.
    pub fn parse(text: &str) -> Result<Self, BundleError> {
        let parts: Vec<&str> = text.split('/').collect();
        let invalid = |reason: &str| BundleError::InvalidName {
            kind: "namespace",
            value: text.to_owned(),
            reason: reason.to_owned(),
        };
        match parts.as_slice() {
            [tenant, local] => {
                check_part("namespace", text, tenant)?;
                check_part("namespace", text, local)?;
                Ok(Self {
                    tenant: (*tenant).to_owned(),
                    cluster: None,
                    local: (*local).to_owned(),
                })
            }
            [tenant, cluster, local] => {
                check_part("namespace", text, tenant)?;
                check_part("namespace", text, cluster)?;
                check_part("namespace", text, local)?;
                Ok(Self {
                    tenant: (*tenant).to_owned(),
                    cluster: Some((*cluster).to_owned()),
                    local: (*local).to_owned(),
                })
            }
            _ => Err(invalid(
                "expected tenant/namespace or property/cluster/namespace",
            )),
        }
    }

    /// The tenant (V1: the property).
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The cluster of a V1 name.
    pub fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }

    /// The namespace's own name.
    pub fn local_name(&self) -> &str {
        &self.local
    }

    /// Whether this is a V1 (`property/cluster/ns`) name.
    pub fn is_v1(&self) -> bool {
        self.cluster.is_some()
    }

    /// Pulsar's system namespace `pulsar/system`, whose bundles are always spread evenly.
    pub fn is_system(&self) -> bool {
        self.tenant == "pulsar" && self.cluster.is_none() && self.local == "system"
    }

    /// A broker's heartbeat or SLA-monitor namespace (`pulsar/<cluster>/<broker>` V1, `pulsar/<broker>` V2,
    /// where `<broker>` is `host:port`), which is never shed.
    pub fn is_heartbeat(&self) -> bool {
        self.tenant == "pulsar" && self.local.contains(':')
    }
}

impl fmt::Display for NamespaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cluster {
            Some(cluster) => write!(f, "{}/{}/{}", self.tenant, cluster, self.local),
            None => write!(f, "{}/{}", self.tenant, self.local),
        }
    }
}

impl FromStr for NamespaceName {
    type Err = BundleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Topic domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopicDomain {
    /// `persistent://`.
    Persistent,
    /// `non-persistent://`.
    NonPersistent,
}

/// A topic name, normalised to Pulsar's full form `persistent://tenant/ns/local` (or `non-persistent://`).
///
/// Accepted inputs are those of Pulsar's `TopicName.get`: a full name; `tenant/ns/local`; a bare `local` name,
/// which lives in `public/default`; and V1 names `persistent://property/cluster/ns/local`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicName {
    domain: TopicDomain,
    namespace: NamespaceName,
    local: String,
    full: String,
}

impl TopicName {
    /// Parses and normalises a topic name.
    pub fn parse(text: &str) -> Result<Self, BundleError> {
        let invalid = |reason: String| BundleError::InvalidName {
            kind: "topic",
            value: text.to_owned(),
            reason,
        };
        let (domain, rest) = if let Some(rest) = text.strip_prefix("persistent://") {
            (TopicDomain::Persistent, rest.to_owned())
        } else if let Some(rest) = text.strip_prefix("non-persistent://") {
            (TopicDomain::NonPersistent, rest.to_owned())
        } else if text.contains("://") {
            return Err(invalid(
                "the domain must be persistent:// or non-persistent://".into(),
            ));
        } else if text.contains('/') {
            (TopicDomain::Persistent, text.to_owned())
        } else {
            (TopicDomain::Persistent, format!("public/default/{text}"))
        };
        // tenant/ns/local... (V2) or property/cluster/ns/local... (V1). Local names may contain '/' in V2
        // only when they come from the full form; Pulsar treats 4+ parts as V1.
        let parts: Vec<&str> = rest.splitn(4, '/').collect();
        let (namespace, local) = match parts.as_slice() {
            [tenant, ns, local] => (format!("{tenant}/{ns}"), (*local).to_owned()),
            [prop, cluster, ns, local] => (format!("{prop}/{cluster}/{ns}"), (*local).to_owned()),
            _ => {
                return Err(invalid(
                    "expected [domain://]tenant/namespace/topic or a bare topic name".into(),
                ))
            }
        };
        if local.is_empty() {
            return Err(invalid("the topic's local name is empty".into()));
        }
        let namespace = NamespaceName::parse(&namespace).map_err(|e| invalid(e.to_string()))?;
        let scheme = match domain {
            TopicDomain::Persistent => "persistent",
            TopicDomain::NonPersistent => "non-persistent",
        };
        let full = format!("{scheme}://{namespace}/{local}");
        Ok(Self {
            domain,
            namespace,
            local,
            full,
        })
    }

    /// The full name that Pulsar hashes to find the bundle.
    pub fn full_name(&self) -> &str {
        &self.full
    }

    /// The topic's namespace.
    pub fn namespace(&self) -> &NamespaceName {
        &self.namespace
    }

    /// The domain.
    pub fn domain(&self) -> TopicDomain {
        self.domain
    }

    /// The local name (after the namespace).
    pub fn local_name(&self) -> &str {
        &self.local
    }

    /// The partition index of `name-partition-<i>`, if this is a partition.
    pub fn partition_index(&self) -> Option<u32> {
        let (_, index) = self.local.rsplit_once("-partition-")?;
        index.parse().ok()
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces() {
        let v2 = NamespaceName::parse("public/default").unwrap();
        assert_eq!(
            (v2.tenant(), v2.local_name(), v2.is_v1()),
            ("public", "default", false)
        );
        let v1 = NamespaceName::parse("pulsar/us-west/10.0.0.1:8080").unwrap();
        assert_eq!(v1.cluster(), Some("us-west"));
        assert!(v1.is_heartbeat());
        assert!(NamespaceName::parse("pulsar/system").unwrap().is_system());
        for bad in ["", "a", "a//b", "a/b c", "a/b/c/d", "/b"] {
            let err = NamespaceName::parse(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("'{bad}'")), "{bad}: {err}");
        }
    }

    #[test]
    fn topics_normalise_like_pulsar() {
        let cases = [
            ("my-topic", "persistent://public/default/my-topic"),
            ("t/ns/x", "persistent://t/ns/x"),
            ("non-persistent://t/ns/x", "non-persistent://t/ns/x"),
            ("persistent://p/c/ns/x", "persistent://p/c/ns/x"),
            ("persistent://t/ns/a/b", "persistent://t/ns/a/b"),
        ];
        for (input, full) in cases {
            assert_eq!(
                TopicName::parse(input).unwrap().full_name(),
                full,
                "{input}"
            );
        }
        let p = TopicName::parse("t/ns/orders-partition-7").unwrap();
        assert_eq!(p.partition_index(), Some(7));
        assert_eq!(p.namespace().to_string(), "t/ns");
        assert!(TopicName::parse("http://t/ns/x").is_err());
        assert!(TopicName::parse("t/ns/").is_err());
        assert!(TopicName::parse("t/x").is_err());
    }
}
