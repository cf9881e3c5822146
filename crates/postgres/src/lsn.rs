//! Log sequence numbers: positions in the upstream write-ahead log.

use std::fmt;
use std::str::FromStr;

/// A position in the WAL, printed as Postgres prints it (`16/B374D848`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl FromStr for Lsn {
    type Err = String;

    fn from_str(s: &str) -> Result<Lsn, String> {
        let invalid = || format!("invalid LSN: {s}");
        let (high, low) = s.split_once('/').ok_or_else(invalid)?;
        let high = u32::from_str_radix(high, 16).map_err(|_| invalid())?;
        let low = u32::from_str_radix(low, 16).map_err(|_| invalid())?;
        Ok(Lsn((u64::from(high) << 32) | u64::from(low)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_and_parses_like_postgres() {
        let lsn: Lsn = "16/B374D848".parse().unwrap();
        assert_eq!(lsn.0, 0x16_B374_D848);
        assert_eq!(lsn.to_string(), "16/B374D848");
        assert_eq!(Lsn(0).to_string(), "0/0");
        assert!("16B374D848".parse::<Lsn>().is_err());
        assert!("1/G".parse::<Lsn>().is_err());
    }
}
