//! `loadmgr config check`: the effective load-balancer settings of a broker.conf.

use std::path::PathBuf;

use clap::Subcommand;

use super::CliResult;
use crate::config::Settings;

/// `loadmgr config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective load-balancer settings of a broker.conf as sorted key=value lines.
    #[command(
        after_help = "Warnings (unknown keys, duplicates, strategy pairing) go to stderr; any invalid value exits 1\n\
with the file, line, key, value and what was expected.\n\n\
Example:\n  loadmgr config check conf/broker.conf | grep Shedding\n  loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.AvgShedder"
    )]
    Check {
        /// The broker.conf file.
        file: PathBuf,
    },
}

/// Runs a `config` subcommand.
pub fn run(cmd: ConfigCommand) -> CliResult {
    match cmd {
        ConfigCommand::Check { file } => {
            let loaded = Settings::load(&file)?;
            for warning in &loaded.warnings {
                eprintln!("warning: {warning}");
            }
            for (key, value) in loaded.settings.entries() {
                // A password is never printed, only whether it is set.
                if key.ends_with("Password") && !value.is_empty() {
                    println!("{key}=********");
                } else {
                    println!("{}", crate::config::format_property(key, &value));
                }
            }
            Ok(())
        }
    }
}
