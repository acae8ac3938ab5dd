//! Store notifications and request nodes into core events: each notification re-reads only the node it names.

use crate::bundle::{BundleName, NamespaceName, TopicName};
use crate::core::leader::{Event, Request};
use crate::model::load_report::read_registration;
use crate::model::records::{AdminRequest, BundleAssignment, RequestOp};
use crate::model::NamespaceEphemeralData;
use crate::paths;
use crate::runtime::namespaces::read_bundles;
use crate::store::{MetadataStoreExt, NotificationType};

use super::load::{cluster_policies, owner_seen};
use super::{Executor, OpenRequest, Step};

impl Executor {
    pub(super) async fn on_broker_node(&mut self, path: &str, kind: NotificationType) -> Step {
        let Some(id) = paths::below(paths::BROKERS, path).filter(|r| !r.contains('/')) else {
            return Ok(());
        };
        let id = id.to_owned();
        match kind {
            NotificationType::Deleted => self.broker_gone(&id).await,
            NotificationType::Created | NotificationType::Modified => self.read_report(&id).await,
            NotificationType::ChildrenChanged => Ok(()),
        }
    }

    async fn broker_gone(&mut self, id: &str) -> Step {
        self.applied_reports.remove(id);
        self.step(Event::BrokerGone {
            broker: id.to_owned(),
        })
        .await
    }

    async fn read_report(&mut self, id: &str) -> Step {
        let path = paths::broker(id);
        match self.sh.store.get(&path).await {
            Ok(Some(found)) => {
                let written = (found.stat.creation_revision, found.stat.version);
                if self.applied_reports.get(id) == Some(&written) {
                    // Already aggregated (read while loading, then notified).
                    return Ok(());
                }
                self.applied_reports.insert(id.to_owned(), written);
                let report = read_registration(&found.value, found.stat.ephemeral)
                    .map_err(|why| format!("{path}: {why}"));
                match &report {
                    Err(_) => {
                        self.sh
                            .metrics
                            .malformed_reports
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(_) => {
                        self.sh.meters.reports_applied.inc();
                    }
                }
                let written_ms = report.as_ref().map_or(0, |r| r.last_update);
                self.step(Event::Report {
                    broker: id.to_owned(),
                    report,
                })
                .await?;
                // The lag runs to the report being aggregated, not merely read.
                if written_ms > 0 {
                    let lag_ms = (self.sh.now_ms() - written_ms).max(0);
                    self.sh.meters.report_lag.observe(lag_ms as f64 / 1000.0);
                    self.sh.meters.recent.report_lag(lag_ms);
                }
                Ok(())
            }
            Ok(None) => self.broker_gone(id).await,
            Err(e) => self.soft(e, &format!("reading {path}")),
        }
    }

    pub(super) async fn on_owner_node(&mut self, path: &str) -> Step {
        let Some(bundle) = paths::bundle_below(paths::OWNERSHIP, path) else {
            return Ok(());
        };
        let bundle = bundle.to_string();
        match self.sh.store.get_json::<NamespaceEphemeralData>(path).await {
            Ok(Some((data, _))) => {
                let owner = owner_seen(&data);
                self.step(Event::OwnerSeen { bundle, owner }).await
            }
            Ok(None) => {
                self.step(Event::OwnerGone {
                    bundle: bundle.clone(),
                })
                .await?;
                self.owner_gone(&bundle).await
            }
            Err(e) => self.soft(e, &format!("reading {path}")),
        }
    }

    pub(super) async fn on_record_node(&mut self, path: &str) -> Step {
        let Some(bundle) = paths::bundle_below(paths::ASSIGNMENTS, path) else {
            return Ok(());
        };
        match self.record_event(&bundle.to_string()).await? {
            Some(e) => self.step(e).await,
            None => Ok(()),
        }
    }

    /// A bundle's record as it is now, as an event.
    pub(super) async fn record_event(&mut self, bundle: &str) -> Step<Option<Event>> {
        let path = paths::assignment(bundle);
        match self.sh.store.get_json::<BundleAssignment>(&path).await {
            Ok(Some((record, stat))) => Ok(Some(Event::RecordSeen {
                record,
                version: stat.version,
            })),
            Ok(None) => Ok(Some(Event::RecordGone {
                bundle: bundle.to_owned(),
            })),
            Err(e) => self.soft(e, &format!("reading {path}")).map(|()| None),
        }
    }

    pub(super) async fn reload_namespace(&mut self, ns: &str) -> Step {
        match self.namespace_event(ns).await? {
            Some(e) => self.step(e).await,
            None => Ok(()),
        }
    }

    /// A namespace's bundles as they are now, as an event.
    pub(super) async fn namespace_event(&mut self, ns: &str) -> Step<Option<Event>> {
        let Ok(name) = NamespaceName::parse(ns) else {
            return Ok(None);
        };
        match read_bundles(&self.sh.store, &name).await {
            Ok(info) => Ok(Some(Event::Namespace {
                namespace: ns.to_owned(),
                info,
            })),
            Err(e) => {
                tracing::warn!(namespace = ns, "namespace skipped: {e}");
                Ok(None)
            }
        }
    }

    pub(super) async fn reload_cluster_policies(&mut self) -> Step {
        match cluster_policies(&self.sh).await {
            Some(data) => self.step(Event::ClusterPolicies(data)).await,
            None => Ok(()),
        }
    }

    /// A request node: handed to the core once per incarnation (a sequential name can come again once its node
    /// is gone: etcd names by revision; a ZooKeeper container parent that vanished restarts its counter).
    pub(super) async fn on_request_node(&mut self, path: &str) -> Step {
        if path == paths::REQUESTS {
            return Ok(());
        }
        let found = match self.sh.store.get(path).await {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(()),
            Err(e) => return self.soft(e, &format!("reading {path}")),
        };
        let incarnation = found.stat.creation_revision;
        if self.handled.get(path) == Some(&incarnation) {
            return Ok(());
        }
        let request = match serde_json::from_slice::<AdminRequest>(&found.value) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(leader = %self.sh.broker_id, path, "malformed request ignored: {e}");
                self.handled.insert(path.to_owned(), incarnation);
                return Ok(());
            }
        };
        if request.response.is_some() || request.target.is_some() {
            return Ok(());
        }
        self.handled.insert(path.to_owned(), incarnation);
        tracing::info!(leader = %self.sh.broker_id, requester = %request.requester, "request: {}", request.op.describe());
        let core_request = match request.op.clone() {
            RequestOp::Lookup { topic } => Request::Lookup { topic },
            RequestOp::Unload {
                bundle,
                destination,
            } => Request::Unload {
                bundle,
                destination,
            },
            RequestOp::UnloadNamespace { namespace } => Request::UnloadNamespace { namespace },
            RequestOp::Split {
                bundle,
                algorithm,
                positions,
                unload,
            } => Request::Split {
                bundle,
                algorithm,
                positions,
                unload,
            },
            RequestOp::SplitPoints { .. } => {
                let open = OpenRequest {
                    path: path.to_owned(),
                    request,
                    stat: found.stat,
                };
                return self
                    .write_answer(
                        &open,
                        false,
                        "split points are asked of a bundle's owner, not of the leader".into(),
                        serde_json::Value::Null,
                    )
                    .await;
            }
        };
        let open = OpenRequest {
            path: path.to_owned(),
            request,
            stat: found.stat,
        };
        self.submit(core_request, |ex, id| {
            ex.open.insert(id, open);
        })
        .await
    }

    /// A request from this process (the web service): handed to the core like a request node, answered
    /// through its channel.
    pub(super) async fn on_local_request(
        &mut self,
        r: crate::runtime::shared::LocalRequest,
    ) -> Step {
        let crate::runtime::shared::LocalRequest { request, reply } = r;
        self.submit(request, |ex, id| {
            ex.local_open.insert(id, reply);
        })
        .await
    }

    /// Requests from this process that queued up together (a lookup storm): all handed to the core before
    /// any of their writes runs, so the writes go to the store together ([`Executor::step_all`]).
    pub(super) async fn on_local_requests(
        &mut self,
        requests: Vec<crate::runtime::shared::LocalRequest>,
    ) -> Step {
        let mut events = Vec::with_capacity(requests.len());
        for crate::runtime::shared::LocalRequest { request, reply } in requests {
            if let Some(ns) = request_namespace(&request) {
                if self.core.namespace(&ns).is_none() {
                    self.reload_namespace(&ns).await?;
                }
            }
            let id = self.next_request;
            self.next_request += 1;
            self.local_open.insert(id, reply);
            events.push(Event::Request { id, request });
        }
        self.step_all(events).await
    }

    /// Hands `request` to the core under a new id, which `open` records with where the answer goes. A
    /// namespace created a moment ago may not have been notified yet: it is read first.
    async fn submit(
        &mut self,
        request: Request,
        open: impl FnOnce(&mut Self, crate::core::leader::RequestId),
    ) -> Step {
        if let Some(ns) = request_namespace(&request) {
            if self.core.namespace(&ns).is_none() {
                self.reload_namespace(&ns).await?;
            }
        }
        let id = self.next_request;
        self.next_request += 1;
        open(self, id);
        self.step(Event::Request { id, request }).await
    }
}

/// The namespace a request is about, when its names parse.
fn request_namespace(r: &Request) -> Option<String> {
    match r {
        Request::Lookup { topic } => TopicName::parse(topic)
            .ok()
            .map(|t| t.namespace().to_string()),
        Request::Assign { bundle }
        | Request::Unload { bundle, .. }
        | Request::Split { bundle, .. } => BundleName::parse(bundle)
            .ok()
            .map(|b| b.namespace().to_string()),
        Request::UnloadNamespace { namespace } => {
            NamespaceName::parse(namespace).ok().map(|n| n.to_string())
        }
    }
}
