//! The offline gazetteer: GeoNames' cities15000 (every place with more than 15,000 people; attribution
//! in crates/geo/data/README.md), compiled into the binary and parsed once on first use. A query is
//! `Name`, `Name, CC`, `Name, Country` or `Name, Region, CC` (a region is GeoNames' first-level code:
//! a US state like MO, a canton like GE); names match without case or accents ("Zurich" finds Zürich),
//! and a name that matches nothing exactly may match the start of one ("New York" → New York City).
//! Among several matches the most populous wins, and the choice is stated.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

const CITIES: &str = include_str!("../data/cities15000.tsv");
const COUNTRIES: &str = include_str!("../data/countries.tsv");

/// A place from the GeoNames gazetteer (cities of 15,000 people or more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct City {
    /// The place's name, as GeoNames spells it.
    pub name: String,
    /// ISO 3166 alpha-2.
    pub country: String,
    /// The country's name in English.
    pub country_name: String,
    /// GeoNames' first-level administrative code (a US state, ...), possibly empty.
    pub admin1: String,
    /// Inhabitants, as GeoNames counts them.
    pub population: u64,
    /// Degrees north (WGS84).
    pub latitude: f64,
    /// Degrees east (WGS84).
    pub longitude: f64,
    /// GeoNames' id of the place.
    pub geonameid: u64,
}

/// The place a query named, and why it was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolved {
    /// The place taken: the most populous match.
    pub city: City,
    /// How many other places the query matched.
    pub alternatives: u32,
    /// Why this one, in words.
    pub choice: String,
}

/// Why a path or a place could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeoError {
    /// No place matches the query.
    #[error("no city '{query}' in the gazetteer (GeoNames, places over 15,000 people){hint}; give its coordinates as lat,lon instead")]
    Unknown {
        /// The query as written.
        query: String,
        /// What was near it, or empty.
        hint: String,
    },
    /// Fewer than two points.
    #[error("'{0}' is not a path: write at least two points as 'City, CC > City, CC' (or lat,lon)")]
    Path(String),
    /// A leg length given for a leg the path does not have.
    #[error("leg {index} does not exist: the path has {legs} legs")]
    Leg {
        /// The leg named (from 1).
        index: usize,
        /// The legs the path has.
        legs: usize,
    },
}

struct Entry {
    key: String,
    city: City,
}

/// Lower case, compatibility-decomposed, accents dropped.
pub fn fold(s: &str) -> String {
    s.nfkd()
        .filter(|c| !is_combining_mark(*c))
        .collect::<String>()
        .to_lowercase()
}

fn countries() -> &'static Vec<(String, String)> {
    static C: OnceLock<Vec<(String, String)>> = OnceLock::new();
    C.get_or_init(|| {
        COUNTRIES
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('\t'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    })
}

fn entries() -> &'static Vec<Entry> {
    static E: OnceLock<Vec<Entry>> = OnceLock::new();
    E.get_or_init(|| {
        CITIES
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                if f.len() != 7 {
                    return None;
                }
                let country_name = countries()
                    .iter()
                    .find(|c| c.0 == f[1])
                    .map_or_else(|| f[1].to_string(), |c| c.1.clone());
                Some(Entry {
                    key: fold(f[0]),
                    city: City {
                        name: f[0].into(),
                        country: f[1].into(),
                        country_name,
                        admin1: f[2].into(),
                        population: f[3].parse().ok()?,
                        latitude: f[4].parse().ok()?,
                        longitude: f[5].parse().ok()?,
                        geonameid: f[6].parse().ok()?,
                    },
                })
            })
            .collect()
    })
}

/// Number of cities in the gazetteer.
pub fn size() -> usize {
    entries().len()
}

/// The ISO code a qualifier names as a country, if it does.
fn as_country(q: &str) -> Option<String> {
    let f = fold(q);
    countries()
        .iter()
        .find(|(iso, name)| iso.eq_ignore_ascii_case(q) || fold(name) == f)
        .map(|c| c.0.clone())
        .or_else(|| {
            matches!(f.as_str(), "usa" | "u.s." | "u.s.a." | "united states of america").then(|| "US".into())
        })
        .or_else(|| matches!(f.as_str(), "uk" | "great britain" | "england").then(|| "GB".into()))
}

fn by_country<'a>(f: &[&'a City], q: &str) -> Vec<&'a City> {
    as_country(q).map_or_else(Vec::new, |cc| {
        f.iter().copied().filter(|c| c.country == cc).collect()
    })
}

fn by_region<'a>(f: &[&'a City], q: &str) -> Vec<&'a City> {
    f.iter()
        .copied()
        .filter(|c| c.admin1.eq_ignore_ascii_case(q))
        .collect()
}

/// The place a query names ("City[, region][, country]"): the most populous match, with why it was
/// chosen and how many others there were.
pub fn resolve(query: &str) -> Result<Resolved, GeoError> {
    let parts: Vec<&str> = query
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let unknown = |hint: String| GeoError::Unknown {
        query: query.to_string(),
        hint,
    };
    let Some(name) = parts.first() else {
        return Err(unknown(String::new()));
    };
    let key = fold(name);
    let (mut found, how) = named(&key, name);
    let n = parts.len();
    for (k, q) in parts.iter().enumerate().skip(1) {
        let before = found.len();
        found = qualified(&found, q, k == n - 1);
        if found.is_empty() {
            return Err(unknown(format!(
                " ({before} place(s) named '{name}', none in '{q}')"
            )));
        }
    }
    if found.is_empty() {
        return Err(unknown(similar(&key)));
    }
    found.sort_by_key(|c| std::cmp::Reverse(c.population));
    let city = found[0].clone();
    let others = found.len() - 1;
    let choice = choice_text(&city, &found, &how);
    Ok(Resolved {
        city,
        alternatives: others as u32,
        choice,
    })
}

/// The places named `key` exactly, else those whose name starts with it (and a note saying so).
fn named(key: &str, name: &str) -> (Vec<&'static City>, String) {
    let exact: Vec<&City> = entries()
        .iter()
        .filter(|e| e.key == key)
        .map(|e| &e.city)
        .collect();
    if !exact.is_empty() {
        return (exact, String::new());
    }
    let prefix = format!("{key} ");
    let found = entries()
        .iter()
        .filter(|e| e.key.starts_with(&prefix))
        .map(|e| &e.city)
        .collect();
    let how = format!(" (no place is named exactly '{name}'; taken as the start of a name)");
    (found, how)
}

/// The places in `q`. The last qualifier is a country before a region, the others a region before a
/// country ("MO" is both Missouri and Macao): whichever reading leaves a match.
fn qualified<'a>(found: &[&'a City], q: &str, last: bool) -> Vec<&'a City> {
    let (first, second) = if last {
        (by_country(found, q), by_region(found, q))
    } else {
        (by_region(found, q), by_country(found, q))
    };
    if first.is_empty() {
        second
    } else {
        first
    }
}

/// A hint with up to five names that start like the query's.
fn similar(key: &str) -> String {
    let near: Vec<&str> = entries()
        .iter()
        .filter(|e| e.key.starts_with(&key.chars().take(4).collect::<String>()))
        .map(|e| e.city.name.as_str())
        .take(5)
        .collect();
    if near.is_empty() {
        String::new()
    } else {
        format!(" (similar: {})", near.join(", "))
    }
}

/// Why `city` was taken among the matches `found` (most populous first).
fn choice_text(city: &City, found: &[&City], how: &str) -> String {
    let region = if city.admin1.is_empty() {
        String::new()
    } else {
        format!("{}, ", city.admin1)
    };
    let place = format!(
        "{}, {region}{} ({}), population {}",
        city.name, city.country, city.country_name, city.population
    );
    match found.get(1) {
        None => format!("{place}: the only match{how}"),
        Some(next) => format!(
            "{place}: the most populous of {} matches (next: {}, {}){how}",
            found.len(),
            next.admin1,
            next.country
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_extract_is_there() {
        assert_eq!(size(), 34_006);
    }

    #[test]
    fn names_countries_regions_and_population() {
        let g = resolve("Geneva").unwrap();
        assert_eq!((g.city.country.as_str(), g.alternatives), ("CH", 1));
        assert!(g.choice.contains("most populous of 2"), "{}", g.choice);
        let g = resolve("Geneva, US").unwrap();
        assert_eq!(g.city.admin1, "IL");
        assert_eq!(resolve("Geneva, Switzerland").unwrap().city.country, "CH");
        // Kansas City: Missouri's is the larger; Kansas's by its state code.
        assert_eq!(resolve("Kansas City, US").unwrap().city.admin1, "MO");
        assert_eq!(resolve("Kansas City, KS, US").unwrap().city.admin1, "KS");
        // MO is Missouri here, not Macao.
        assert_eq!(resolve("Kansas City, MO, US").unwrap().city.admin1, "MO");
        assert_eq!(resolve("Kansas City, MO").unwrap().city.country, "US");
        // Los Angeles, Spain, exists; the US one is chosen by population, or by country.
        assert_eq!(resolve("los angeles").unwrap().city.country, "US");
        assert_eq!(resolve("Los Angeles, ES").unwrap().city.population, 34_827);
        assert_eq!(resolve("Zurich, CH").unwrap().city.name, "Zürich");
        assert_eq!(resolve("New York, USA").unwrap().city.name, "New York City");
        assert!(resolve("Geneva, JP").is_err());
        let e = resolve("Qwxyzville").unwrap_err().to_string();
        assert!(e.contains("lat,lon"), "{e}");
    }
}
