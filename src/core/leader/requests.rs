//! Requests: lookups, unloads of a bundle or a namespace, splits. A request whose answer depends on a write
//! is answered when the write's outcome is known.

use crate::bundle::{
    parse_hash, split_bundle, BundleName, NamespaceName, SplitAlgorithm, SplitInput, SplitOutcome,
    TopicName,
};
use crate::model::records::{AssignmentCause, AssignmentState, LookupAnswer};

use super::cycle::SplitRequest;
use super::{Answer, Command, Leader, Request, RequestId};

type Outcome = Result<(String, serde_json::Value), String>;

/// What a record write answers once it is written.
#[derive(Debug, Clone)]
pub(super) enum Link {
    /// One request, answered with this message and result.
    Request {
        id: RequestId,
        message: String,
        result: serde_json::Value,
    },
    /// One of the moves of a namespace unload.
    Group {
        group: u64,
        result: serde_json::Value,
    },
}

/// A namespace unload waiting for its moves to be written.
#[derive(Debug)]
pub(super) struct Group {
    id: RequestId,
    namespace: String,
    remaining: usize,
    moves: Vec<serde_json::Value>,
    problems: Vec<String>,
}

impl Leader {
    pub(super) fn on_request(&mut self, now: i64, id: RequestId, request: Request) {
        let outcome = match request {
            Request::Lookup { topic } => self.lookup(now, id, &topic),
            Request::Assign { bundle } => self.lookup_bundle(now, id, &bundle, "assignment"),
            Request::Unload {
                bundle,
                destination,
            } => self.unload(now, &bundle, destination.as_deref(), Some(id)),
            Request::UnloadNamespace { namespace } => self.unload_namespace(now, id, &namespace),
            Request::Split {
                bundle,
                algorithm,
                positions,
                unload,
            } => self.split_request(now, id, &bundle, algorithm.as_deref(), &positions, unload),
        };
        if let Some(o) = outcome {
            self.answer(id, o);
        }
    }

    pub(super) fn answer(&mut self, id: RequestId, outcome: Outcome) {
        let answer = match outcome {
            Ok((message, result)) => Answer {
                ok: true,
                message,
                result,
            },
            Err(message) => Answer {
                ok: false,
                message,
                result: serde_json::Value::Null,
            },
        };
        self.status.requests_answered += 1;
        self.emit(Command::Answer { id, answer });
    }

    /// A linked write finished: answer its request (or count it in its group).
    pub(super) fn link_done(&mut self, link: Link, result: Result<(), String>) {
        match link {
            Link::Request {
                id,
                message,
                result: value,
            } => {
                let outcome = result.map(|()| (message, value));
                self.answer(id, outcome);
            }
            Link::Group {
                group,
                result: value,
            } => {
                let Some(g) = self.groups.get_mut(&group) else {
                    return;
                };
                match result {
                    Ok(()) => g.moves.push(value),
                    Err(e) => g.problems.push(e),
                }
                g.remaining -= 1;
                if g.remaining == 0 {
                    let g = self.groups.remove(&group).expect("present");
                    self.answer_group(g);
                }
            }
        }
    }

    fn answer_group(&mut self, g: Group) {
        let message = if g.problems.is_empty() {
            format!("unloading {} bundle(s) of {}", g.moves.len(), g.namespace)
        } else {
            format!(
                "unloading {} bundle(s) of {}; not unloaded: {}",
                g.moves.len(),
                g.namespace,
                g.problems.join("; ")
            )
        };
        self.answer(g.id, Ok((message, serde_json::json!(g.moves))));
    }

    fn lookup(&mut self, now: i64, id: RequestId, topic: &str) -> Option<Outcome> {
        let name = match TopicName::parse(topic) {
            Ok(t) => t,
            Err(e) => return Some(Err(format!("topic {topic}: {e}"))),
        };
        let ns = name.namespace().clone();
        let Some(info) = self.namespaces.get(&ns.to_string()) else {
            return Some(Err(format!(
                "namespace {ns} does not exist (create it with `loadmgr admin namespaces create {ns}`)"
            )));
        };
        let bundle = BundleName::new(ns, info.bundles.find_topic(&name)).to_string();
        self.lookup_bundle(now, id, &bundle, &format!("lookup of {topic}"))
    }

    /// Answers where `bundle` is served, placing it when it is unowned.
    fn lookup_bundle(
        &mut self,
        now: i64,
        id: RequestId,
        bundle: &str,
        what: &str,
    ) -> Option<Outcome> {
        let answer = |broker: &str, owned: bool| {
            serde_json::to_value(LookupAnswer {
                bundle: bundle.to_owned(),
                broker: broker.to_owned(),
                owned,
            })
            .expect("serialisable")
        };
        if let Some(o) = self.owners.get(bundle) {
            if !o.disabled && self.registered.contains(&o.broker) {
                return Some(Ok((
                    format!("{bundle} is owned by {}", o.broker),
                    answer(&o.broker, true),
                )));
            }
        }
        if let Some((r, _)) = self.records.get(bundle) {
            if self.registered.contains(&r.destination) {
                return Some(Ok((
                    format!("{bundle} is being assigned to {}", r.destination),
                    answer(&r.destination, false),
                )));
            }
        }
        if !self.bundle_exists(bundle) {
            return Some(Err(format!("{bundle} is not a bundle of its namespace")));
        }
        let placed = self.place(bundle);
        match placed {
            Ok(a) => {
                let link = Link::Request {
                    id,
                    message: format!("{bundle} assigned to {}", a.broker),
                    result: answer(&a.broker, false),
                };
                let reason = format!("{what}: {}", a.reason);
                self.start_move(
                    now,
                    bundle,
                    &a.broker,
                    AssignmentCause::Lookup,
                    reason,
                    Some(link),
                );
                None
            }
            Err(skipped) => Some(Err(format!("{bundle}: {}", skipped.reason))),
        }
    }

    /// Starts an operator's unload of one bundle; `request` is answered when the record is written (`None`:
    /// part of a namespace unload, see the caller).
    fn unload(
        &mut self,
        now: i64,
        bundle: &str,
        destination: Option<&str>,
        request: Option<RequestId>,
    ) -> Option<Outcome> {
        match self.plan_unload(now, bundle, destination) {
            Ok(Plan::InFlight(o)) => Some(Ok(o)),
            Ok(Plan::Move { dest, why, result }) => {
                let owner = result["source"].as_str().unwrap_or_default().to_owned();
                let link = request.map(|id| Link::Request {
                    id,
                    message: format!("unloading {bundle} from {owner} to {dest}"),
                    result: result.clone(),
                });
                self.start_move(now, bundle, &dest, AssignmentCause::Unload, why, link);
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    fn plan_unload(
        &mut self,
        now: i64,
        bundle: &str,
        destination: Option<&str>,
    ) -> Result<Plan, String> {
        let name = BundleName::parse(bundle).map_err(|e| format!("bundle {bundle}: {e}"))?;
        let ns = name.namespace().clone();
        let Some(info) = self.namespaces.get(&ns.to_string()) else {
            return Err(format!("namespace {ns} does not exist"));
        };
        if !info.bundles.contains_range(name.range()) {
            return Err(format!(
                "{} is not a bundle of {ns}; its bundles are {}",
                name.range(),
                info.bundles
                    .ranges()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // A request a previous leader already started (it died before answering): report the move in flight.
        if let Some((r, _)) = self.records.get(bundle) {
            if r.state == AssignmentState::Assigning
                && r.cause == AssignmentCause::Unload
                && destination.map_or(true, |d| d == r.destination)
            {
                let source = r.source.clone().unwrap_or_default();
                return Ok(Plan::InFlight((
                    format!(
                        "unloading {bundle} from {source} to {} (already in flight)",
                        r.destination
                    ),
                    serde_json::json!({"bundle": bundle, "source": source, "destination": r.destination}),
                )));
            }
        }
        let Some(owner) = self.owners.get(bundle).map(|o| o.broker.clone()) else {
            return Err(format!(
                "{bundle} is not owned by any broker; nothing to unload"
            ));
        };
        if let Some(b) = self.move_blocker(bundle, &owner) {
            return Err(format!("{bundle} cannot be unloaded now: {b}"));
        }
        let (dest, why) = match destination {
            Some(d) => {
                if !self.registered.contains(d) {
                    return Err(format!(
                        "destination broker {d} is not registered (brokers: {})",
                        self.registered
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                if d == owner {
                    return Err(format!("{bundle} is already owned by {d}"));
                }
                (d.to_owned(), format!("operator unload to {d}"))
            }
            None => match self.choose_other(now, bundle, &owner) {
                Ok((d, why)) => (
                    d.clone(),
                    format!("operator unload; destination {d}: {why}"),
                ),
                Err(e) => return Err(format!("{bundle}: no other broker can take it: {e}")),
            },
        };
        let result = serde_json::json!({"bundle": bundle, "source": owner, "destination": dest});
        Ok(Plan::Move { dest, why, result })
    }

    fn unload_namespace(&mut self, now: i64, id: RequestId, namespace: &str) -> Option<Outcome> {
        let ns = match NamespaceName::parse(namespace) {
            Ok(n) => n,
            Err(e) => return Some(Err(format!("namespace {namespace}: {e}"))),
        };
        let Some(info) = self.namespaces.get(&ns.to_string()) else {
            return Some(Err(format!("namespace {ns} does not exist")));
        };
        let bundles: Vec<String> = info
            .bundle_names()
            .into_iter()
            .filter(|b| self.owners.contains_key(b))
            .collect();
        let group_id = self.ticket();
        let mut group = Group {
            id,
            namespace: ns.to_string(),
            remaining: 0,
            moves: Vec::new(),
            problems: Vec::new(),
        };
        let mut moves = Vec::new();
        for b in bundles {
            match self.plan_unload(now, &b, None) {
                Ok(Plan::InFlight((_, r))) => group.moves.push(r),
                Ok(Plan::Move { dest, why, result }) => moves.push((b, dest, why, result)),
                Err(e) => group.problems.push(e),
            }
        }
        if moves.is_empty() {
            self.answer_group(group);
            return None;
        }
        group.remaining = moves.len();
        self.groups.insert(group_id, group);
        for (b, dest, why, result) in moves {
            let link = Link::Group {
                group: group_id,
                result,
            };
            self.start_move(now, &b, &dest, AssignmentCause::Unload, why, Some(link));
        }
        None
    }

    /// Validates a split request and starts it; answered when the split is written (or refused).
    fn split_request(
        &mut self,
        now: i64,
        id: RequestId,
        bundle: &str,
        algorithm: Option<&str>,
        positions: &[String],
        unload: bool,
    ) -> Option<Outcome> {
        let name = match BundleName::parse(bundle) {
            Ok(n) => n,
            Err(e) => return Some(Err(format!("bundle {bundle}: {e}"))),
        };
        let algorithm = match algorithm {
            None => self.settings.default_namespace_bundle_split_algorithm,
            Some(a) => match a.parse::<SplitAlgorithm>() {
                Ok(a) => a,
                Err(e) => return Some(Err(e.to_string())),
            },
        };
        let supported = &self.settings.supported_namespace_bundle_split_algorithms;
        if !supported.iter().any(|s| s == algorithm.name()) {
            return Some(Err(format!(
                "{} is not in supportedNamespaceBundleSplitAlgorithms ({})",
                algorithm.name(),
                supported.join(", ")
            )));
        }
        let positions: Vec<u64> = match positions.iter().map(|p| parse_hash(p)).collect() {
            Ok(p) => p,
            Err(e) => return Some(Err(format!("positions: {e}"))),
        };
        if algorithm == SplitAlgorithm::SpecifiedPositionsDivide && positions.is_empty() {
            return Some(Err("specified_positions_divide needs --positions".into()));
        }
        let Some(info) = self.namespaces.get(&name.namespace().to_string()) else {
            return Some(Err(format!(
                "namespace {} does not exist",
                name.namespace()
            )));
        };
        if !info.bundles.contains_range(name.range()) {
            return Some(Err(format!(
                "{bundle} is not a bundle of {}",
                name.namespace()
            )));
        }
        let Some(owner) = self.owners.get(bundle).map(|o| o.broker.clone()) else {
            return Some(Err(format!(
                "{bundle} is not owned by any broker; look one of its topics up first"
            )));
        };
        let plan = SplitRequest {
            bundle: bundle.to_owned(),
            owner,
            algorithm,
            positions,
            unload_children: unload,
            reason: format!("operator split with {}", algorithm.name()),
            request: Some(id),
        };
        // Every algorithm but range_equally_divide looks at the bundle's topics (specified_positions_divide too:
        // Pulsar splits only a bundle with more than one topic), which only the owner knows.
        match algorithm {
            SplitAlgorithm::TopicCountEquallyDivide
            | SplitAlgorithm::FlowOrQpsEquallyDivide
            | SplitAlgorithm::SpecifiedPositionsDivide => self.ask_split_points(plan),
            SplitAlgorithm::RangeEquallyDivide => {
                match split_bundle(name.range(), algorithm, &SplitInput::default()) {
                    Ok(SplitOutcome::Split(points)) => self.apply_split(now, plan, points),
                    Ok(SplitOutcome::NoSplit(why)) => {
                        return Some(Err(format!(
                            "{} gives no split point: {why}",
                            algorithm.name()
                        )))
                    }
                    Err(e) => return Some(Err(e.to_string())),
                }
            }
        }
        None
    }
}

/// What an unload of one bundle does.
enum Plan {
    /// A move a previous leader started for the same request.
    InFlight((String, serde_json::Value)),
    /// A move to start.
    Move {
        dest: String,
        why: String,
        result: serde_json::Value,
    },
}
