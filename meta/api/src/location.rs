//! Where a datanode stands: a path of failure domains from the widest down,
//! written `/ZONE/RACK/HOST` as HDFS and Ozone write it (any depth). Meta
//! spreads the block files of a group over the domains of each level, so
//! that losing a host, a rack or a zone loses as few of them as it can.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Most levels a location may have.
pub const MAX_LOCATION_DEPTH: usize = 8;
/// Longest name of one level.
pub const MAX_DOMAIN_NAME: usize = 64;

/// A datanode's place among failure domains, widest first; validated, so
/// every level is a non-empty name of letters, digits and `.`, `_`, `-`, `:`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Location(String);

/// Why a location was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// It does not start with `/`.
    #[error("a location starts with '/', as in /zone/rack/host: {0:?}")]
    NotAbsolute(String),
    /// A level is empty (`//`), or the path names no level at all.
    #[error("a location names each level between single '/': {0:?}")]
    EmptyLevel(String),
    /// A level's name has a character outside the allowed set or is too long.
    #[error(
        "location level {0:?} must be 1 to {MAX_DOMAIN_NAME} letters, digits, '.', '_', '-' or ':'"
    )]
    BadName(String),
    /// More than [`MAX_LOCATION_DEPTH`] levels.
    #[error("a location has at most {MAX_LOCATION_DEPTH} levels: {0:?}")]
    TooDeep(String),
}

fn valid_name(name: &str) -> bool {
    (1..=MAX_DOMAIN_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'))
}

impl Location {
    /// Parses `/ZONE/RACK/HOST` (one trailing `/` is tolerated).
    pub fn parse(text: &str) -> Result<Self, LocationError> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err(LocationError::NotAbsolute(text.into()));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(LocationError::EmptyLevel(text.into()));
        }
        let levels: Vec<&str> = rest.split('/').collect();
        if levels.len() > MAX_LOCATION_DEPTH {
            return Err(LocationError::TooDeep(text.into()));
        }
        for level in &levels {
            if level.is_empty() {
                return Err(LocationError::EmptyLevel(text.into()));
            }
            if !valid_name(level) {
                return Err(LocationError::BadName((*level).into()));
            }
        }
        Ok(Self(format!("/{}", levels.join("/"))))
    }

    /// The location of a datanode given none: its advertised host
    /// (`host:port`, `[v6]:port` or a bare host), one level deep. Characters
    /// a level may not hold become `_`.
    pub fn of_addr(addr: &str) -> Self {
        let host = match addr.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or(bracketed),
            None => match addr.rsplit_once(':') {
                Some((host, _port)) if !host.contains(':') => host,
                _ => addr,
            },
        };
        let mut name: String = host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':') {
                    c
                } else {
                    '_'
                }
            })
            .take(MAX_DOMAIN_NAME)
            .collect();
        if name.is_empty() {
            name.push('_');
        }
        Self(format!("/{name}"))
    }

    /// The levels, widest first.
    pub fn levels(&self) -> impl Iterator<Item = &str> {
        self.0[1..].split('/')
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Location {
    /// Where a record written before locations existed stands until its
    /// datanode's next heartbeat (meta's registry puts it on its host).
    fn default() -> Self {
        Self("/default".into())
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Location {
    type Err = LocationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for Location {
    type Error = LocationError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<Location> for String {
    fn from(location: Location) -> Self {
        location.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_any_depth_parse_and_bad_ones_are_refused() {
        let l = Location::parse("/eu-1/rack-7/host.a").unwrap();
        assert_eq!(l.levels().collect::<Vec<_>>(), ["eu-1", "rack-7", "host.a"]);
        assert_eq!(Location::parse("/h/").unwrap().as_str(), "/h");
        assert!(matches!(
            Location::parse("zone/rack"),
            Err(LocationError::NotAbsolute(_))
        ));
        for empty in ["/", "//", "/a//b", ""] {
            assert!(Location::parse(empty).is_err(), "{empty:?}");
        }
        assert!(matches!(
            Location::parse("/a b"),
            Err(LocationError::BadName(_))
        ));
        assert!(matches!(
            Location::parse(&"/x".repeat(MAX_LOCATION_DEPTH + 1)),
            Err(LocationError::TooDeep(_))
        ));
        let long = format!("/{}", "n".repeat(MAX_DOMAIN_NAME + 1));
        assert!(Location::parse(&long).is_err());
    }

    #[test]
    fn a_datanode_without_one_stands_on_its_host() {
        assert_eq!(Location::of_addr("10.0.0.5:9866").as_str(), "/10.0.0.5");
        assert_eq!(Location::of_addr("[::1]:9866").as_str(), "/::1");
        assert_eq!(Location::of_addr("dn-3:1").as_str(), "/dn-3");
        assert_eq!(Location::of_addr("bare").as_str(), "/bare");
        assert_eq!(Location::of_addr("we ird:1").as_str(), "/we_ird");
        // Always valid, so it survives a round trip through serde.
        let json = serde_json::to_string(&Location::of_addr("[fe80::1%eth0]:1")).unwrap();
        let back: Location = serde_json::from_str(&json).unwrap();
        assert_eq!(back.as_str(), "/fe80::1_eth0");
        assert!(serde_json::from_str::<Location>("\"no-slash\"").is_err());
    }
}
