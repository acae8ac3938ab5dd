//! `loadmgr health`: asks a broker's web service whether it is healthy (`/admin/v2/brokers/health`) or ready
//! (`--ready`: `/admin/v2/brokers/ready`); exit status 0 when it answers `ok`, 1 with the reason otherwise.
//! Small and quick enough for a container's health check (`docker/docker-compose.yml` uses it).

use std::time::Duration;

use reqwest::Method;

use super::rest::{Rest, RestArgs};
use super::CliResult;

/// Flags of `loadmgr health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The broker's web service and how to reach it.
    #[command(flatten)]
    pub rest: RestArgs,
    /// Ask whether the broker is ready (registered with a connected store) rather than healthy (also a valid
    /// session and an elected leader).
    #[arg(long)]
    pub ready: bool,
    /// How long to wait for the answer, ms.
    #[arg(long, default_value_t = 3_000)]
    pub timeout_ms: u64,
}

/// Runs the command.
pub fn run(args: HealthArgs) -> CliResult {
    let rest = Rest::new(&args.rest, Duration::from_millis(args.timeout_ms))?;
    let path = if args.ready {
        "/admin/v2/brokers/ready"
    } else {
        "/admin/v2/brokers/health"
    };
    super::block_on(async move {
        let (_, body) = rest.send(Method::GET, path, None).await?;
        println!("{}", String::from_utf8_lossy(&body).trim());
        Ok(())
    })
}
