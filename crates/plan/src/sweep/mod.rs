//! Campaigns like SLAC's IEPM bulk-throughput pages, without I/O: the plan of a windows × streams grid
//! and its order, the statistics of repeated runs in one (window, streams) cell, the straight line
//! through the origin that throughput follows while the window limits it, and which cell is best. The
//! sweep driver, the archive and the plots build on these.

pub mod fit;
pub mod plan;
pub mod stats;
pub mod summary;

pub use fit::{best_cells, window_fit, BestCells, WindowFit};
pub use plan::{
    parse_streams, parse_windows, CellClient, CellIntent, CellKey, CellSpec, Order, PlanError, SweepPlan,
    PLAN_VERSION,
};
pub use stats::CellStats;
pub use summary::{summarize, CellSummary, DirectionSummary, RunFigures, SweepReport, SweepSummary};
