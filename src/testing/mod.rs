//! Test support shared by the test suites, the benchmarks and the CLI's end-to-end tests: real ZooKeeper and
//! etcd servers as child processes ([`servers`]) and the backend conformance suite ([`conformance`]).

pub mod conformance;
pub mod servers;
