//! How a command reaches a secured store: the user, password, ZooKeeper ACL and etcd TLS on the command line.
//! Every command that opens a store takes these flags; they override what `broker.conf` says (see
//! `store::options` for the keys).

use std::path::PathBuf;

use crate::store::{StoreOptions, TlsFiles, ZkAcl};

/// The store access flags (see the module docs).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StoreAccessArgs {
    /// User on the store: ZooKeeper digest user or etcd user (overrides loadmgrMetadataStoreUser).
    #[arg(long, requires = "secret")]
    pub user: Option<String>,
    /// That user's password. Other users of the machine can read it from the process list: prefer
    /// --password-file.
    #[arg(long, group = "secret")]
    pub password: Option<String>,
    /// A file whose first line is the password (overrides loadmgrMetadataStorePasswordFile).
    #[arg(long, group = "secret")]
    pub password_file: Option<PathBuf>,
    /// ACL of the ZooKeeper nodes this command creates: open, creator-all-world-read or creator-only (overrides
    /// loadmgrZookeeperAcl; the last two need --user).
    #[arg(long)]
    pub zk_acl: Option<String>,
    /// etcd over TLS: the CA certificate (PEM) that signed the servers' certificates (overrides the TLS files
    /// of metadataStoreConfigPath).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// etcd over TLS: this client's certificate (PEM), for servers that check client certificates.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// etcd over TLS: this client's key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// etcd over TLS: the server name to verify instead of the endpoint's host (Pulsar's `authority`).
    #[arg(long)]
    pub tls_authority: Option<String>,
}

impl StoreAccessArgs {
    /// `options` with the flags that were given applied over them; errors name the flag.
    pub fn apply(&self, mut options: StoreOptions) -> Result<StoreOptions, String> {
        if let Some(user) = &self.user {
            let password = match (&self.password, &self.password_file) {
                (Some(p), _) => p.clone(),
                (None, Some(file)) => {
                    let text = std::fs::read_to_string(file).map_err(|e| {
                        format!("--password-file {}: cannot read: {e}", file.display())
                    })?;
                    let first = text.lines().next().unwrap_or("").to_owned();
                    if first.is_empty() {
                        return Err(format!(
                            "--password-file {}: the first line is empty",
                            file.display()
                        ));
                    }
                    first
                }
                (None, None) => return Err("--user needs --password or --password-file".into()),
            };
            options = options.with_credentials(user.clone(), password);
        }
        if let Some(acl) = &self.zk_acl {
            let acl: ZkAcl = acl.parse().map_err(|e| format!("--zk-acl: {e}"))?;
            if acl != ZkAcl::Open && options.credentials.is_none() {
                return Err(format!(
                    "--zk-acl {acl} needs a user (--user, or loadmgrMetadataStoreUser in broker.conf)"
                ));
            }
            options = options.with_zk_acl(acl);
        }
        if self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_authority.is_some() {
            options = options.with_tls(TlsFiles {
                ca_file: self.tls_ca.clone(),
                cert_file: self.tls_cert.clone(),
                key_file: self.tls_key.clone(),
                domain: self.tls_authority.clone(),
            });
        }
        Ok(options)
    }
}
