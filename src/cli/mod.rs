//! Subcommands: one file each; they parse flags and call the library.

pub mod explain;
pub mod simulate;
