//! loadmgr: a load manager for a cluster of message brokers, compatible with what Apache Pulsar's modular
//! load manager keeps in ZooKeeper.

pub mod bundle;
pub mod config;
pub mod core;
pub mod model;
pub mod sim;
