use clap::{Parser, Subcommand};

mod cli;

/// loadmgr: a load manager for message-broker clusters, compatible with Apache Pulsar's modular load manager.
#[derive(Debug, Parser)]
#[command(name = "loadmgr", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run shedding, placement and split selection over a load-data snapshot and print the plan with reasons.
    Explain(cli::explain::ExplainArgs),
    /// Replay scenarios (or a snapshot of a live cluster) through the decision core in virtual time, compare
    /// shedding strategies and report metrics, tables and charts.
    Simulate(cli::simulate::SimulateArgs),
}

fn main() {
    let result = match Cli::parse().command {
        Command::Explain(args) => cli::explain::run(&args),
        Command::Simulate(args) => cli::simulate::run(&args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
