//! `CREATE SCHEMA`, `DROP SCHEMA` and `COMMENT ON`, as Materialize has them.
//! Schemas live in the one database, `materialize`; `public` always exists.

use floe_repr::{GlobalId, SqlState};
use floe_sql_parser::ast::{CommentStatement, CommentTarget, DropObjectsStatement};
use sqlparser::ast::{ObjectName, SchemaName};

use crate::catalog::{DATABASE, PUBLIC_SCHEMA, PlanCatalog, SYSTEM_SCHEMAS};
use crate::error::PlanError;
use crate::plan::{CommentPlan, CreateSchemaPlan, DropObjectsPlan, Plan};
use crate::planner::{
    PlanNotice, display_name, expect_kind, item_kind_of, name_parts, resolve_item, with_dependents,
};

/// The schema a `[materialize.]schema` name names.
fn schema_name(name: &ObjectName) -> Result<String, PlanError> {
    match name_parts(name)?.as_slice() {
        [schema] => Ok(schema.clone()),
        [database, schema] if database == DATABASE => Ok(schema.clone()),
        [database, _] => Err(PlanError::new(
            SqlState::INVALID_CATALOG_NAME,
            format!("unknown database '{database}'"),
        )),
        _ => Err(PlanError::syntax(format!(
            "improper schema name (too many dotted names): {name}"
        ))),
    }
}

pub(crate) fn plan_create_schema(
    catalog: &dyn PlanCatalog,
    name: SchemaName,
    if_not_exists: bool,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let SchemaName::Simple(name) = name else {
        return Err(PlanError::unsupported(
            "CREATE SCHEMA ... AUTHORIZATION is not supported",
        ));
    };
    let name = schema_name(&name)?;
    let taken = catalog.schema_exists(&name) || SYSTEM_SCHEMAS.contains(&name.as_str());
    if taken && if_not_exists {
        notices.push(PlanNotice {
            message: format!("schema \"{name}\" already exists, skipping"),
            hint: None,
        });
        return Ok(Plan::NoOp {
            tag: "CREATE SCHEMA",
        });
    }
    if taken {
        return Err(PlanError::schema_already_exists(&name));
    }
    // Names of this form are kept for the system's schemas.
    if name.starts_with("mz_") || name.starts_with("pg_") {
        return Err(PlanError::new(
            SqlState::INVALID_SCHEMA_NAME,
            format!("unacceptable schema name '{name}'"),
        ));
    }
    Ok(Plan::CreateSchema(CreateSchemaPlan { name }))
}

/// Adds the schemas `DROP SCHEMA` names (and with CASCADE their items and
/// everything that depends on them) to `plan`.
pub(crate) fn plan_drop_schemas(
    catalog: &dyn PlanCatalog,
    statement: &DropObjectsStatement,
    plan: &mut DropObjectsPlan,
    notices: &mut Vec<PlanNotice>,
) -> Result<(), PlanError> {
    for name in &statement.names {
        let schema = schema_name(name)?;
        if SYSTEM_SCHEMAS.contains(&schema.as_str()) {
            return Err(PlanError::new(
                SqlState::INSUFFICIENT_PRIVILEGE,
                format!("system schema '{schema}' cannot be modified"),
            ));
        }
        if schema == PUBLIC_SCHEMA {
            return Err(
                PlanError::unsupported("DROP SCHEMA public is not supported")
                    .with_hint("Drop the objects in public instead."),
            );
        }
        if catalog.user_schema(&schema).is_none() {
            if statement.if_exists {
                notices.push(PlanNotice {
                    message: format!("schema \"{schema}\" does not exist, skipping"),
                    hint: None,
                });
                continue;
            }
            return Err(PlanError::unknown_schema(&schema));
        }
        let items = catalog.items_in_schema(&schema);
        if !items.is_empty() && !statement.cascade {
            return Err(PlanError::schema_not_empty(&format!("{DATABASE}.{schema}")));
        }
        for id in items {
            with_dependents(catalog, id, &mut plan.items);
        }
        plan.schemas.push(schema);
    }
    Ok(())
}

pub(crate) fn plan_comment(
    catalog: &dyn PlanCatalog,
    statement: CommentStatement,
) -> Result<Plan, PlanError> {
    let (id, column) = match statement.target {
        CommentTarget::Object(object_type) => {
            let Some(kind) = item_kind_of(object_type) else {
                return Err(PlanError::unsupported(format!(
                    "COMMENT ON {object_type} is not supported"
                )));
            };
            let item = resolve_item(catalog, &statement.name)?;
            expect_kind(item, kind)?;
            (item.id, None)
        }
        CommentTarget::Column => comment_column(catalog, &statement.name)?,
    };
    Ok(Plan::Comment(CommentPlan {
        id,
        column,
        comment: statement.comment,
    }))
}

/// The relation and 1-based column position of `COMMENT ON COLUMN rel.col`.
fn comment_column(
    catalog: &dyn PlanCatalog,
    name: &ObjectName,
) -> Result<(GlobalId, Option<usize>), PlanError> {
    let mut relation = name.clone();
    let Some(column) = relation.0.pop() else {
        return Err(PlanError::syntax("expected relation.column"));
    };
    if relation.0.is_empty() {
        return Err(PlanError::syntax(format!(
            "column name {} must be qualified by its relation",
            display_name(name)
        )));
    }
    let column = name_parts(&ObjectName(vec![column]))?
        .pop()
        .unwrap_or_default();
    let item = resolve_item(catalog, &relation)?;
    let Some(desc) = item.definition.desc() else {
        return Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!("\"{}\" has no columns", item.name),
        ));
    };
    let Some(position) = desc.columns.iter().position(|(c, _)| *c == column) else {
        return Err(PlanError::new(
            SqlState::UNDEFINED_COLUMN,
            format!("column \"{column}\" does not exist"),
        ));
    };
    Ok((item.id, Some(position + 1)))
}
