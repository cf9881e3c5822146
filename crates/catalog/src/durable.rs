//! How definitions are stored: serialized from dedicated durable types (never
//! the planner's, which change with the SQL floe understands), each row
//! marked with the format it was written in.
//!
//! Formats: 1 (module [`v1`]), the shape floe 0.1.0 wrote. Rows written before
//! formats were recorded are format 1. A new format is a new module with its
//! own frozen types; the reader keeps converting every older format to today's
//! definitions, and [`FORMAT`] names the one written.

mod v1;

use floe_repr::GlobalId;
use floe_sql::catalog::ItemDefinition;

use crate::CatalogError;

/// The format new and updated definitions are written in.
pub(crate) const FORMAT: u32 = 1;

/// The stored form of a definition, in format [`FORMAT`].
pub(crate) fn encode_definition(definition: &ItemDefinition) -> Result<String, CatalogError> {
    serde_json::to_string(&v1::ItemDefinition::from(definition))
        .map_err(|e| CatalogError::internal(format!("encoding a definition: {e}")))
}

/// A stored definition read back; `id` names it in errors.
pub(crate) fn decode_definition(
    id: &GlobalId,
    format: u32,
    stored: &str,
) -> Result<ItemDefinition, CatalogError> {
    match format {
        1 => serde_json::from_str::<v1::ItemDefinition>(stored)
            .map(ItemDefinition::from)
            .map_err(|e| CatalogError::Corrupt(format!("definition of {id}: {e}"))),
        other => Err(CatalogError::Corrupt(format!(
            "the definition of {id} is in format {other}, which this floe does not read (it reads format {FORMAT}); use a newer floe"
        ))),
    }
}

#[cfg(test)]
mod tests;
