//! Campaigns: many tests run toward one question, each stored or reported the moment it ends. A
//! windows × streams sweep ([`sweep`]), a mesh of third-party tests between many hosts ([`mesh`]) and
//! sending every file of a directory ([`directory`]) live here as library code rather than in the
//! binary or the drivers: they take validated tests and report to an observer through typed events,
//! so the command line only draws progress, and the sweep and directory runners take the function that
//! runs one test, so they are tested in memory with a fake test and a scratch archive.
#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod directory;
pub mod mesh;
pub mod sweep;
