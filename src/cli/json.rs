//! `loadmgr json check`: detect a node's type, validate it against its schema, print it normalised.

use clap::Subcommand;

use super::{read_input, CliError, CliResult};
use crate::model::{parse_json, NodeType};

/// `loadmgr json ...`
#[derive(Debug, Subcommand)]
pub enum JsonCommand {
    /// Validate a stored node's JSON against its schema and print it as loadmgr would write it.
    #[command(
        after_help = "Prints the node type to stderr and the normalised JSON to stdout; exits 1 with the\n\
violations (each with its JSON pointer) when the input is invalid.\n\n\
Examples:\n  zkCli.sh -server 127.0.0.1:2181 get /loadbalance/brokers/broker-1:8080 | tail -n 1 | loadmgr json check -\n  loadmgr json check --type BundleData bundle.json\n\n\
Types: LocalBrokerData, LoadReport, TimeAverageMessageData, BundleData, TimeAverageBrokerData, ResourceQuota,\n\
LeaderBroker, NamespaceEphemeralData, BundlesData, LocalPolicies"
    )]
    Check {
        /// The node type; detected from the keys when omitted.
        #[arg(long = "type", value_name = "TYPE")]
        node_type: Option<NodeType>,
        /// A file, or - for standard input.
        file: String,
    },
}

/// Runs a `json` subcommand.
pub fn run(cmd: JsonCommand) -> CliResult {
    match cmd {
        JsonCommand::Check { node_type, file } => {
            let bytes = read_input(&file)?;
            let (node_type, normalised) =
                check(&bytes, node_type).map_err(|e| CliError::new(format!("{file}: {e}")))?;
            eprintln!("{node_type}");
            println!("{normalised}");
            Ok(())
        }
    }
}

/// Detects (or takes) the type, validates and normalises.
pub fn check(
    bytes: &[u8],
    node_type: Option<NodeType>,
) -> Result<(NodeType, String), crate::model::ModelError> {
    let value = parse_json(bytes)?;
    let node_type = match node_type {
        Some(t) => t,
        None => NodeType::detect(&value)?,
    };
    let normalised = node_type.normalise(value)?;
    Ok((node_type, normalised))
}
