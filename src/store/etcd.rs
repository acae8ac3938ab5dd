//! The etcd backend (next commit).
use super::{Error, Result, StoreOptions};

/// The etcd store (next commit).
#[derive(Debug)]
pub struct EtcdStore;

impl EtcdStore {
    /// Not built yet in this commit.
    pub async fn connect(
        endpoints: &[String],
        _options: StoreOptions,
    ) -> Result<super::memory::MemoryStore> {
        Err(Error::InvalidUrl {
            url: format!("etcd:{}", endpoints.join(",")),
            reason: "the etcd backend is not built yet".into(),
        })
    }
}
