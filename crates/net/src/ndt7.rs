//! M-Lab's ndt7 speed test over real connections, both ends: the client (`client`, `landspeed
//! ndt7`) and the server (`server`, `serve --ndt7`) with its frame reader and measurement records.

pub(crate) mod client;
pub(crate) mod server;
