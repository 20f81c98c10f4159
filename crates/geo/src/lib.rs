//! Where a record's path runs and how long it is: an offline gazetteer of the world's cities (GeoNames'
//! cities15000, compiled in, so a record document needs no network) that resolves "Geneva, CH" or
//! "Kansas City, MO, US" to coordinates, choosing by country, region and population and saying so; and
//! geodesic distances on the WGS84 ellipsoid by Karney's method (geographiclib-rs), which the Land
//! Speed Record counts leg by leg.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod gazetteer;
pub mod geodesy;

pub use gazetteer::{City, GeoError, Resolved};
pub use geodesy::{geodesic_km, parse_path, Leg, PathPoint, RecordPath};
