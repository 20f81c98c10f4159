//! Geodesics and record paths. A path is written `A > B > C`, each point a city the gazetteer resolves
//! or `lat,lon`; its legs are WGS84 geodesics (Karney), each of which may be overridden with a length in
//! km (the seeds used their own leg values), and the total may be capped (later records counted at most
//! 30,000 km).

use crate::gazetteer::{resolve, City, GeoError};
use geographiclib_rs::{Geodesic, InverseGeodesic};
use serde::{Deserialize, Serialize};

/// Geodesic distance between two points on the WGS84 ellipsoid, km.
pub fn geodesic_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let s12: f64 = Geodesic::wgs84().inverse(lat1, lon1, lat2, lon2);
    s12 / 1000.0
}

/// One point of a record's path, as written and as resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathPoint {
    /// As written.
    pub query: String,
    /// Degrees north (WGS84).
    pub latitude: f64,
    /// Degrees east (WGS84).
    pub longitude: f64,
    /// The city chosen, when the point was a name.
    pub city: Option<City>,
    /// Other cities the name matched (how the choice was made is in `choice`).
    pub alternatives: u32,
    /// Why this place was taken, in words (or "coordinates as given").
    pub choice: String,
}

/// One leg of the path, between two consecutive points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leg {
    /// The leg's first point, as written.
    pub from: String,
    /// The leg's last point, as written.
    pub to: String,
    /// The geodesic between the two points on the WGS84 ellipsoid, km.
    pub geodesic_km: f64,
    /// The length given instead (--leg-km), if any.
    pub override_km: Option<f64>,
    /// What is counted: the override, else the geodesic.
    pub km: f64,
}

/// A record's path: its points, legs and length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordPath {
    /// The points in order.
    pub points: Vec<PathPoint>,
    /// The legs between consecutive points.
    pub legs: Vec<Leg>,
    /// Every leg's counted length added up, km.
    pub total_km: f64,
    /// The cap in force, and the distance counted under it.
    pub cap_km: Option<f64>,
    /// The distance the record counts: the total, or the cap when the total exceeds it, km.
    pub counted_km: f64,
}

fn coordinates(q: &str) -> Option<(f64, f64)> {
    let (a, b) = q.split_once(',')?;
    let lat: f64 = a.trim().parse().ok()?;
    let lon: f64 = b.trim().parse().ok()?;
    ((-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon)).then_some((lat, lon))
}

fn point(q: &str) -> Result<PathPoint, GeoError> {
    let q = q.trim();
    if let Some((lat, lon)) = coordinates(q) {
        return Ok(PathPoint {
            query: q.into(),
            latitude: lat,
            longitude: lon,
            city: None,
            alternatives: 0,
            choice: "coordinates as given".into(),
        });
    }
    let r = resolve(q)?;
    Ok(PathPoint {
        query: q.into(),
        latitude: r.city.latitude,
        longitude: r.city.longitude,
        alternatives: r.alternatives,
        choice: r.choice,
        city: Some(r.city),
    })
}

/// Parses `A > B > ...`; `overrides` are (leg index from 0, km); `cap_km` limits the counted total.
pub fn parse_path(
    spec: &str,
    overrides: &[(usize, f64)],
    cap_km: Option<f64>,
) -> Result<RecordPath, GeoError> {
    let points = spec.split('>').map(point).collect::<Result<Vec<_>, _>>()?;
    if points.len() < 2 {
        return Err(GeoError::Path(spec.to_string()));
    }
    if let Some((i, _)) = overrides.iter().find(|(i, _)| *i + 1 >= points.len()) {
        return Err(GeoError::Leg {
            index: i + 1,
            legs: points.len() - 1,
        });
    }
    let legs: Vec<Leg> = points
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let g = geodesic_km(w[0].latitude, w[0].longitude, w[1].latitude, w[1].longitude);
            let o = overrides.iter().find(|(k, _)| *k == i).map(|(_, km)| *km);
            Leg {
                from: w[0].query.clone(),
                to: w[1].query.clone(),
                geodesic_km: g,
                override_km: o,
                km: o.unwrap_or(g),
            }
        })
        .collect();
    let total_km = legs.iter().map(|l| l.km).sum();
    Ok(RecordPath {
        counted_km: cap_km.map_or(total_km, |c| total_km.min(c)),
        cap_km,
        total_km,
        points,
        legs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geographiclib_published_values() {
        // GeodSolve's tests (Karney): JFK to CDG, and along the equator to near-antipodal points.
        for (lat1, lon1, lat2, lon2, m) in [
            (40.6, -73.8, 49.01666667, 2.55, 5_853_226.0),
            (0.0, 0.0, 0.0, 179.0, 19_926_189.0),
            (0.0, 0.0, 0.0, 179.5, 19_980_862.0),
            (0.0, 0.0, 0.0, 180.0, 20_003_931.0),
            (0.0, 0.0, 1.0, 180.0, 19_893_357.0),
        ] {
            let km = geodesic_km(lat1, lon1, lat2, lon2);
            assert!(
                (km * 1000.0 - m).abs() <= 0.5,
                "{lat1},{lon1} → {lat2},{lon2}: {km} km"
            );
        }
    }

    #[test]
    fn well_known_city_pairs_within_half_a_percent() {
        for (a, b, km) in [
            ("London, GB", "New York City, US", 5570.0),
            ("Paris, FR", "Berlin, DE", 878.0),
            ("Los Angeles, US", "New York City, US", 3944.0),
            ("Sydney, AU", "London, GB", 16_994.0),
            ("Tokyo, JP", "San Francisco, US", 8_277.0),
        ] {
            let p = parse_path(&format!("{a} > {b}"), &[], None).unwrap();
            let d = p.total_km;
            assert!(
                (d - km).abs() <= 0.005 * km,
                "{a} – {b}: {d:.1} km, published {km}"
            );
        }
    }

    #[test]
    fn legs_overrides_coordinates_and_the_cap() {
        let p = parse_path(
            "Sunnyvale, US > 39.1,-94.58 > Geneva, CH",
            &[(1, 7000.0)],
            Some(8000.0),
        )
        .unwrap();
        assert_eq!(p.legs.len(), 2);
        assert_eq!(p.points[1].choice, "coordinates as given");
        // Sunnyvale–Kansas City: the seed's 2,403 km within 1%.
        assert!((p.legs[0].km - 2403.0).abs() < 24.0, "{}", p.legs[0].km);
        assert_eq!(p.legs[1].override_km, Some(7000.0));
        assert_eq!(p.legs[1].km, 7000.0);
        assert!(p.legs[1].geodesic_km > 7000.0);
        assert!((p.total_km - (p.legs[0].km + 7000.0)).abs() < 1e-9);
        assert_eq!(p.counted_km, 8000.0);
        assert!(parse_path("Geneva, CH", &[], None).is_err());
        assert!(parse_path("Geneva, CH > Sunnyvale, US", &[(1, 5.0)], None).is_err());
        assert!(parse_path("Geneva, CH > Nowhere-at-all, ZZ", &[], None).is_err());
    }
}
