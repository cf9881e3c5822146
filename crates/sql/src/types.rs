//! CREATE TYPE: Materialize's named record, list and map types, and the
//! resolution of type names that may name one.
//!
//! A named type is a catalog item of its schema (it shares the namespace of
//! relations, as in Materialize) holding the type it stands for. Where a
//! type name is read (a column of CREATE TABLE or ALTER TABLE, a cast in a
//! query, another type's definition), a name that is no built-in type is
//! looked up among them, also inside `T list`, `T[]` and `map[text=>T]`
//! (`pair list`). A value of a named type is of the type it stands for:
//! `pg_typeof` names that type (`integer list`), where Materialize names
//! the named one.

use std::ops::ControlFlow;

use floe_repr::{GlobalId, SqlScalarType, SqlState};
use floe_sql_parser::ast::{CreateTypeStatement, TypeDefinition};
use sqlparser::ast::{DataType, Expr, Ident, ObjectName, VisitMut, VisitorMut};

use crate::catalog::{ItemDefinition, PlanCatalog};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{check_not_exists, name_for_create, qualified_object_name, qualify_parts};

/// CREATE TYPE, planned.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTypePlan {
    pub name: crate::catalog::QualifiedName,
    pub definition: crate::catalog::TypeDefinition,
    pub create_sql: String,
}

pub(crate) fn plan_create_type(
    catalog: &dyn PlanCatalog,
    statement: CreateTypeStatement,
) -> Result<Plan, PlanError> {
    let name = name_for_create(catalog, &statement.name)?;
    check_not_exists(catalog, &name, false)?;
    let mut uses = Vec::new();
    let mut resolve = |data_type: &DataType| {
        let (scalar_type, used) = resolve_data_type(catalog, data_type)?;
        uses.extend(used);
        Ok::<_, PlanError>(scalar_type)
    };
    let scalar_type = match &statement.definition {
        TypeDefinition::Record(fields) => {
            let mut resolved = Vec::with_capacity(fields.len());
            for (field, data_type) in fields {
                let field = crate::planner::normalize_ident(field);
                if resolved.iter().any(|(name, _, _)| *name == field) {
                    return Err(PlanError::new(
                        SqlState::DUPLICATE_COLUMN,
                        format!("column \"{field}\" specified more than once"),
                    ));
                }
                resolved.push((field, resolve(data_type)?, true));
            }
            SqlScalarType::Record { fields: resolved }
        }
        TypeDefinition::List { element } => SqlScalarType::List {
            element: Box::new(resolve(element)?),
        },
        TypeDefinition::Map { key, value } => {
            let key = resolve(key)?;
            if key != SqlScalarType::Text {
                return Err(PlanError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    format!("map key type must be text, got {key}"),
                ));
            }
            SqlScalarType::Map {
                value: Box::new(resolve(value)?),
            }
        }
    };
    let create_sql = CreateTypeStatement {
        name: qualified_object_name(&name),
        definition: statement.definition,
    }
    .to_string();
    uses.sort();
    uses.dedup();
    Ok(Plan::CreateType(CreateTypePlan {
        name,
        definition: crate::catalog::TypeDefinition { scalar_type, uses },
        create_sql,
    }))
}

/// The type `data_type` names, built-in or named (see the module
/// documentation), and the named types it reads.
pub fn resolve_data_type(
    catalog: &dyn PlanCatalog,
    data_type: &DataType,
) -> Result<(SqlScalarType, Vec<GlobalId>), PlanError> {
    let mut used = Vec::new();
    let scalar_type = crate::table::resolve_type_name(&data_type.to_string(), &mut |name| {
        let (id, scalar_type) = named_type(catalog, name)?;
        used.push(id);
        Some(scalar_type)
    })?;
    Ok((scalar_type, used))
}

/// The named type `name` (as written, `pair` or `public.pair`, quoted or
/// not) stands for, and its id.
fn named_type(catalog: &dyn PlanCatalog, name: &str) -> Option<(GlobalId, SqlScalarType)> {
    let parts: Vec<String> = name
        .split('.')
        .map(|part| part.trim_matches('"').to_string())
        .collect();
    let item = catalog.item_by_name(&qualify_parts(catalog, &parts)?)?;
    match &item.definition {
        ItemDefinition::Type(named) => Some((item.id, named.scalar_type.clone())),
        _ => None,
    }
}

/// `statement` with each cast to a named type written as a cast to the type
/// it stands for (`x::il` as `x::integer list`, a record as
/// `record(a:integer,b:text)`): a view's query is planned again where the
/// catalog is not at hand (a replica's dataflow), and keeps its meaning if
/// the type is dropped.
pub fn spell_named_types(
    catalog: &dyn PlanCatalog,
    mut statement: sqlparser::ast::Statement,
) -> Result<sqlparser::ast::Statement, PlanError> {
    struct Speller<'a>(&'a dyn PlanCatalog);
    impl VisitorMut for Speller<'_> {
        type Break = PlanError;
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<PlanError> {
            let Expr::Cast { data_type, .. } = expr else {
                return ControlFlow::Continue(());
            };
            if crate::table::parse_type_name(&data_type.to_string()).is_ok() {
                return ControlFlow::Continue(());
            }
            match resolve_data_type(self.0, data_type) {
                Ok((scalar_type, used)) if !used.is_empty() => {
                    *data_type = spelled(&scalar_type);
                    ControlFlow::Continue(())
                }
                // Not a named type: the engine says what it is not.
                _ => ControlFlow::Continue(()),
            }
        }
    }
    match statement.visit(&mut Speller(catalog)) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(statement),
    }
}

/// The type name floe's type names read back as `scalar_type` (`"integer
/// list"`, `"record(a:integer,b:text)"`; quoted, as a record's has
/// parentheses and colons).
pub fn spelled(scalar_type: &SqlScalarType) -> DataType {
    DataType::Custom(
        ObjectName::from(vec![Ident::with_quote('"', scalar_type.to_string())]),
        vec![],
    )
}
