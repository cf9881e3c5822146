//! Replication slots: their names and their removal (DROP SOURCE).

use std::time::Duration;

use floe_repr::GlobalId;

use crate::config::{PgConnectionConfig, connect};
use crate::error::{ErrorKind, PgError};

/// PostgreSQL's limit on names (NAMEDATALEN - 1).
const MAX_NAME_BYTES: usize = 63;

/// The slot of source `source` in the environment `environment_id` (the data directory's
/// unique prefix): `floe_<environment>_<source id>`, lowercase letters, digits and
/// underscores only (what slot names allow), at most 63 bytes. Two floe environments
/// replicating from one server never share a slot.
pub fn slot_name(environment_id: &str, source: GlobalId) -> String {
    let environment: String = environment_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let suffix = format!("_{source}");
    let room = MAX_NAME_BYTES - "floe_".len() - suffix.len();
    let environment: String = environment.chars().take(room).collect();
    format!("floe_{environment}{suffix}")
}

/// Drops the slot if it exists and no one reads it (used before making it again).
pub(crate) async fn drop_slot_if_present(
    client: &tokio_postgres::Client,
    slot: &str,
) -> Result<(), PgError> {
    client
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
             WHERE slot_name = $1 AND database = current_database()",
            &[&slot],
        )
        .await?;
    Ok(())
}

/// Removes a source's slot upstream (DROP SOURCE). A slot still read by a connection
/// that outlived its source (the server notices a dead client late) has that connection
/// ended first. A missing slot is fine: there is nothing to remove. When the server
/// cannot be reached the error says so, naming the slot to drop by hand. Only a slot of
/// the connection's database is this source's: a slot of the same name elsewhere on the
/// server belongs to another environment (one that shares the environment id) and is
/// left alone.
pub async fn drop_replication_slot(
    connection: &PgConnectionConfig,
    slot: &str,
) -> Result<(), PgError> {
    let client = connect(connection, "floe drop source")
        .await
        .map_err(|e| unreachable_slot(e, slot))?;
    for attempt in 0..10 {
        client
            .execute(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
                 WHERE slot_name = $1 AND database = current_database()
                   AND active_pid IS NOT NULL",
                &[&slot],
            )
            .await?;
        match drop_slot_if_present(&client, slot).await {
            Ok(()) => return Ok(()),
            // Still active: the terminated reader has not exited yet.
            Err(error) if error.kind == ErrorKind::Slot && error.retryable && attempt < 9 => {
                tokio::time::sleep(Duration::from_millis(100 * (attempt + 1))).await;
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

fn unreachable_slot(error: PgError, slot: &str) -> PgError {
    let hint = format!(
        "Drop the replication slot by hand once the server is reachable: SELECT pg_drop_replication_slot('{slot}');"
    );
    PgError {
        hint: Some(hint),
        ..error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_names_are_valid_and_bounded() {
        let name = slot_name("6F1c-43a9-9a43-4d6e-b3a8-6b7a1e1f2c3d", GlobalId::User(12));
        assert_eq!(name, "floe_6f1c_43a9_9a43_4d6e_b3a8_6b7a1e1f2c3d_u12");
        let long = slot_name(&"x".repeat(200), GlobalId::User(123_456));
        assert_eq!(long.len(), 63);
        assert!(long.ends_with("_u123456"));
        assert!(
            long.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        );
    }
}
