//! How to reach a store: timeouts, credentials, the ACL of created ZooKeeper nodes and TLS for etcd
//! ([`StoreOptions`]), and reading them from `broker.conf` ([`StoreOptions::from_conf`]) and from Pulsar's
//! metadata store configuration file (`metadataStoreConfigPath`).
//!
//! # Where each setting comes from
//!
//! | setting | broker.conf key | notes |
//! |---|---|---|
//! | session timeout | `metadataStoreSessionTimeoutMillis` (`zooKeeperSessionTimeoutMillis` > 0 overrides) | Pulsar's |
//! | operation timeout | `metadataStoreOperationTimeoutSeconds` (`zooKeeperOperationTimeoutSeconds` > 0 overrides) | Pulsar's |
//! | user and password | `loadmgrMetadataStoreUser`, `loadmgrMetadataStorePassword` or `loadmgrMetadataStorePasswordFile` | loadmgr's own: Pulsar authenticates to ZooKeeper through SASL (JAAS) and has no etcd users |
//! | ACL of created ZooKeeper nodes | `loadmgrZookeeperAcl`: `open`, `creator-all-world-read`, `creator-only` | loadmgr's own; `open` is Pulsar's `OPEN_ACL_UNSAFE` |
//! | etcd TLS | `metadataStoreConfigPath`: a YAML file with `useTls`, `tlsTrustCertsFilePath`, `tlsCertificateFilePath`, `tlsKeyFilePath`, `authority` | Pulsar's file and keys (`tlsProvider` is accepted and ignored: it picks a Java TLS library) |
//!
//! Pulsar reads its metadata store configuration file as YAML; loadmgr reads the flat `key: value` lines that
//! file holds (also `key=value`, as Pulsar's documentation shows it), with `#` comments and optional quotes,
//! and refuses anything else, naming the file, the line and what was wrong. For a ZooKeeper store the file is
//! ZooKeeper's client properties (Pulsar 3.3.2+); loadmgr does not speak TLS to ZooKeeper and refuses a file
//! that asks for it (`zookeeper.client.secure=true`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Error, Result, StoreUrl};

/// Credentials: ZooKeeper digest (`user:password`) or etcd user/password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// ACL put on nodes loadmgr creates in ZooKeeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZkAcl {
    /// `world:anyone` may do everything (Pulsar's `OPEN_ACL_UNSAFE`).
    #[default]
    Open,
    /// The authenticated creator may do everything, everyone may read (needs credentials).
    CreatorAllWorldRead,
    /// Only the authenticated creator may access the node (needs credentials).
    CreatorOnly,
}

impl ZkAcl {
    /// The name used in broker.conf and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ZkAcl::Open => "open",
            ZkAcl::CreatorAllWorldRead => "creator-all-world-read",
            ZkAcl::CreatorOnly => "creator-only",
        }
    }
}

impl fmt::Display for ZkAcl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ZkAcl {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        [ZkAcl::Open, ZkAcl::CreatorAllWorldRead, ZkAcl::CreatorOnly]
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!("unknown ACL '{s}'; expected open, creator-all-world-read or creator-only")
            })
    }
}

/// TLS settings for etcd (`https://` endpoints).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsFiles {
    /// PEM file of the CA that signed the server certificates.
    pub ca_file: Option<std::path::PathBuf>,
    /// PEM client certificate (mutual TLS).
    pub cert_file: Option<std::path::PathBuf>,
    /// PEM client key (mutual TLS).
    pub key_file: Option<std::path::PathBuf>,
    /// Server name to verify instead of the endpoint's host.
    pub domain: Option<String>,
}

/// Connection options, with Pulsar's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Session timeout (`metadataStoreSessionTimeoutMillis`, 30 s): ZooKeeper session timeout, etcd lease TTL
    /// (rounded up to whole seconds).
    pub session_timeout: Duration,
    /// Time limit of one operation including retries (`metadataStoreOperationTimeoutSeconds`, 30 s).
    pub operation_timeout: Duration,
    /// Time allowed for the first connection (defaults to the session timeout).
    pub connect_timeout: Option<Duration>,
    /// ZooKeeper digest or etcd user/password.
    pub credentials: Option<Credentials>,
    /// ACL of nodes created in ZooKeeper.
    pub zk_acl: ZkAcl,
    /// TLS for etcd.
    pub tls: Option<TlsFiles>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            session_timeout: Duration::from_millis(30_000),
            operation_timeout: Duration::from_secs(30),
            connect_timeout: None,
            credentials: None,
            zk_acl: ZkAcl::Open,
            tls: None,
        }
    }
}

impl StoreOptions {
    /// Reads the broker.conf keys of the module docs for a store at `url`: `lookup` returns a key's text (for
    /// example `|k| settings.get(k)`; `None` or an empty text means unset). Unparsable timeouts keep the
    /// defaults (the configuration checks their ranges). Errors ([`Error::InvalidArgument`], naming the key or
    /// file): a user without a password or the other way round, both a password and a password file, a
    /// password file or configuration file that cannot be read, an unknown ACL, a creator ACL without a user,
    /// a configuration file with an unknown key or a bad value.
    pub fn from_conf(url: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let text = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());
        let num = |key: &str| text(key).and_then(|v| v.trim().parse::<i64>().ok());
        let mut options = StoreOptions::default();
        let session = num("zooKeeperSessionTimeoutMillis")
            .filter(|v| *v > 0)
            .or_else(|| num("metadataStoreSessionTimeoutMillis").filter(|v| *v > 0));
        if let Some(ms) = session {
            options.session_timeout = Duration::from_millis(ms as u64);
        }
        let op = num("zooKeeperOperationTimeoutSeconds")
            .filter(|v| *v > 0)
            .or_else(|| num("metadataStoreOperationTimeoutSeconds").filter(|v| *v > 0));
        if let Some(s) = op {
            options.operation_timeout = Duration::from_secs(s as u64);
        }
        let invalid = |reason: String| Error::InvalidArgument { reason };
        let password = match (
            text("loadmgrMetadataStorePassword"),
            text("loadmgrMetadataStorePasswordFile"),
        ) {
            (Some(_), Some(_)) => return Err(invalid(
                "set loadmgrMetadataStorePassword or loadmgrMetadataStorePasswordFile, not both"
                    .into(),
            )),
            (Some(p), None) => Some(p),
            (None, Some(file)) => Some(read_password_file(Path::new(file.trim()))?),
            (None, None) => None,
        };
        match (text("loadmgrMetadataStoreUser"), password) {
            (Some(user), Some(password)) => {
                options.credentials = Some(Credentials {
                    user: user.trim().to_owned(),
                    password,
                })
            }
            (Some(_), None) => {
                return Err(invalid(
                    "loadmgrMetadataStoreUser is set without loadmgrMetadataStorePassword or loadmgrMetadataStorePasswordFile".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "a metadata store password is set without loadmgrMetadataStoreUser".into(),
                ))
            }
            (None, None) => {}
        }
        if let Some(acl) = text("loadmgrZookeeperAcl") {
            options.zk_acl = acl
                .trim()
                .parse()
                .map_err(|e| invalid(format!("loadmgrZookeeperAcl: {e}")))?;
        }
        if options.zk_acl != ZkAcl::Open && options.credentials.is_none() {
            return Err(invalid(format!(
                "loadmgrZookeeperAcl={} needs loadmgrMetadataStoreUser and its password",
                options.zk_acl
            )));
        }
        if let Some(path) = text("metadataStoreConfigPath") {
            let path = PathBuf::from(path.trim());
            let is_zk = matches!(StoreUrl::parse(url), Ok(StoreUrl::ZooKeeper { .. }));
            options.tls = read_store_config(&path, is_zk)?;
        }
        Ok(options)
    }

    /// Sets the session timeout.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets the operation timeout.
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Sets the first-connection timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Sets credentials.
    pub fn with_credentials(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.credentials = Some(Credentials {
            user: user.into(),
            password: password.into(),
        });
        self
    }

    /// Sets the ZooKeeper ACL policy.
    pub fn with_zk_acl(mut self, acl: ZkAcl) -> Self {
        self.zk_acl = acl;
        self
    }

    /// Sets etcd TLS files.
    pub fn with_tls(mut self, tls: TlsFiles) -> Self {
        self.tls = Some(tls);
        self
    }

    pub(crate) fn first_connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(self.session_timeout)
    }
}

/// The password in `path`: its first line, without the line end. An empty one is an error.
fn read_password_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::InvalidArgument {
        reason: format!(
            "loadmgrMetadataStorePasswordFile {}: cannot read: {e}",
            path.display()
        ),
    })?;
    let first = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if first.is_empty() {
        return Err(Error::InvalidArgument {
            reason: format!(
                "loadmgrMetadataStorePasswordFile {}: the first line is empty",
                path.display()
            ),
        });
    }
    Ok(first.to_owned())
}

/// The `key: value` (or `key=value`) lines of a flat configuration file, with their line numbers; `#` starts
/// a comment line, values may be quoted, `null` and `~` are no value.
fn flat_entries(text: &str, name: &str) -> Result<Vec<(usize, String, Option<String>)>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line == "---" {
            continue;
        }
        let split = match (line.find(':'), line.find('=')) {
            (Some(c), Some(e)) => c.min(e),
            (Some(c), None) => c,
            (None, Some(e)) => e,
            (None, None) => {
                return Err(Error::InvalidArgument {
                    reason: format!("{name}:{}: expected 'key: value', found '{line}'", i + 1),
                })
            }
        };
        let key = line[..split].trim().to_owned();
        let mut value = line[split + 1..].trim();
        if let Some(hash) = value.find(" #") {
            value = value[..hash].trim();
        }
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        let value = match unquoted {
            "" | "null" | "~" => None,
            v => Some(v.to_owned()),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(Error::InvalidArgument {
                reason: format!("{name}:{}: '{key}' is not a key", i + 1),
            });
        }
        out.push((i + 1, key, value));
    }
    Ok(out)
}

/// Reads Pulsar's metadata store configuration file (see the module docs): the etcd TLS files when it says
/// `useTls: true`, else `None`.
pub(crate) fn read_store_config(path: &Path, zookeeper: bool) -> Result<Option<TlsFiles>> {
    let name = format!("metadataStoreConfigPath {}", path.display());
    let text =
        crate::model::input::read_file_to_string(path).map_err(|e| Error::InvalidArgument {
            reason: format!("{name}: cannot read: {}", e.reason),
        })?;
    let entries = flat_entries(&text, &name)?;
    if zookeeper {
        for (line, key, value) in &entries {
            if key == "zookeeper.client.secure" && value.as_deref() == Some("true") {
                return Err(Error::InvalidArgument {
                    reason: format!(
                        "{name}:{line}: zookeeper.client.secure=true: loadmgr does not speak TLS to ZooKeeper"
                    ),
                });
            }
        }
        return Ok(None);
    }
    let mut use_tls = false;
    let mut tls = TlsFiles::default();
    for (line, key, value) in entries {
        let at = |what: String| Error::InvalidArgument {
            reason: format!("{name}:{line}: {what}"),
        };
        match key.as_str() {
            "useTls" => {
                use_tls = match value.as_deref() {
                    Some("true") => true,
                    Some("false") | None => false,
                    Some(v) => return Err(at(format!("useTls must be true or false, found '{v}'"))),
                }
            }
            "tlsProvider" => {}
            "tlsTrustCertsFilePath" => tls.ca_file = value.map(PathBuf::from),
            "tlsCertificateFilePath" => tls.cert_file = value.map(PathBuf::from),
            "tlsKeyFilePath" => tls.key_file = value.map(PathBuf::from),
            "authority" => tls.domain = value,
            other => {
                return Err(at(format!(
                    "unknown key '{other}' (known: useTls, tlsProvider, tlsTrustCertsFilePath, tlsCertificateFilePath, tlsKeyFilePath, authority)"
                )))
            }
        }
    }
    if !use_tls {
        return Ok(None);
    }
    if tls.cert_file.is_some() != tls.key_file.is_some() {
        return Err(Error::InvalidArgument {
            reason: format!(
                "{name}: tlsCertificateFilePath and tlsKeyFilePath go together (a client certificate needs its key)"
            ),
        });
    }
    Ok(Some(tls))
}
