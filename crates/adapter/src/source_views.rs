//! The rows of the builtin relations about sources: `mz_internal.mz_source_statuses`,
//! `mz_source_status_history` and `mz_source_statistics` (their columns are in
//! `crate::system::BUILTINS`).

use floe_catalog::SourceStatusEvent;
use floe_repr::Datum;
use floe_sql::catalog::{CatalogItem, Ingestion, ItemDefinition, SourceDefinition};

use crate::system::{SystemContext, millis_to_micros, opt_text, text};

/// `mz_sources.connection_id`: a Postgres source's connection.
pub fn connection_id(source: &SourceDefinition) -> Option<String> {
    match &source.ingestion {
        Some(Ingestion::Postgres { connection, .. }) => Some(connection.to_string()),
        _ => None,
    }
}

fn sources<'a>(
    context: &'a SystemContext,
) -> impl Iterator<Item = (&'a CatalogItem, &'a SourceDefinition)> {
    context
        .catalog
        .items()
        .filter_map(|item| match &item.definition {
            ItemDefinition::Source(source) => Some((item, source)),
            _ => None,
        })
}

fn details(event: &SourceStatusEvent) -> Datum {
    event
        .details
        .clone()
        .map(Datum::Jsonb)
        .unwrap_or(Datum::Null)
}

/// Each source's latest status: a Postgres source, its progress relation and its
/// subsources as their task last reported (`created` before it did); a load
/// generator, which reports nothing, `running`.
pub fn source_statuses(context: &SystemContext) -> Vec<Vec<Datum>> {
    let mut latest = std::collections::HashMap::new();
    for event in context.source_status_history {
        latest.insert(event.source_id, event);
    }
    sources(context)
        .map(|(item, source)| {
            let event = latest.get(&item.id);
            let default = if source.ingestion.is_some() {
                "created"
            } else {
                "running"
            };
            vec![
                text(item.id.to_string()),
                text(&item.name.item),
                text(source.type_name()),
                event
                    .map(|e| Datum::TimestampTz(millis_to_micros(e.occurred_at)))
                    .unwrap_or(Datum::Null),
                text(event.map_or(default, |e| e.status.as_str())),
                opt_text(event.and_then(|e| e.error.clone())),
                event.map_or(Datum::Null, |e| details(e)),
            ]
        })
        .collect()
}

pub fn source_status_history(context: &SystemContext) -> Vec<Vec<Datum>> {
    context
        .source_status_history
        .iter()
        .map(|event| {
            vec![
                Datum::TimestampTz(millis_to_micros(event.occurred_at)),
                text(event.source_id.to_string()),
                text(&event.status),
                opt_text(event.error.clone()),
                details(event),
                opt_text(event.replica_id.map(|r| r.to_string())),
            ]
        })
        .collect()
}

/// One row per Postgres source: its counters since this process started (positions
/// are LSNs as numbers).
pub fn source_statistics(context: &SystemContext) -> Vec<Vec<Datum>> {
    sources(context)
        .filter(|(_, source)| matches!(source.ingestion, Some(Ingestion::Postgres { .. })))
        .map(|(item, _)| {
            let s = context
                .source_statistics
                .get(&item.id)
                .copied()
                .unwrap_or_default();
            let mut row = vec![text(item.id.to_string())];
            row.extend(
                [
                    s.messages_received,
                    s.bytes_received,
                    s.updates_staged,
                    s.updates_committed,
                    s.snapshot_records_known,
                    s.snapshot_records_staged,
                    s.offset_known,
                    s.offset_committed,
                ]
                .map(Datum::UInt64),
            );
            row
        })
        .collect()
}
