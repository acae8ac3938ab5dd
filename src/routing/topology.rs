//! Where the source and its targets run, and the scope of each target relative to the source.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{RoutingError, Scope, TargetId};

/// The rack assumed for a location whose rack is unknown (Storm's default topography plugin puts every host
/// there, so with no rack information every other known host is rack-local).
pub const DEFAULT_RACK: &str = "/default-rack";

/// Where a process runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Location {
    /// Host name; equal names mean the same machine.
    pub host: String,
    /// The worker process on that host (a port, a broker id, …); equal host and worker mean the same process.
    pub worker: String,
    /// Rack or failure domain; `None` means unknown, which is [`Topology::default_rack`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
}

impl Location {
    /// A location with a known rack.
    pub fn new(
        host: impl Into<String>,
        worker: impl Into<String>,
        rack: impl Into<String>,
    ) -> Self {
        Self {
            host: host.into(),
            worker: worker.into(),
            rack: Some(rack.into()),
        }
    }

    /// A location whose rack is unknown.
    pub fn without_rack(host: impl Into<String>, worker: impl Into<String>) -> Self {
        Self {
            host: host.into(),
            worker: worker.into(),
            rack: None,
        }
    }
}

/// One target and where it runs (`None`: placement unknown, which puts it in [`Scope::Everything`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPlacement {
    /// The target.
    pub id: TargetId,
    /// Its location, if known.
    pub location: Option<Location>,
}

/// The source and its targets. Target order matters only for determinism (slot order before the shuffle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Where the sender runs.
    pub source: Location,
    /// The targets, each id once.
    pub targets: Vec<TargetPlacement>,
    /// Rack of every location whose rack is `None` (default [`DEFAULT_RACK`]).
    pub default_rack: String,
}

impl Topology {
    /// A topology with the default rack [`DEFAULT_RACK`].
    pub fn new(source: Location, targets: Vec<TargetPlacement>) -> Self {
        Self {
            source,
            targets,
            default_rack: DEFAULT_RACK.to_string(),
        }
    }

    /// Adds a placed target (builder style).
    pub fn with_target(mut self, id: u32, location: Location) -> Self {
        self.targets.push(TargetPlacement {
            id: TargetId(id),
            location: Some(location),
        });
        self
    }

    /// Adds a target whose placement is unknown (builder style).
    pub fn with_unplaced_target(mut self, id: u32) -> Self {
        self.targets.push(TargetPlacement {
            id: TargetId(id),
            location: None,
        });
        self
    }

    /// Fills in the rack of every location (source and targets) that has none from `host_racks`
    /// (host → rack, like Storm's topography plugin). Hosts missing from the map keep `None`, i.e. the
    /// default rack; racks already set are kept.
    pub fn assign_racks(&mut self, host_racks: &BTreeMap<String, String>) {
        let fill = |loc: &mut Location| {
            if loc.rack.is_none() {
                loc.rack = host_racks.get(&loc.host).cloned();
            }
        };
        fill(&mut self.source);
        for t in &mut self.targets {
            if let Some(loc) = t.location.as_mut() {
                fill(loc);
            }
        }
    }

    /// The scope of one location relative to the source: same host and worker → worker-local; same host →
    /// host-local; same rack (unknown racks are the default rack) → rack-local; otherwise, or with no
    /// location, everything.
    pub fn classify(&self, location: Option<&Location>) -> Scope {
        let Some(loc) = location else {
            return Scope::Everything;
        };
        if loc.host == self.source.host {
            if loc.worker == self.source.worker {
                Scope::WorkerLocal
            } else {
                Scope::HostLocal
            }
        } else if self.rack_of(loc) == self.rack_of(&self.source) {
            Scope::RackLocal
        } else {
            Scope::Everything
        }
    }

    /// The scope of every target, in target order.
    pub fn scopes(&self) -> Vec<(TargetId, Scope)> {
        self.targets
            .iter()
            .map(|t| (t.id, self.classify(t.location.as_ref())))
            .collect()
    }

    /// Checks that there is at least one target, at most `max`, and no id twice.
    pub(crate) fn validate(&self, max: usize) -> Result<(), RoutingError> {
        if self.targets.is_empty() {
            return Err(RoutingError::NoTargets);
        }
        if self.targets.len() > max {
            return Err(RoutingError::TooManyTargets {
                count: self.targets.len(),
                max,
            });
        }
        let mut seen = HashSet::with_capacity(self.targets.len());
        for t in &self.targets {
            if !seen.insert(t.id) {
                return Err(RoutingError::DuplicateTarget(t.id));
            }
        }
        Ok(())
    }

    fn rack_of<'a>(&'a self, loc: &'a Location) -> &'a str {
        loc.rack.as_deref().unwrap_or(&self.default_rack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        Topology::new(Location::new("h1", "6700", "r1"), Vec::new())
            .with_target(1, Location::new("h1", "6700", "r1"))
            .with_target(2, Location::new("h1", "6701", "r1"))
            .with_target(3, Location::new("h2", "6700", "r1"))
            .with_target(4, Location::new("h3", "6700", "r2"))
            .with_unplaced_target(5)
            .with_target(6, Location::without_rack("h4", "6700"))
    }

    #[test]
    fn classification_by_worker_host_and_rack() {
        let got: Vec<Scope> = topo().scopes().into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            got,
            vec![
                Scope::WorkerLocal,
                Scope::HostLocal,
                Scope::RackLocal,
                Scope::Everything,
                Scope::Everything,
                Scope::Everything, // default rack differs from the source's r1
            ]
        );
    }

    #[test]
    fn unknown_racks_share_the_default_rack() {
        let t = Topology::new(Location::without_rack("h1", "w"), Vec::new())
            .with_target(1, Location::without_rack("h2", "w"))
            .with_target(2, Location::new("h3", "w", DEFAULT_RACK))
            .with_target(3, Location::new("h4", "w", "elsewhere"));
        let got: Vec<Scope> = t.scopes().into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            got,
            vec![Scope::RackLocal, Scope::RackLocal, Scope::Everything]
        );
    }

    #[test]
    fn racks_from_a_host_map_and_the_default_for_unknown_hosts() {
        let mut t = Topology::new(Location::without_rack("h1", "w"), Vec::new())
            .with_target(1, Location::without_rack("h2", "w"))
            .with_target(2, Location::without_rack("h3", "w"))
            .with_target(3, Location::new("h4", "w", "r1"))
            .with_target(4, Location::without_rack("unknown", "w"))
            .with_unplaced_target(5);
        let racks: BTreeMap<String, String> =
            [("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")]
                .into_iter()
                .map(|(h, r)| (h.to_string(), r.to_string()))
                .collect();
        t.assign_racks(&racks);
        assert_eq!(t.source.rack.as_deref(), Some("r1"));
        let got: Vec<Scope> = t.scopes().into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            got,
            vec![
                Scope::RackLocal,
                Scope::Everything,
                Scope::RackLocal,  // a rack already set is kept
                Scope::Everything, // unknown host: default rack, not r1
                Scope::Everything,
            ]
        );
        assert_eq!(t.targets[3].location.as_ref().unwrap().rack, None);
    }

    #[test]
    fn same_host_wins_over_a_conflicting_rack() {
        let t = Topology::new(Location::new("h1", "w", "r1"), Vec::new())
            .with_target(1, Location::new("h1", "w2", "r9"));
        assert_eq!(t.scopes()[0].1, Scope::HostLocal);
    }

    #[test]
    fn validation_rejects_empty_duplicate_and_oversized() {
        let empty = Topology::new(Location::new("h", "w", "r"), Vec::new());
        assert_eq!(empty.validate(10), Err(RoutingError::NoTargets));
        let dup = topo().with_target(3, Location::new("h9", "w", "r"));
        assert_eq!(
            dup.validate(10),
            Err(RoutingError::DuplicateTarget(TargetId(3)))
        );
        assert_eq!(
            topo().validate(2),
            Err(RoutingError::TooManyTargets { count: 6, max: 2 })
        );
        assert_eq!(topo().validate(10), Ok(()));
    }
}
