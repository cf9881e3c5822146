//! Object ids in Materialize's textual form: `u1` for user objects, `s1` for
//! builtin (system) objects; clusters `u1`/`s1` and replicas `u1`/`s1` too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The id of a catalog item (table, source, sink, connection, secret, view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GlobalId {
    /// A builtin relation such as `mz_catalog.mz_sinks`.
    System(u64),
    /// An object a user created.
    User(u64),
}

impl fmt::Display for GlobalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalId::System(n) => write!(f, "s{n}"),
            GlobalId::User(n) => write!(f, "u{n}"),
        }
    }
}

/// The error of parsing an id that is not `u<n>` or `s<n>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid id: {0}")]
pub struct InvalidId(pub String);

fn parse_prefixed(s: &str) -> Result<(char, u64), InvalidId> {
    let mut chars = s.chars();
    let prefix = chars.next().ok_or_else(|| InvalidId(s.into()))?;
    let number = chars
        .as_str()
        .parse::<u64>()
        .map_err(|_| InvalidId(s.into()))?;
    Ok((prefix, number))
}

impl FromStr for GlobalId {
    type Err = InvalidId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match parse_prefixed(s)? {
            ('u', n) => Ok(GlobalId::User(n)),
            ('s', n) => Ok(GlobalId::System(n)),
            _ => Err(InvalidId(s.into())),
        }
    }
}

macro_rules! prefixed_id {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        pub enum $name {
            System(u64),
            User(u64),
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $name::System(n) => write!(f, "s{n}"),
                    $name::User(n) => write!(f, "u{n}"),
                }
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match parse_prefixed(s)? {
                    ('u', n) => Ok($name::User(n)),
                    ('s', n) => Ok($name::System(n)),
                    _ => Err(InvalidId(s.into())),
                }
            }
        }
    };
}

prefixed_id!(ClusterId, "The id of a cluster.");
prefixed_id!(ReplicaId, "The id of a cluster replica.");
prefixed_id!(RoleId, "The id of a role.");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text() {
        for text in ["u1", "s42", "u18446744073709551615"] {
            assert_eq!(text.parse::<GlobalId>().unwrap().to_string(), text);
            assert_eq!(text.parse::<ClusterId>().unwrap().to_string(), text);
        }
        for bad in ["", "u", "x1", "u-1", "uabc"] {
            assert!(bad.parse::<GlobalId>().is_err(), "{bad}");
        }
    }
}
