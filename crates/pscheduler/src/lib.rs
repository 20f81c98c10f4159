//! landspeed as a perfSONAR pScheduler tool for the throughput test. pScheduler runs a tool as six
//! executables (`enumerate`, `can-run`, `duration`, `participant-data`, `run`, `merged-results`), each
//! reading JSON on stdin and writing JSON on stdout; contrib/pscheduler installs them as one-line
//! wrappers around `landspeed pscheduler METHOD`. This crate holds everything about them that needs
//! no I/O: the spec mapped onto landspeed's options or refused with reasons (`spec`), the methods'
//! answers and `run`'s plan (`methods`), and landspeed's result in the throughput result format
//! (`result`). docs/pscheduler.md describes the mapping.

#![warn(missing_docs)]

pub mod methods;
pub mod result;
pub mod spec;
