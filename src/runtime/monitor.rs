//! The broker monitor of Pulsar's docs (`pulsar-perf monitor-brokers`, `BrokerMonitor.java`): watches
//! `/loadbalance/brokers`, says when brokers join and leave, prints a table for every report written, and a
//! global table every minute. It reads what Java brokers write as well as what loadmgr writes.
//!
//! Tables are made exactly as `FixedColumnLengthTableMaker` makes them: `||` borders, `|` separators, no left
//! padding and one space of right padding, cells cut to the column width, `Float`/`Double` cells formatted
//! `%.2f` (Java's rounding: half-up on the shortest decimal form of the value), others via `toString`, a
//! missing cell empty. Per-broker tables have seven 14-wide columns and `=` borders (115 characters); the
//! global table a 60-wide broker column, five 12-wide ones and `*` borders (135 characters).
//!
//! **Kept quirk** (a faithful port): in the global table the per-broker rows hold the throughput (KB/s) under
//! `LONG/S` and the long-term message rate under `KB/S`, while the `TOTAL` row holds them in header order; the
//! `MAX %` column is a fraction (0–1) for modular brokers and a percentage for Simple ones.
//!
//! A node whose text contains `allocated` is read as the Simple load manager's `LoadReport` (Java's test);
//! anything else as `LocalBrokerData`, with the leader's `/loadbalance/broker-time-average/<broker>` for the
//! SHORT and LONG rows (Java stops when that node is missing; loadmgr prints zeros and says so).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::model::load_report::parse_report;
use crate::model::{LoadReport, LocalBrokerData, ResourceUsage, TimeAverageBrokerData};
use crate::paths;
use crate::store::{DynStore, Error, MetadataStoreExt, NotificationType};

/// One table cell, typed as Java's `Object` row elements are.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A label or other text.
    Text(String),
    /// An integer (`int`/`long`): printed as is.
    Int(i64),
    /// A Java `float` (e.g. `percentUsage()`): printed `%.2f` after widening to double.
    Float(f32),
    /// A Java `double`: printed `%.2f`.
    Double(f64),
    /// `null`: an empty cell.
    Empty,
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_owned())
    }
}

/// Java's `String.format("%.2f", v)`: half-up rounding of the shortest decimal representation.
pub fn format_2f(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let text = format!("{}", v.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut digits: Vec<u8> = int
        .bytes()
        .chain(frac.bytes().chain(std::iter::repeat(b'0')).take(2))
        .collect();
    if frac.len() > 2 && frac.as_bytes()[2] >= b'5' {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - 2;
    let body = format!(
        "{}.{}",
        std::str::from_utf8(&digits[..split]).expect("ascii"),
        std::str::from_utf8(&digits[split..]).expect("ascii")
    );
    if v.is_sign_negative() {
        format!("-{body}")
    } else {
        body
    }
}

/// `FixedColumnLengthTableMaker` with the monitor's settings.
#[derive(Debug, Clone)]
pub struct TableMaker {
    top: char,
    bottom: char,
    widths: fn(usize) -> usize,
}

fn local_width(_: usize) -> usize {
    14
}

fn global_width(column: usize) -> usize {
    if column == 0 {
        60
    } else {
        12
    }
}

impl TableMaker {
    /// Per-broker tables: 14-wide columns, `=` borders.
    pub fn local() -> Self {
        Self {
            top: '=',
            bottom: '=',
            widths: local_width,
        }
    }

    /// The global table: a 60-wide first column, 12-wide others, `*` borders.
    pub fn global() -> Self {
        Self {
            top: '*',
            bottom: '*',
            widths: global_width,
        }
    }

    /// The table text (no newline after the bottom border, as Java's).
    pub fn make(&self, rows: &[Vec<Cell>]) -> String {
        let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
        let total: usize = (0..columns).map(self.widths).sum::<usize>() + columns * 2 - 1 + 4;
        let mut out = String::new();
        out.extend(std::iter::repeat(self.top).take(total));
        out.push('\n');
        for row in rows {
            out.push_str("||");
            for i in 0..columns {
                let width = (self.widths)(i);
                let text = match row.get(i) {
                    None | Some(Cell::Empty) => String::new(),
                    Some(Cell::Text(s)) => s.clone(),
                    Some(Cell::Int(n)) => n.to_string(),
                    Some(Cell::Float(f)) => format_2f(*f as f64),
                    Some(Cell::Double(d)) => format_2f(*d),
                };
                let text: String = text.chars().take(width).collect();
                let len = text.chars().count();
                out.push_str(&text);
                out.extend(std::iter::repeat(' ').take(width - len + 1));
                if i != columns - 1 {
                    out.push('|');
                }
            }
            out.push_str("||\n");
        }
        out.extend(std::iter::repeat(self.bottom).take(total));
        out
    }
}

fn message_row(rate_in: f64, rate_out: f64, tp_in: f64, tp_out: f64) -> Vec<Cell> {
    vec![
        Cell::Empty,
        Cell::Double(rate_in),
        Cell::Double(rate_out),
        Cell::Double(rate_in + rate_out),
        Cell::Double(tp_in / 1024.0),
        Cell::Double(tp_out / 1024.0),
        Cell::Double((tp_in + tp_out) / 1024.0),
    ]
}

fn labels(first: &str, rest: &[&str]) -> Vec<Cell> {
    std::iter::once(first)
        .chain(rest.iter().copied())
        .map(Cell::from)
        .collect()
}

const SYSTEM: [&str; 6] = [
    "CPU %", "MEMORY %", "DIRECT %", "BW IN %", "BW OUT %", "MAX %",
];
const MESSAGE: [&str; 6] = [
    "MSG/S IN",
    "MSG/S OUT",
    "TOTAL",
    "KB/S IN",
    "KB/S OUT",
    "TOTAL",
];
const COUNT: [&str; 6] = [
    "TOPIC", "BUNDLE", "PRODUCER", "CONSUMER", "BUNDLE +", "BUNDLE -",
];

/// The modular broker table (SYSTEM, COUNT, LATEST, SHORT, LONG).
pub fn broker_table(local: &LocalBrokerData, ta: &TimeAverageBrokerData) -> String {
    let rows = vec![
        labels("SYSTEM", &SYSTEM),
        vec![
            Cell::Empty,
            Cell::Float(local.cpu.percent_usage()),
            Cell::Float(local.memory.percent_usage()),
            Cell::Float(local.direct_memory.percent_usage()),
            Cell::Float(local.bandwidth_in.percent_usage()),
            Cell::Float(local.bandwidth_out.percent_usage()),
            Cell::Double(local.max_resource_usage() * 100.0),
        ],
        labels("COUNT", &COUNT),
        vec![
            Cell::Empty,
            Cell::Int(local.num_topics),
            Cell::Int(local.num_bundles as i64),
            Cell::Int(local.num_producers as i64),
            Cell::Int(local.num_consumers as i64),
            Cell::Int(local.last_bundle_gains.len() as i64),
            Cell::Int(local.last_bundle_losses.len() as i64),
        ],
        labels("LATEST", &MESSAGE),
        message_row(
            local.msg_rate_in,
            local.msg_rate_out,
            local.msg_throughput_in,
            local.msg_throughput_out,
        ),
        labels("SHORT", &MESSAGE),
        message_row(
            ta.short_term_msg_rate_in,
            ta.short_term_msg_rate_out,
            ta.short_term_msg_throughput_in,
            ta.short_term_msg_throughput_out,
        ),
        labels("LONG", &MESSAGE),
        message_row(
            ta.long_term_msg_rate_in,
            ta.long_term_msg_rate_out,
            ta.long_term_msg_throughput_in,
            ta.long_term_msg_throughput_out,
        ),
    ];
    TableMaker::local().make(&rows)
}

fn other_f64(report: &LoadReport, key: &str) -> f64 {
    report
        .other
        .get(key)
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}

fn other_len(report: &LoadReport, key: &str) -> i64 {
    report
        .other
        .get(key)
        .and_then(|v| v.as_array())
        .map_or(0, |a| a.len() as i64)
}

/// `BrokerMonitor.percentUsage(usage, limit)`: `100 × min(1, usage/limit)` when the limit is positive and the
/// usage not negative, else 0.
fn percent(usage: f64, limit: f64) -> f64 {
    if limit > 0.0 && usage >= 0.0 {
        100.0 * (usage / limit).min(1.0)
    } else {
        0.0
    }
}

fn raw_max(u: &[ResourceUsage]) -> f64 {
    u.iter()
        .map(|r| r.percent_usage() as f64)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The Simple load manager's table (COUNT, RAW SYSTEM, ALLOC SYSTEM, RAW MSG, ALLOC MSG).
pub fn simple_table(report: &LoadReport) -> String {
    let u = &report.system_resource_usage;
    let max = raw_max(&[
        u.cpu,
        u.memory,
        u.direct_memory,
        u.bandwidth_in,
        u.bandwidth_out,
    ]);
    let a_cpu = percent(other_f64(report, "allocatedCPU"), u.cpu.limit);
    let a_mem = percent(other_f64(report, "allocatedMemory"), u.memory.limit);
    let a_in = percent(
        other_f64(report, "allocatedBandwidthIn"),
        u.bandwidth_in.limit,
    );
    let a_out = percent(
        other_f64(report, "allocatedBandwidthOut"),
        u.bandwidth_out.limit,
    );
    let rows = vec![
        labels("COUNT", &COUNT),
        vec![
            Cell::Empty,
            Cell::Int(report.num_topics as i64),
            Cell::Int(report.num_bundles as i64),
            Cell::Int(report.num_producers as i64),
            Cell::Int(report.num_consumers as i64),
            Cell::Int(other_len(report, "bundleGains")),
            Cell::Int(other_len(report, "bundleLosses")),
        ],
        labels("RAW SYSTEM", &SYSTEM),
        vec![
            Cell::Empty,
            Cell::Float(u.cpu.percent_usage()),
            Cell::Float(u.memory.percent_usage()),
            Cell::Float(u.direct_memory.percent_usage()),
            Cell::Float(u.bandwidth_in.percent_usage()),
            Cell::Float(u.bandwidth_out.percent_usage()),
            Cell::Double(max),
        ],
        labels("ALLOC SYSTEM", &SYSTEM),
        vec![
            Cell::Empty,
            Cell::Double(a_cpu),
            Cell::Double(a_mem),
            Cell::Empty,
            Cell::Double(a_in),
            Cell::Double(a_out),
            Cell::Double(a_cpu.max(a_mem).max(a_in).max(a_out)),
        ],
        labels("RAW MSG", &MESSAGE),
        message_row(
            report.msg_rate_in,
            report.msg_rate_out,
            u.bandwidth_in.usage,
            u.bandwidth_out.usage,
        ),
        labels("ALLOC MSG", &MESSAGE),
        message_row(
            other_f64(report, "allocatedMsgRateIn"),
            other_f64(report, "allocatedMsgRateOut"),
            other_f64(report, "allocatedBandwidthIn"),
            other_f64(report, "allocatedBandwidthOut"),
        ),
    ];
    TableMaker::local().make(&rows)
}

/// What the global table keeps per broker.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerLoad {
    /// A modular report with its broker's long-term msg rate (in + out) from the time average.
    Modular(Box<LocalBrokerData>, f64),
    /// A Simple report.
    Simple(Box<LoadReport>),
}

/// The global table (see the module docs for the kept column quirk).
pub fn global_table(loads: &BTreeMap<String, BrokerLoad>) -> String {
    let mut rows = vec![labels(
        "BROKER",
        &["BUNDLE", "MSG/S", "LONG/S", "KB/S", "MAX %"],
    )];
    let (mut bundles, mut rate, mut long, mut tp, mut max) = (0i64, 0.0, 0.0, 0.0, 0.0f64);
    for (broker, load) in loads {
        let (n, r, l, t, m) = match load {
            BrokerLoad::Modular(d, long_rate) => (
                d.num_bundles as i64,
                d.msg_rate_in + d.msg_rate_out,
                *long_rate,
                (d.msg_throughput_in + d.msg_throughput_out) / 1024.0,
                d.max_resource_usage(),
            ),
            BrokerLoad::Simple(s) => {
                let u = &s.system_resource_usage;
                (
                    s.num_bundles as i64,
                    s.msg_rate_in + s.msg_rate_out,
                    other_f64(s, "allocatedMsgRateIn") + other_f64(s, "allocatedMsgRateOut"),
                    (other_f64(s, "allocatedBandwidthIn") + other_f64(s, "allocatedBandwidthOut"))
                        / 1024.0,
                    raw_max(&[
                        u.cpu,
                        u.memory,
                        u.direct_memory,
                        u.bandwidth_in,
                        u.bandwidth_out,
                    ]),
                )
            }
        };
        rows.push(vec![
            Cell::Text(broker.clone()),
            Cell::Int(n),
            Cell::Double(r),
            Cell::Double(t),
            Cell::Double(l),
            Cell::Double(m),
        ]);
        bundles += n;
        rate += r;
        long += l;
        tp += t;
        max = max.max(m);
    }
    rows.push(vec![
        Cell::from("TOTAL"),
        Cell::Int(bundles),
        Cell::Double(rate),
        Cell::Double(long),
        Cell::Double(tp),
        Cell::Double(max),
    ]);
    TableMaker::global().make(&rows)
}

/// The monitor: state between notifications.
#[derive(Debug)]
pub struct Monitor {
    store: DynStore,
    brokers: BTreeSet<String>,
    loads: BTreeMap<String, BrokerLoad>,
}

impl Monitor {
    /// A monitor reading `store`.
    pub fn new(store: DynStore) -> Self {
        Self {
            store,
            brokers: BTreeSet::new(),
            loads: BTreeMap::new(),
        }
    }

    /// The text printed for one broker node now (a table, or why there is none).
    pub async fn broker_text(&mut self, broker: &str) -> Result<String, Error> {
        let path = paths::broker(broker);
        let Some(found) = self.store.get(&path).await? else {
            return Ok(format!("{path} vanished before it could be read"));
        };
        let text = String::from_utf8_lossy(&found.value);
        if text.contains("allocated") {
            return Ok(match serde_json::from_slice::<LoadReport>(&found.value) {
                Ok(report) => {
                    let table = simple_table(&report);
                    self.loads
                        .insert(broker.to_owned(), BrokerLoad::Simple(Box::new(report)));
                    format!("Load Report for {broker}:\n{table}")
                }
                Err(e) => format!("{path}: not a LoadReport ({e}); skipped"),
            });
        }
        let local = match parse_report(&found.value) {
            Ok(l) => l,
            Err(why) => return Ok(format!("{path}: {why}; skipped")),
        };
        let ta_path = paths::time_average(broker);
        let (ta, note) = match self.store.get_json::<TimeAverageBrokerData>(&ta_path).await {
            Ok(Some((t, _))) => (t, String::new()),
            Ok(None) => (
                TimeAverageBrokerData::default(),
                format!("\n(no {ta_path} yet: SHORT and LONG show 0)"),
            ),
            Err(Error::Content { reason, .. }) => (
                TimeAverageBrokerData::default(),
                format!("\n({ta_path} is malformed ({reason}): SHORT and LONG show 0)"),
            ),
            Err(e) => return Err(e),
        };
        let table = broker_table(&local, &ta);
        self.loads.insert(
            broker.to_owned(),
            BrokerLoad::Modular(Box::new(local), ta.long_term_msg_rate()),
        );
        Ok(format!("Broker Data for {broker}:\n{table}{note}"))
    }

    /// Re-reads the broker list: lines for brokers gained (with their tables) and lost.
    pub async fn update_brokers(&mut self) -> Result<Vec<String>, Error> {
        let now: BTreeSet<String> = self
            .store
            .get_children(paths::BROKERS)
            .await?
            .into_iter()
            .collect();
        let mut out = Vec::new();
        for lost in self.brokers.difference(&now) {
            out.push(format!("Lost broker: {lost}"));
            self.loads.remove(lost);
        }
        let gained: Vec<String> = now.difference(&self.brokers).cloned().collect();
        self.brokers = now;
        for b in gained {
            out.push(format!("Gained broker: {b}"));
            out.push(self.broker_text(&b).await?);
        }
        Ok(out)
    }

    /// The global table over the brokers seen.
    pub fn global_text(&self) -> String {
        format!("Overall Broker Data:\n{}", global_table(&self.loads))
    }

    /// Runs until the store's notifications end, handing every text to `out`; the global table every
    /// `global_period` (60 s in Pulsar).
    pub async fn run(
        mut self,
        global_period: Duration,
        mut out: impl FnMut(String) + Send,
    ) -> Result<(), Error> {
        let mut notifications = self.store.watch(paths::BROKERS).await?;
        for line in self.update_brokers().await? {
            out(line);
        }
        let mut global =
            tokio::time::interval_at(tokio::time::Instant::now() + global_period, global_period);
        loop {
            tokio::select! {
                n = notifications.next() => {
                    let Some(n) = n else { return Ok(()) };
                    if n.path == paths::BROKERS {
                        continue;
                    }
                    let Some(broker) = paths::below(paths::BROKERS, &n.path) else { continue };
                    if broker.contains('/') {
                        continue;
                    }
                    let broker = broker.to_owned();
                    let lines = match n.kind {
                        NotificationType::Created | NotificationType::Deleted => self.update_brokers().await,
                        NotificationType::Modified if self.brokers.contains(&broker) => {
                            self.broker_text(&broker).await.map(|t| vec![t])
                        }
                        _ => Ok(Vec::new()),
                    };
                    match lines {
                        Ok(lines) => lines.into_iter().for_each(&mut out),
                        Err(e) if e.is_transient() => out(format!("store trouble: {e}")),
                        Err(e) => return Err(e),
                    }
                }
                _ = global.tick() => out(self.global_text()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NamespaceBundleStats, SystemResourceUsage};

    /// A per-broker row: 14-wide cells plus one space of padding.
    fn row(cells: &[&str]) -> String {
        let body: Vec<String> = cells.iter().map(|c| format!("{c:<15}")).collect();
        format!("||{}||", body.join("|"))
    }

    /// The start of a global row: 60 + 1 then 12 + 1.
    fn global_row(cells: &[&str]) -> String {
        let mut body = vec![format!("{:<61}", cells[0])];
        body.extend(cells[1..].iter().map(|c| format!("{c:<13}")));
        format!("||{}", body.join("|"))
    }

    #[test]
    fn java_rounding() {
        assert_eq!(format_2f(0.125), "0.13");
        assert_eq!(format_2f(1.005), "1.01");
        assert_eq!(format_2f(2.675), "2.68");
        assert_eq!(format_2f(48.33f32 as f64), "48.33");
        assert_eq!(format_2f(0.0), "0.00");
        assert_eq!(format_2f(99.999), "100.00");
        assert_eq!(format_2f(-1.5), "-1.50");
        assert_eq!(format_2f(1e-7), "0.00");
        assert_eq!(format_2f(12345678.9), "12345678.90");
    }

    /// The modular table of the seed docs, rebuilt from the values it shows.
    #[test]
    fn modular_table_matches_the_docs_layout() {
        let mut d = LocalBrokerData {
            memory: ResourceUsage::new(4833.0, 10000.0),
            direct_memory: ResourceUsage::new(1.0, 10000.0),
            ..Default::default()
        };
        let stats: BTreeMap<String, NamespaceBundleStats> = (0..4)
            .map(|i| {
                (
                    format!("t/n/0x{i:08x}_0x{:08x}", i + 1),
                    NamespaceBundleStats {
                        topics: 1,
                        consumer_count: if i < 2 { 1 } else { 0 },
                        ..Default::default()
                    },
                )
            })
            .collect();
        let usage = SystemResourceUsage {
            memory: d.memory,
            direct_memory: d.direct_memory,
            ..Default::default()
        };
        d.update(&usage, stats);
        let table = broker_table(&d, &TimeAverageBrokerData::default());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 12);
        assert!(lines.iter().all(|l| l.chars().count() == 115), "{table}");
        assert_eq!(lines[0], "=".repeat(115));
        assert_eq!(
            lines[1],
            row(&["SYSTEM", "CPU %", "MEMORY %", "DIRECT %", "BW IN %", "BW OUT %", "MAX %"])
        );
        assert_eq!(
            lines[2],
            row(&["", "0.00", "48.33", "0.01", "0.00", "0.00", "0.01"])
        );
        assert_eq!(lines[4], row(&["", "4", "4", "0", "2", "4", "0"]));
        assert_eq!(
            lines[9],
            row(&[
                "LONG",
                "MSG/S IN",
                "MSG/S OUT",
                "TOTAL",
                "KB/S IN",
                "KB/S OUT",
                "TOTAL"
            ])
        );
        assert!(!table.ends_with('\n'));
    }

    #[test]
    fn simple_and_global_tables() {
        let report: LoadReport = serde_json::from_str(
            r#"{"name":"b1:8080","numTopics":4,"numBundles":4,"numConsumers":2,"underLoaded":true,
                "allocatedCPU":8.0,"allocatedMemory":100.0,"allocatedBandwidthIn":130.0,"allocatedBandwidthOut":330.0,
                "allocatedMsgRateIn":54.84,"allocatedMsgRateOut":134.48,"bundleGains":[],"bundleLosses":[],
                "systemResourceUsage":{"cpu":{"usage":10.0,"limit":4000.0},"memory":{"usage":3927.0,"limit":8192.0},
                "bandwidthIn":{"usage":0.0,"limit":10240.0},"bandwidthOut":{"usage":0.0,"limit":10240.0},
                "directMemory":{"usage":1.0,"limit":16384.0}}}"#,
        )
        .unwrap();
        let table = simple_table(&report);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 12);
        assert!(lines.iter().all(|l| l.chars().count() == 115));
        assert_eq!(
            lines[5],
            row(&[
                "ALLOC SYSTEM",
                "CPU %",
                "MEMORY %",
                "DIRECT %",
                "BW IN %",
                "BW OUT %",
                "MAX %"
            ])
        );
        // The allocated direct-memory cell is null in Java: empty.
        assert_eq!(
            lines[6],
            row(&["", "0.20", "1.22", "", "1.27", "3.22", "3.22"])
        );
        assert!(
            lines[10].starts_with(&row(&["", "54.84", "134.48", "189.32"])[..66]),
            "{}",
            lines[10]
        );

        let mut loads = BTreeMap::new();
        let mut d = LocalBrokerData {
            num_bundles: 3,
            msg_rate_in: 10.0,
            msg_rate_out: 20.0,
            msg_throughput_in: 1024.0,
            msg_throughput_out: 2048.0,
            ..Default::default()
        };
        d.cpu = ResourceUsage::new(50.0, 100.0);
        loads.insert("b2:8080".to_owned(), BrokerLoad::Modular(Box::new(d), 7.5));
        loads.insert("b1:8080".to_owned(), BrokerLoad::Simple(Box::new(report)));
        let table = global_table(&loads);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() == 135), "{table}");
        assert_eq!(lines[0], "*".repeat(135));
        assert!(lines[1].starts_with("||BROKER "));
        // Per-broker rows: throughput (KB/s) under LONG/S, long-term rate under KB/S, max as a fraction.
        assert_eq!(
            lines[3],
            global_row(&["b2:8080", "3", "30.00", "3.00", "7.50", "0.50"]) + "||"
        );
        // TOTAL: in header order.
        assert!(
            lines[4].starts_with(&global_row(&["TOTAL", "7", "30.00", "196.82", "3.45"])),
            "{}",
            lines[4]
        );
    }
}
