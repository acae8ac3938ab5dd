//! loadmgr: a load manager for a cluster of message brokers, compatible with what Apache Pulsar's modular
//! load manager keeps in ZooKeeper.
#![warn(missing_docs)]

pub mod bundle;
pub mod cli;
pub mod config;
pub mod coordination;
pub mod core;
pub mod model;
pub mod paths;
pub mod routing;
pub mod runtime;
pub mod sim;
pub mod store;
pub mod testing;
