//! The maintenance options of an Iceberg sink: `SNAPSHOT RETENTION` and `TARGET FILE
//! SIZE`, read from `CREATE SINK ... WITH (...)` and `ALTER SINK ... SET | RESET (...)`,
//! and written back into the sink's `create_sql` as given.

use std::time::Duration;

use floe_repr::SqlState;
use floe_sql_parser::ast::{OptionName, OptionValue, SqlOption};
use floe_sql_parser::options::SinkWithOptionName;

use crate::catalog::{SinkDefinition, SnapshotRetention};
use crate::error::PlanError;
use crate::interval::{format_duration, parse_duration};
use crate::options::SinkWithOptions;

/// The shortest `SNAPSHOT RETENTION`: snapshots younger than this stay for readers that
/// started on them.
pub const MIN_SNAPSHOT_RETENTION: Duration = Duration::from_secs(10);

/// The maintenance settings an option list writes; `None` where it does not name one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceOptions {
    pub snapshot_retention: Option<SnapshotRetention>,
    pub target_file_size: Option<u64>,
}

impl MaintenanceOptions {
    /// Reads the maintenance options of a sink's WITH list.
    pub fn from_with_options(options: &SinkWithOptions) -> Result<MaintenanceOptions, PlanError> {
        Ok(MaintenanceOptions {
            snapshot_retention: options
                .snapshot_retention
                .as_deref()
                .map(snapshot_retention)
                .transpose()?,
            target_file_size: options
                .target_file_size
                .as_deref()
                .map(target_file_size)
                .transpose()?,
        })
    }

    /// `definition` with the options this list names.
    pub fn apply_to(&self, definition: &mut SinkDefinition) {
        if let Some(retention) = self.snapshot_retention {
            definition.snapshot_retention = Some(retention);
        }
        if let Some(size) = self.target_file_size {
            definition.target_file_size = Some(size);
        }
    }
}

/// `'off'`, or an interval of at least [`MIN_SNAPSHOT_RETENTION`].
fn snapshot_retention(text: &str) -> Result<SnapshotRetention, PlanError> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(SnapshotRetention::Off);
    }
    let Some(duration) = parse_duration(text) else {
        return Err(PlanError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: \"{text}\""),
        ));
    };
    if duration < MIN_SNAPSHOT_RETENTION {
        return Err(PlanError::invalid(
            "SNAPSHOT RETENTION must be at least 10s",
        ));
    }
    let ms = u64::try_from(duration.as_millis())
        .map_err(|_| PlanError::invalid("SNAPSHOT RETENTION is too large"))?;
    Ok(SnapshotRetention::Keep { ms })
}

/// A size in bytes: a number with an optional unit (`B`, `kB`, `MB`, `GB`, `TB`, powers
/// of 1024 as in PostgreSQL's memory settings; `KiB`, `MiB`, `GiB`, `TiB` alike).
fn target_file_size(text: &str) -> Result<u64, PlanError> {
    let invalid = || {
        PlanError::invalid(format!("invalid TARGET FILE SIZE: \"{text}\""))
            .with_hint("Write a size in bytes with an optional unit, such as '128MB' or '1GB'.")
    };
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let number: u64 = trimmed[..digits].parse().map_err(|_| invalid())?;
    let unit = trimmed[digits..].trim().to_ascii_lowercase();
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "kb" | "kib" => 1 << 10,
        "mb" | "mib" => 1 << 20,
        "gb" | "gib" => 1 << 30,
        "tb" | "tib" => 1 << 40,
        _ => return Err(invalid()),
    };
    let bytes = number.checked_mul(scale).ok_or_else(invalid)?;
    if bytes == 0 {
        return Err(PlanError::invalid(
            "TARGET FILE SIZE must be at least 1 byte",
        ));
    }
    Ok(bytes)
}

/// A size as the largest unit that states it exactly: `128MB`, `1536kB`, `100B`.
pub fn format_byte_size(bytes: u64) -> String {
    for (unit, shift) in [("TB", 40), ("GB", 30), ("MB", 20), ("kB", 10)] {
        if bytes >= (1 << shift) && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// The maintenance options a sink's `create_sql` shows: those written, as written.
pub fn written_options(definition: &SinkDefinition) -> Vec<SqlOption> {
    let option = |name: SinkWithOptionName, value: String| SqlOption {
        name: OptionName(name.sql_name().into()),
        value: Some(OptionValue::String(value)),
    };
    let mut options = Vec::new();
    if let Some(retention) = definition.snapshot_retention {
        let value = match retention {
            SnapshotRetention::Off => "off".to_string(),
            SnapshotRetention::Keep { ms } => format_duration(Duration::from_millis(ms)),
        };
        options.push(option(SinkWithOptionName::SnapshotRetention, value));
    }
    if let Some(size) = definition.target_file_size {
        options.push(option(
            SinkWithOptionName::TargetFileSize,
            format_byte_size(size),
        ));
    }
    options
}

/// `ALTER SINK ... RESET (...)` of maintenance options: back to their defaults. Returns
/// whether `name` is one of them.
pub fn reset(definition: &mut SinkDefinition, name: SinkWithOptionName) -> bool {
    match name {
        SinkWithOptionName::SnapshotRetention => definition.snapshot_retention = None,
        SinkWithOptionName::TargetFileSize => definition.target_file_size = None,
        SinkWithOptionName::CommitInterval | SinkWithOptionName::DeleteMode => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_and_print_back() {
        for (text, bytes, shown) in [
            ("128MB", 128 << 20, "128MB"),
            ("128 mb", 128 << 20, "128MB"),
            ("1GiB", 1 << 30, "1GB"),
            ("1536kB", 1536 << 10, "1536kB"),
            ("100", 100, "100B"),
            ("2048B", 2048, "2kB"),
        ] {
            assert_eq!(target_file_size(text).unwrap(), bytes, "{text}");
            assert_eq!(format_byte_size(bytes), shown, "{text}");
        }
        for bad in ["", "MB", "12 parsecs", "-1MB", "0", "99999999999TB"] {
            assert!(target_file_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn retention_is_off_or_at_least_ten_seconds() {
        assert_eq!(snapshot_retention("OFF").unwrap(), SnapshotRetention::Off);
        assert_eq!(
            snapshot_retention("10s").unwrap(),
            SnapshotRetention::Keep { ms: 10_000 }
        );
        assert_eq!(
            snapshot_retention("9s").unwrap_err().message,
            "SNAPSHOT RETENTION must be at least 10s"
        );
        assert!(snapshot_retention("soon").is_err());
    }
}
