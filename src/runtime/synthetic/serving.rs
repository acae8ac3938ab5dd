//! How the synthetic host serves: a batch of messages per bundle every `batchIntervalMs`, each one only
//! while the bundle's [`OwnershipLease`] is valid, and the host's own **serving timeline** — when it started
//! and stopped serving each bundle, with the lease's fencing token — which tests and the chaos suite read to
//! check that no two brokers ever served one bundle at the same instant.
//!
//! # Contract
//!
//! * Every tick, for every bundle it was given, the host reads the wall clock and *then* checks the lease; a
//!   batch is recorded at that time only if the lease was valid. (A lease only turns invalid with time, or
//!   valid again when the server confirmed the session meanwhile, so the batch really happened while the
//!   lease held.)
//! * An **interval** opens with the first batch served under a lease and closes with the last one: when the
//!   host finds the lease invalid (`lease lapsed`, `lease revoked`), when the bundle is unloaded, or when a new
//!   lease replaces it. Its bounds are batch times, so a process that was paused ends its interval at the
//!   last batch before the pause, not when it noticed.
//! * With a log file, each opening and closing is appended as a JSON line as it happens
//!   (`{"event":"start","bundle":…,"token":…,"atUs":…}`, `{"event":"stop",…,"atUs":<last batch>,
//!   "batches":…,"why":…}`; times in µs since the Unix epoch) and flushed, so a killed process leaves its
//!   open intervals as unmatched starts.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::bundle::BundleName;
use crate::runtime::host::OwnershipLease;

/// One stretch of time during which the host served a bundle under one lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServingInterval {
    /// Full bundle name.
    pub bundle: String,
    /// The lease's fencing token.
    pub token: i64,
    /// Time of the first batch, µs since the Unix epoch.
    pub first_us: i64,
    /// Time of the last batch, µs since the Unix epoch.
    pub last_us: i64,
    /// Batches served.
    pub batches: u64,
    /// Why it ended; `None` while it is open.
    pub why: Option<String>,
}

/// A line of the serving log (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "event")]
pub enum ServingEvent {
    /// The first batch of an interval.
    #[serde(rename = "start")]
    Start {
        /// Full bundle name.
        bundle: String,
        /// Fencing token of the lease.
        token: i64,
        /// µs since the Unix epoch.
        #[serde(rename = "atUs")]
        at_us: i64,
    },
    /// The end of an interval, timed at its last batch.
    #[serde(rename = "stop")]
    Stop {
        /// Full bundle name.
        bundle: String,
        /// Fencing token of the lease.
        token: i64,
        /// Time of the last batch, µs since the Unix epoch.
        #[serde(rename = "atUs")]
        at_us: i64,
        /// Batches served in the interval.
        batches: u64,
        /// Why it ended.
        why: String,
    },
}

/// Now, µs since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A bundle the host was given.
#[derive(Debug)]
pub(super) struct ServedBundle {
    pub(super) name: BundleName,
    pub(super) lease: OwnershipLease,
    open: Option<ServingInterval>,
}

/// The bundles the host serves, their leases and the timeline.
#[derive(Debug, Default)]
pub(super) struct Serving {
    pub(super) bundles: Mutex<BTreeMap<String, ServedBundle>>,
    closed: Mutex<Vec<ServingInterval>>,
    log: Option<Mutex<File>>,
    pump: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Serving {
    /// A serving state that appends its timeline to `log` (created or truncated) if given.
    pub(super) fn new(log: Option<&Path>) -> std::io::Result<Serving> {
        let log = match log {
            Some(p) => Some(Mutex::new(File::create(p)?)),
            None => None,
        };
        Ok(Serving {
            bundles: Mutex::default(),
            closed: Mutex::default(),
            log,
            pump: Mutex::default(),
        })
    }

    fn write(&self, event: &ServingEvent) {
        if let Some(log) = &self.log {
            let mut line = serde_json::to_vec(event).expect("serialisable");
            line.push(b'\n');
            let mut f = log.lock().unwrap();
            if let Err(e) = f.write_all(&line).and_then(|()| f.flush()) {
                tracing::warn!("cannot write the serving log: {e}");
            }
        }
    }

    fn close(&self, mut interval: ServingInterval, why: &str) {
        interval.why = Some(why.to_owned());
        self.write(&ServingEvent::Stop {
            bundle: interval.bundle.clone(),
            token: interval.token,
            at_us: interval.last_us,
            batches: interval.batches,
            why: why.to_owned(),
        });
        self.closed.lock().unwrap().push(interval);
    }

    /// Takes `lease` for its bundle (replacing an older lease, whose interval closes).
    pub(super) fn load(&self, name: BundleName, lease: OwnershipLease) {
        let bundle = lease.bundle().to_owned();
        let old = self.bundles.lock().unwrap().insert(
            bundle,
            ServedBundle {
                name,
                lease,
                open: None,
            },
        );
        if let Some(open) = old.and_then(|o| o.open) {
            self.close(open, "a new lease replaced it");
        }
    }

    /// Forgets `bundle` (its interval closes).
    pub(super) fn unload(&self, bundle: &str) {
        let old = self.bundles.lock().unwrap().remove(bundle);
        if let Some(open) = old.and_then(|o| o.open) {
            self.close(open, "unloaded");
        }
    }

    /// Whether the host holds `bundle` at all (lease valid or not).
    pub(super) fn holds(&self, bundle: &str) -> bool {
        self.bundles.lock().unwrap().contains_key(bundle)
    }

    /// One batch for every bundle whose lease is valid; intervals of lapsed leases close.
    pub(super) fn tick(&self) {
        let mut events = Vec::new();
        let mut ended = Vec::new();
        {
            let mut bundles = self.bundles.lock().unwrap();
            for (bundle, served) in bundles.iter_mut() {
                // The clock first, then the lease: the batch happened at `at` only if the lease held.
                let at = now_us();
                if served.lease.is_valid() {
                    match &mut served.open {
                        Some(open) => {
                            open.last_us = at;
                            open.batches += 1;
                        }
                        None => {
                            served.open = Some(ServingInterval {
                                bundle: bundle.clone(),
                                token: served.lease.token(),
                                first_us: at,
                                last_us: at,
                                batches: 1,
                                why: None,
                            });
                            events.push(ServingEvent::Start {
                                bundle: bundle.clone(),
                                token: served.lease.token(),
                                at_us: at,
                            });
                        }
                    }
                } else if let Some(open) = served.open.take() {
                    let why = if served.lease.is_revoked() {
                        "lease revoked"
                    } else {
                        "lease lapsed"
                    };
                    ended.push((open, why));
                }
            }
        }
        for e in &events {
            self.write(e);
        }
        for (open, why) in ended {
            self.close(open, why);
        }
    }

    /// Every interval so far: the closed ones, then the open ones.
    pub(super) fn timeline(&self) -> Vec<ServingInterval> {
        let mut out = self.closed.lock().unwrap().clone();
        out.extend(
            self.bundles
                .lock()
                .unwrap()
                .values()
                .filter_map(|b| b.open.clone()),
        );
        out
    }

    /// Starts the batch pump (once; needs a tokio runtime): a tick every `every` until the host is dropped.
    pub(super) fn start_pump(self: &Arc<Self>, every: Duration) {
        let mut pump = self.pump.lock().unwrap();
        if pump.is_some() {
            return;
        }
        let weak: Weak<Serving> = Arc::downgrade(self);
        *pump = Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                let Some(serving) = weak.upgrade() else {
                    return;
                };
                serving.tick();
            }
        }));
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(pump) = self.pump.lock().unwrap().take() {
            pump.abort();
        }
    }
}

/// Reads a serving log (see the module docs); lines that are not events are errors naming the line.
pub fn read_serving_log(text: &str) -> Result<Vec<ServingEvent>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("serving log line {}: {e}", i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionValidity;

    fn lease(bundle: &str, token: i64, validity: &SessionValidity) -> OwnershipLease {
        OwnershipLease::new(bundle, token, validity.clone())
    }

    #[test]
    fn intervals_follow_the_lease_and_close_at_the_last_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serving.jsonl");
        let serving = Serving::new(Some(&path)).unwrap();
        let validity = SessionValidity::unbounded();
        let b = "public/demo/0x00000000_0xffffffff";
        let l1 = lease(b, 7, &validity);
        serving.load(BundleName::parse(b).unwrap(), l1.clone());
        serving.tick();
        serving.tick();
        let open = serving.timeline();
        assert_eq!(open.len(), 1);
        assert_eq!(
            (open[0].token, open[0].batches, open[0].why.clone()),
            (7, 2, None)
        );
        let last = open[0].last_us;
        // Revoked: the next tick serves nothing and closes the interval at the last batch.
        l1.revoke();
        serving.tick();
        let t = serving.timeline();
        assert_eq!(t[0].why.as_deref(), Some("lease revoked"));
        assert_eq!(t[0].last_us, last);
        // A new lease opens a new interval; the session ending lapses it.
        serving.load(BundleName::parse(b).unwrap(), lease(b, 9, &validity));
        serving.tick();
        validity.end();
        serving.tick();
        serving.tick();
        serving.unload(b);
        let t = serving.timeline();
        assert_eq!(t.len(), 2);
        assert_eq!((t[1].token, t[1].batches), (9, 1));
        assert_eq!(t[1].why.as_deref(), Some("lease lapsed"));
        let events = read_serving_log(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let kinds: Vec<(&str, i64)> = events
            .iter()
            .map(|e| match e {
                ServingEvent::Start { token, .. } => ("start", *token),
                ServingEvent::Stop { token, .. } => ("stop", *token),
            })
            .collect();
        assert_eq!(
            kinds,
            [("start", 7), ("stop", 7), ("start", 9), ("stop", 9)]
        );
        assert!(read_serving_log("{\"event\":\"nope\"}").is_err());
    }

    #[test]
    fn an_unload_closes_an_open_interval_and_a_replaced_lease_too() {
        let serving = Serving::new(None).unwrap();
        let b = "public/demo/0x00000000_0x80000000";
        serving.load(
            BundleName::parse(b).unwrap(),
            OwnershipLease::unbounded(b, 1),
        );
        serving.tick();
        serving.load(
            BundleName::parse(b).unwrap(),
            OwnershipLease::unbounded(b, 2),
        );
        serving.tick();
        serving.unload(b);
        let why: Vec<_> = serving
            .timeline()
            .into_iter()
            .map(|i| (i.token, i.why.unwrap()))
            .collect();
        assert_eq!(
            why,
            [
                (1, "a new lease replaced it".to_owned()),
                (2, "unloaded".to_owned())
            ]
        );
        assert!(!serving.holds(b));
    }
}
