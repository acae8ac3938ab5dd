//! Test support shared by the test suites, the benchmarks and the CLI's end-to-end tests: real ZooKeeper and
//! etcd servers as child processes ([`servers`]), the backend conformance suite ([`conformance`]) and a TCP
//! proxy that cuts the network between a client and a server ([`proxy`]).

pub mod conformance;
pub mod proxy;
pub mod servers;

/// Sends the library's `tracing` output to the test harness's captured output, filtered by the
/// `LOADMGR_LOG` environment variable (off when unset): `LOADMGR_LOG=info cargo test --test runtime --
/// --nocapture` shows what the agents do. Safe to call from every test.
pub fn log_to_test_output() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOADMGR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_test_writer()
        .try_init();
}
