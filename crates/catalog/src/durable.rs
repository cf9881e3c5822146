//! How definitions are stored.

use floe_sql::catalog::ItemDefinition;

use crate::CatalogError;

/// The stored form of a definition.
pub(crate) fn encode_definition(definition: &ItemDefinition) -> Result<String, CatalogError> {
    serde_json::to_string(definition).map_err(|e| CatalogError::internal(e.to_string()))
}

/// A stored definition read back; `id` names it in errors.
pub(crate) fn decode_definition(
    id: &floe_repr::GlobalId,
    stored: &str,
) -> Result<ItemDefinition, CatalogError> {
    serde_json::from_str(stored)
        .map_err(|e| CatalogError::Corrupt(format!("definition of {id}: {e}")))
}
