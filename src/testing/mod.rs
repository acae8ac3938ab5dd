//! Test support shared by the test suites, the benchmarks and the CLI's end-to-end tests: real ZooKeeper and
//! etcd servers as child processes ([`servers`]), the backend conformance suite ([`conformance`]) and a TCP
//! proxy that cuts the network between a client and a server ([`proxy`]).

pub mod conformance;
pub mod proxy;
pub mod servers;
