//! `loadmgr bundles`: initial boundaries, topic → bundle lookup and bundle splits.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{read_input, CliError, CliResult};
use crate::bundle::{
    parse_hash, split_bundle, topic_hash, BundleRange, NamespaceBundles, SplitAlgorithm,
    SplitInput, SplitOutcome, TopicName, TopicTraffic,
};
use crate::config::Settings;
use crate::model::json::to_json_string;

/// `loadmgr bundles ...`
#[derive(Debug, Subcommand)]
pub enum BundlesCommand {
    /// Print the BundlesData JSON of a namespace created with N bundles.
    #[command(
        after_help = "Example:\n  loadmgr bundles boundaries 4\n  {\"boundaries\":[\"0x00000000\",\"0x40000000\",\"0x80000000\",\"0xc0000000\",\"0xffffffff\"],\"numBundles\":4}"
    )]
    Boundaries {
        /// Number of bundles (at least 1).
        count: u64,
    },
    /// Print the bundle of each topic, one tab-separated line each: TOPIC, RANGE, 0xHASH (TOPIC as Pulsar
    /// hashes it).
    #[command(
        after_help = "Example:\n  loadmgr bundles lookup --count 4 persistent://public/default/my-topic\n  persistent://public/default/my-topic\t0x00000000_0x40000000\t0x2bad45f7"
    )]
    Lookup(LookupArgs),
    /// Print the child ranges of a bundle split, one per line.
    #[command(
        after_help = "Examples:\n  loadmgr bundles split 0x00000000_0xffffffff --algorithm range_equally_divide\n  0x00000000_0x7fffffff\n  0x7fffffff_0xffffffff\n\n  loadmgr bundles split 0x00000000_0x40000000 --algorithm topic_count_equally_divide \\\n      --topic t/ns/a --topic t/ns/b --topic t/ns/c\n\nWhen the algorithm decides not to split, the range itself is printed and the reason goes to stderr.\nA --topic-stats FILE is JSON: {\"persistent://t/ns/a\": {\"msgRate\": 1200.0, \"throughput\": 1048576.0}, ...}\n(msgRate = msg/s in + out, throughput = bytes/s in + out); its topics count as --topic too."
    )]
    Split(SplitArgs),
}

/// Arguments of `bundles lookup`.
#[derive(Debug, Args)]
pub struct LookupArgs {
    /// Number of bundles of the namespace (boundaries as created by Pulsar).
    #[arg(long)]
    count: u64,
    /// Topics: full names, `tenant/ns/topic`, or bare names (in public/default).
    #[arg(required = true)]
    topics: Vec<String>,
}

/// Arguments of `bundles split`.
#[derive(Debug, Args)]
pub struct SplitArgs {
    /// The bundle's range, 0xLLLLLLLL_0xUUUUUUUU.
    range: String,
    /// range_equally_divide, topic_count_equally_divide, specified_positions_divide or flow_or_qps_equally_divide.
    #[arg(long)]
    algorithm: String,
    /// A topic served in the bundle (repeatable).
    #[arg(long = "topic")]
    topics: Vec<String>,
    /// A split position for specified_positions_divide, e.g. 0x20000000 (repeatable).
    #[arg(long = "position")]
    positions: Vec<String>,
    /// JSON file mapping topic → {"msgRate", "throughput"} for flow_or_qps_equally_divide.
    #[arg(long)]
    topic_stats: Option<String>,
    /// broker.conf for the flow_or_qps thresholds (loadBalancerNamespaceBundleMaxMsgRate, ...MaxBandwidthMbytes,
    /// flowOrQpsDifferenceThresholdPercentage); defaults otherwise.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Runs a `bundles` subcommand.
pub fn run(cmd: BundlesCommand) -> CliResult {
    match cmd {
        BundlesCommand::Boundaries { count } => {
            let bundles = NamespaceBundles::initial(count)?;
            println!("{}", to_json_string(&bundles.to_bundles_data()));
            Ok(())
        }
        BundlesCommand::Lookup(args) => {
            let bundles = NamespaceBundles::initial(args.count)?;
            for line in lookup_lines(&bundles, &args.topics)? {
                println!("{line}");
            }
            Ok(())
        }
        BundlesCommand::Split(args) => {
            let range = BundleRange::parse(&args.range)?;
            let (outcome, children) = split(&args)?;
            if let SplitOutcome::NoSplit(reason) = &outcome {
                eprintln!("no split: {reason}");
            }
            debug_assert_eq!(
                children.first().map(BundleRange::lower),
                Some(range.lower())
            );
            for child in children {
                println!("{child}");
            }
            Ok(())
        }
    }
}

/// `TOPIC<TAB>RANGE<TAB>0xHASH` per topic.
pub fn lookup_lines(
    bundles: &NamespaceBundles,
    topics: &[String],
) -> Result<Vec<String>, CliError> {
    topics
        .iter()
        .map(|t| {
            let topic = TopicName::parse(t)?;
            let hash = topic_hash(&topic);
            Ok(format!(
                "{}\t{}\t0x{hash:08x}",
                topic.full_name(),
                bundles.find(hash)
            ))
        })
        .collect()
}

fn split(args: &SplitArgs) -> Result<(SplitOutcome, Vec<BundleRange>), CliError> {
    let range = BundleRange::parse(&args.range)?;
    let algorithm: SplitAlgorithm = args.algorithm.parse()?;
    let settings = match &args.config {
        Some(path) => {
            let loaded = Settings::load(path)?;
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            loaded.settings
        }
        None => Settings::default(),
    };
    let mut traffic = BTreeMap::new();
    let mut topic_texts = args.topics.clone();
    if let Some(file) = &args.topic_stats {
        let bytes = read_input(file)?;
        let raw: BTreeMap<String, TopicTraffic> = serde_json::from_slice(&bytes).map_err(|e| {
            CliError::new(format!(
                "{file}: {e} (expected {{\"<topic>\": {{\"msgRate\": <msg/s>, \"throughput\": <bytes/s>}}, ...}})"
            ))
        })?;
        for (name, stats) in raw {
            let topic =
                TopicName::parse(&name).map_err(|e| CliError::new(format!("{file}: {e}")))?;
            if !topic_texts
                .iter()
                .any(|t| TopicName::parse(t).is_ok_and(|p| p == topic))
            {
                topic_texts.push(name);
            }
            traffic.insert(topic.full_name().to_owned(), stats);
        }
    }
    let topics = topic_texts
        .iter()
        .map(|t| TopicName::parse(t))
        .collect::<Result<Vec<_>, _>>()?;
    let positions = args
        .positions
        .iter()
        .map(|p| parse_hash(p))
        .collect::<Result<Vec<_>, _>>()?;
    let input = SplitInput {
        topics,
        positions,
        traffic,
        ..crate::core::split::split_input(&settings)
    };
    let outcome = split_bundle(range, algorithm, &input)?;
    let children = outcome.children(range);
    Ok((outcome, children))
}
