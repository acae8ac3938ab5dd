//! Store notifications and request nodes into core events: each notification re-reads only the node it names,
//! and the nodes of notifications that queued up together are read together; a node whose last notification
//! carried its state (etcd) is not read at all.

use std::collections::{HashMap, HashSet};

use crate::bundle::{BundleName, NamespaceName, TopicName};
use crate::core::leader::{Event, Request};
use crate::model::load_report::read_registration;
use crate::model::records::{AdminRequest, BundleAssignment, RequestOp};
use crate::model::NamespaceEphemeralData;
use crate::paths;
use crate::runtime::meters::LagSample;
use crate::runtime::namespaces::read_bundles;
use crate::store::{GetResult, NodeAfter, Notification, NotificationType};

use super::load::{cluster_policies, owner_seen, read_nodes};
use super::{Executor, OpenRequest, Step};

/// Most notifications turned into events in one step.
pub(super) const MAX_NOTIFICATIONS_PER_STEP: usize = 4096;

/// The watched tree a notification came from, in the order their events go to the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Tree {
    /// [`paths::BROKERS`]: reports and registrations.
    Brokers,
    /// [`paths::OWNERSHIP`]: ownership nodes.
    Owners,
    /// [`paths::ASSIGNMENTS`]: assignment records.
    Records,
}

impl Executor {
    /// Notifications of the brokers', ownership and record trees that queued up together (at most
    /// [`MAX_NOTIFICATIONS_PER_STEP`]): every node they name is read once, all read together as at load
    /// ([`read_nodes`]), then their events go to the core in order, reports first, then owners, then records
    /// (the simulator's order at one instant). The destinations of bundles whose ownership node went are
    /// notified together at the end.
    ///
    /// Read one at a time, each notification cost the leader a round trip before the next, and a lookup storm
    /// three of them per bundle (the ownership node, the echo of each record write): the leader's loop, not
    /// the store, bounded the cold start, and reports waited behind it.
    pub(super) async fn on_notifications(&mut self, batch: Vec<(Tree, Notification)>) -> Step {
        let taken_ms = self.sh.now_ms();
        let mut targets: Vec<(Tree, String, String)> = Vec::new();
        // Each path's state after its last notification of the batch, when the store sent it; a path's first
        // notification makes it a target.
        let mut after: HashMap<String, NodeAfter> = HashMap::new();
        let mut deleted_brokers: HashSet<String> = HashSet::new();
        let mut deleted_records: HashSet<String> = HashSet::new();
        for (tree, n) in batch {
            let key = match tree {
                Tree::Brokers => {
                    let Some(id) =
                        paths::below(paths::BROKERS, &n.path).filter(|r| !r.contains('/'))
                    else {
                        continue;
                    };
                    match n.kind {
                        NotificationType::ChildrenChanged => continue,
                        NotificationType::Deleted => {
                            deleted_brokers.insert(id.to_owned());
                        }
                        NotificationType::Created | NotificationType::Modified => {}
                    }
                    id.to_owned()
                }
                Tree::Owners => match paths::bundle_below(paths::OWNERSHIP, &n.path) {
                    Some(b) => b.to_string(),
                    None => continue,
                },
                Tree::Records => match paths::bundle_below(paths::ASSIGNMENTS, &n.path) {
                    // The echo of this leader's own write: it knows what it wrote (see `writes`). A state an
                    // earlier notification of the batch carried is older than that write: the node is read.
                    Some(_) if n.kind != NotificationType::Deleted && self.take_echo(&n.path) => {
                        if let Some(state) = after.get_mut(&n.path) {
                            *state = NodeAfter::Unknown;
                        }
                        continue;
                    }
                    Some(b) => {
                        if n.kind == NotificationType::Deleted {
                            deleted_records.insert(b.to_string());
                        }
                        b.to_string()
                    }
                    None => continue,
                },
            };
            if after.insert(n.path.clone(), n.after).is_none() {
                targets.push((tree, key, n.path));
            }
        }
        // Stable: arrival order within each tree.
        targets.sort_by_key(|(tree, _, _)| *tree);
        // Only nodes whose last notification came without their state are read (none on etcd, whose watch
        // sends every change's key-value, after a resumption too); the rest take the state it carried.
        let known: Vec<Option<Option<GetResult>>> = targets
            .iter()
            .map(|(_, _, path)| after.get(path).and_then(NodeAfter::known))
            .collect();
        let unknown: Vec<String> = targets
            .iter()
            .zip(&known)
            .filter(|(_, k)| k.is_none())
            .map(|((_, _, path), _)| path.clone())
            .collect();
        let mut fresh = read_nodes(&self.sh, &unknown).await.into_iter();
        let reads: Vec<Result<Option<GetResult>, crate::store::Error>> = known
            .into_iter()
            .map(|k| match k {
                Some(found) => Ok(found),
                None => fresh.next().expect("one read per unknown node"),
            })
            .collect();
        let read_ms = self.sh.now_ms();
        let mut events = Vec::with_capacity(targets.len());
        let mut lags_ms = Vec::new();
        let mut owners_gone = Vec::new();
        for ((tree, key, path), read) in targets.into_iter().zip(reads) {
            let found = match read {
                Ok(found) => found,
                Err(e) => {
                    self.soft(e, &format!("reading {path}"))?;
                    continue;
                }
            };
            match tree {
                Tree::Brokers => {
                    let deleted = deleted_brokers.contains(&key);
                    if deleted {
                        self.applied_reports.remove(&key);
                        events.push(Event::BrokerGone {
                            broker: key.clone(),
                        });
                    }
                    match found {
                        Some(found) => {
                            let modified_ms = found.stat.modified_ms;
                            if let Some((event, written_ms)) = self.report_event(&key, &path, found)
                            {
                                events.push(event);
                                lags_ms.push((written_ms, modified_ms));
                            }
                        }
                        None if !deleted => {
                            self.applied_reports.remove(&key);
                            events.push(Event::BrokerGone { broker: key });
                        }
                        None => {}
                    }
                }
                Tree::Owners => match found {
                    Some(found) => {
                        match serde_json::from_slice::<NamespaceEphemeralData>(&found.value) {
                            Ok(data) => events.push(Event::OwnerSeen {
                                bundle: key,
                                owner: owner_seen(&data),
                            }),
                            Err(e) => {
                                tracing::warn!(leader = %self.sh.broker_id, "reading {path}: {e}")
                            }
                        }
                    }
                    None => {
                        events.push(Event::OwnerGone {
                            bundle: key.clone(),
                        });
                        owners_gone.push(key);
                    }
                },
                Tree::Records => {
                    let deleted = deleted_records.contains(&key);
                    if deleted {
                        events.push(Event::RecordGone {
                            bundle: key.clone(),
                        });
                    }
                    if found.is_some() || !deleted {
                        events.extend(self.record_event_of(&key, &path, found));
                    }
                }
            }
        }
        // All in one step: the core's decisions do not depend on when a write's outcome comes back (see
        // `core::leader::moves`), so the records a lookup storm completes go to the store together, 16 to a
        // batch, instead of one round trip each before the next event.
        let queue = self.hand(events);
        // The lag runs to the report being aggregated (the core has it), not merely read; the writes that
        // other events of the batch asked for come after it and are not part of it.
        let now = self.sh.now_ms();
        for (written_ms, modified_ms) in lags_ms.into_iter().filter(|(ms, _)| *ms > 0) {
            let sample = lag_sample(written_ms, modified_ms, taken_ms, read_ms, now);
            self.sh
                .meters
                .report_lag
                .observe(sample.total_ms as f64 / 1000.0);
            self.sh.meters.recent.report_lag(sample);
        }
        self.execute_all(queue).await?;
        if !owners_gone.is_empty() {
            // Their entries are known once a run writing them is in (see `writes`).
            if self.writing_any(owners_gone.iter().map(String::as_str)) {
                self.settle().await?;
            }
            self.owners_gone(&owners_gone).await?;
        }
        Ok(())
    }

    /// The event of a report node as read, with the time the broker wrote it (epoch ms, 0 when unknown);
    /// `None` when this incarnation and version was applied already (read while loading, then notified).
    fn report_event(&mut self, id: &str, path: &str, found: GetResult) -> Option<(Event, i64)> {
        let written = (found.stat.creation_revision, found.stat.version);
        if self.applied_reports.get(id) == Some(&written) {
            return None;
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
        Some((
            Event::Report {
                broker: id.to_owned(),
                report,
            },
            written_ms,
        ))
    }

    /// A bundle's record as it is now, as an event.
    pub(super) async fn record_event(&mut self, bundle: &str) -> Step<Option<Event>> {
        let path = paths::assignment(bundle);
        match self.sh.store.get(&path).await {
            Ok(found) => Ok(self.record_event_of(bundle, &path, found)),
            Err(e) => self.soft(e, &format!("reading {path}")).map(|()| None),
        }
    }

    /// The event of record node `path` of `bundle` as read; `None` (logged) when it does not decode.
    fn record_event_of(&self, bundle: &str, path: &str, found: Option<GetResult>) -> Option<Event> {
        let Some(found) = found else {
            return Some(Event::RecordGone {
                bundle: bundle.to_owned(),
            });
        };
        match serde_json::from_slice::<BundleAssignment>(&found.value) {
            Ok(record) => Some(Event::RecordSeen {
                record,
                version: found.stat.version,
            }),
            Err(e) => {
                tracing::warn!(leader = %self.sh.broker_id, "reading {path}: {e}");
                None
            }
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

/// A report's lag cut into its parts (see [`LagSample`]): written at `written_ms` (its `lastUpdate`), stored at
/// `modified_ms` (0: unknown), its notification taken at `taken_ms`, read by `read_ms`, aggregated at `now`.
/// Clocks of different hosts may disagree: each part is clamped to at least 0, and ends where the next begins.
fn lag_sample(
    written_ms: i64,
    modified_ms: i64,
    taken_ms: i64,
    read_ms: i64,
    now: i64,
) -> LagSample {
    let taken = taken_ms.max(written_ms);
    let read = read_ms.max(taken);
    let now = now.max(read);
    let stored = (modified_ms > 0).then(|| modified_ms.clamp(written_ms, taken));
    LagSample {
        total_ms: now - written_ms,
        store_ms: stored.map(|m| m - written_ms),
        notify_ms: taken - stored.unwrap_or(written_ms),
        read_ms: read - taken,
        core_ms: now - read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lag_s_parts_add_up_even_when_clocks_disagree() {
        let s = lag_sample(1_000, 1_004, 1_010, 1_013, 1_020);
        assert_eq!(
            s,
            LagSample {
                total_ms: 20,
                store_ms: Some(4),
                notify_ms: 6,
                read_ms: 3,
                core_ms: 7,
            }
        );
        // No modification time (etcd): the notification part starts at `lastUpdate`.
        let s = lag_sample(1_000, 0, 1_010, 1_013, 1_020);
        assert_eq!((s.store_ms, s.notify_ms), (None, 10));
        // A broker's clock ahead of the store's: no part is negative, and they still add up.
        let s = lag_sample(1_000, 990, 1_010, 1_013, 1_020);
        assert_eq!((s.store_ms, s.notify_ms), (Some(0), 10));
        for s in [
            lag_sample(1_000, 1_050, 1_010, 1_013, 1_020),
            lag_sample(1_030, 1_004, 1_010, 1_013, 1_020),
        ] {
            assert!(s.store_ms.unwrap_or(0) >= 0 && s.notify_ms >= 0 && s.read_ms >= 0);
            assert_eq!(
                s.store_ms.unwrap_or(0) + s.notify_ms + s.read_ms + s.core_ms,
                s.total_ms
            );
        }
    }
}
