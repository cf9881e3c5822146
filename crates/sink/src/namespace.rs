//! Iceberg namespace identifiers.

use std::fmt;

use crate::error::{ErrorKind, SinkError};

/// A namespace: one or more non-empty levels. Written with dots between levels (`a.b`), the
/// way the SQL catalog stores namespaces and the way `NAMESPACE 'a.b'` names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    levels: Vec<String>,
}

impl Namespace {
    /// A namespace from its levels.
    pub fn new(levels: Vec<String>) -> Result<Namespace, SinkError> {
        if levels.is_empty() || levels.iter().any(|level| level.is_empty()) {
            return Err(SinkError::new(
                ErrorKind::InvalidConfig,
                format!("invalid Iceberg namespace {:?}", levels.join(".")),
            ));
        }
        Ok(Namespace { levels })
    }

    /// Splits `a.b` at the dots.
    pub fn parse(dotted: &str) -> Result<Namespace, SinkError> {
        Namespace::new(dotted.split('.').map(str::to_string).collect())
    }

    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// The REST path segment: levels joined by the unit separator (0x1F), as the Iceberg
    /// REST specification says, before percent-encoding.
    pub(crate) fn rest_segment(&self) -> String {
        self.levels.join("\u{1f}")
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.levels.join("."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_splits_levels() {
        let ns = Namespace::parse("a.b").unwrap();
        assert_eq!(ns.levels(), ["a", "b"]);
        assert_eq!(ns.to_string(), "a.b");
        assert_eq!(ns.rest_segment(), "a\u{1f}b");
    }

    #[test]
    fn empty_levels_are_refused() {
        for bad in ["", "a.", ".a", "a..b"] {
            let err = Namespace::parse(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidConfig, "{bad}");
        }
    }
}
