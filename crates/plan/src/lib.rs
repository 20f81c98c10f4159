//! Plans for many tests toward one question, and what their results add up to: a sweep's grid of
//! windows × streams (cells, order, the typed cell specification the archive stores, statistics,
//! the window fit and best cells) and a mesh's tests between hosts (planning, clock offsets, the
//! combined report). Pure data and arithmetic like `landspeed-core`, which it builds on; a crate of
//! its own because a plan is about many runs, where core is about one. The runners that carry plans
//! out are in `landspeed-campaign`.
#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod mesh;
pub mod sweep;
