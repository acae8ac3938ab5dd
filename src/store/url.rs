//! Store URLs, as Pulsar's `metadataStoreUrl` spells them.

use std::fmt;

use super::{Error, Result};

/// A parsed store URL.
///
/// | form | backend |
/// |---|---|
/// | `memory:` | a private in-memory store |
/// | `memory:NAME` (or `memory://NAME`) | the in-memory store `NAME`, shared by every `connect` in the process |
/// | `zk:h1:2181[,h2:2181...][/chroot]` (or `zk://...`) | ZooKeeper |
/// | `h1:2181[,h2:2181...][/chroot]` | ZooKeeper (Pulsar's bare form) |
/// | `etcd:http://h1:2379[,http://h2:2379...]` (`https://` for TLS; a bare `host:port` means `http://`) | etcd |
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// In-memory.
    Memory {
        /// Shared store name, if any.
        name: Option<String>,
    },
    /// ZooKeeper.
    ZooKeeper {
        /// `host:port` list, comma separated.
        servers: String,
        /// Chroot path, if any (`/pulsar`).
        chroot: Option<String>,
    },
    /// etcd.
    Etcd {
        /// Endpoint URLs with scheme.
        endpoints: Vec<String>,
    },
}

impl StoreUrl {
    /// Parses a URL (see the table above).
    pub fn parse(url: &str) -> Result<StoreUrl> {
        let err = |reason: &str| Error::InvalidUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let url = url.trim();
        if let Some(rest) = url.strip_prefix("memory:") {
            let name = rest.trim_start_matches("//");
            if name.contains('/') {
                return Err(err("a memory store name may not contain '/'"));
            }
            return Ok(StoreUrl::Memory {
                name: (!name.is_empty()).then(|| name.to_string()),
            });
        }
        if let Some(rest) = url.strip_prefix("etcd:") {
            let endpoints: Vec<String> = rest
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(|e| {
                    if e.starts_with("http://") || e.starts_with("https://") {
                        e.trim_end_matches('/').to_string()
                    } else {
                        format!(
                            "http://{}",
                            e.trim_start_matches("//").trim_end_matches('/')
                        )
                    }
                })
                .collect();
            if endpoints.is_empty() {
                return Err(err(
                    "no etcd endpoint; expected etcd:http://host:2379[,http://host2:2379]",
                ));
            }
            for e in &endpoints {
                let host_port = e.split_once("://").map(|(_, r)| r).unwrap_or(e);
                if host_port.contains('/') {
                    return Err(err("etcd endpoints take no path (etcd has no chroot)"));
                }
                check_host_port(host_port).map_err(|r| err(&r))?;
            }
            return Ok(StoreUrl::Etcd { endpoints });
        }
        let rest = url
            .strip_prefix("zk://")
            .or_else(|| url.strip_prefix("zk:"))
            .unwrap_or(url);
        if rest.contains("://") {
            return Err(err("unknown scheme; expected memory:, zk: or etcd:"));
        }
        let (servers, chroot) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i..])),
            None => (rest, None),
        };
        if servers.is_empty() {
            return Err(err(
                "no ZooKeeper server; expected zk:host:2181[,host2:2181][/chroot]",
            ));
        }
        for server in servers.split(',') {
            check_host_port(server.trim()).map_err(|r| err(&r))?;
        }
        let chroot = match chroot {
            None | Some("/") => None,
            Some(c) => {
                super::validate_path(c).map_err(|e| err(&format!("bad chroot: {e}")))?;
                Some(c.to_string())
            }
        };
        Ok(StoreUrl::ZooKeeper {
            servers: servers
                .split(',')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(","),
            chroot,
        })
    }
}

fn check_host_port(s: &str) -> std::result::Result<(), String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("'{s}' is not host:port"))?;
    if host.is_empty() {
        return Err(format!("'{s}' has no host"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("'{s}' has no valid port"))
        .map(|_| ())
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory { name: None } => f.write_str("memory:"),
            StoreUrl::Memory { name: Some(n) } => write!(f, "memory:{n}"),
            StoreUrl::ZooKeeper { servers, chroot } => {
                write!(f, "zk:{servers}{}", chroot.as_deref().unwrap_or(""))
            }
            StoreUrl::Etcd { endpoints } => write!(f, "etcd:{}", endpoints.join(",")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            StoreUrl::parse("memory:").unwrap(),
            StoreUrl::Memory { name: None }
        );
        assert_eq!(
            StoreUrl::parse("memory:sim").unwrap(),
            StoreUrl::Memory {
                name: Some("sim".into())
            }
        );
        assert_eq!(
            StoreUrl::parse("memory://sim").unwrap(),
            StoreUrl::Memory {
                name: Some("sim".into())
            }
        );
        assert_eq!(
            StoreUrl::parse("zk:h1:2181,h2:2182/pulsar").unwrap(),
            StoreUrl::ZooKeeper {
                servers: "h1:2181,h2:2182".into(),
                chroot: Some("/pulsar".into())
            }
        );
        assert_eq!(
            StoreUrl::parse("127.0.0.1:2181").unwrap(),
            StoreUrl::ZooKeeper {
                servers: "127.0.0.1:2181".into(),
                chroot: None
            }
        );
        assert_eq!(
            StoreUrl::parse("zk://h:1/").unwrap(),
            StoreUrl::ZooKeeper {
                servers: "h:1".into(),
                chroot: None
            }
        );
        assert_eq!(
            StoreUrl::parse("etcd:http://a:2379,https://b:2379,c:1").unwrap(),
            StoreUrl::Etcd {
                endpoints: vec![
                    "http://a:2379".into(),
                    "https://b:2379".into(),
                    "http://c:1".into()
                ]
            }
        );
        let round = "zk:h1:2181,h2:2182/pulsar";
        assert_eq!(StoreUrl::parse(round).unwrap().to_string(), round);
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "",
            "zk:",
            "zk:host",
            "zk:h:x",
            "etcd:",
            "etcd:http://a:1/x",
            "redis://a:1",
            "h:1/a//b",
        ] {
            let e = StoreUrl::parse(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidUrl { .. }), "{bad}: {e}");
        }
    }
}
