//! `CREATE [UNIQUE | DEFAULT] INDEX`: an index of a relation, named in its
//! relation's schema and kept on a cluster, as Materialize has them, with
//! PostgreSQL's `UNIQUE` for tables.
//!
//! floe answers every query from relations it keeps in memory already, so an index
//! changes no query's plan; a unique index is a constraint storage checks every
//! write of its table against (see `floe_storage::UniqueIndex`).

use floe_repr::{ClusterId, GlobalId, RelationDesc, SqlState};
use floe_sql_parser::ast::{CreateIndexStatement, IndexKeyPart};
use sqlparser::ast::{Expr, Ident};

use crate::catalog::*;
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{
    PlanNotice, SessionContext, check_not_exists, normalize_ident, qualified, resolve_cluster,
    resolve_item,
};

/// An index to create: resolved, its name free, its key columns of the relation.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndexPlan {
    pub name: QualifiedName,
    pub definition: IndexDefinition,
    pub create_sql: String,
}

pub const TAG: &str = "CREATE INDEX";

pub fn plan_create_index(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    statement: CreateIndexStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let on = resolve_item(catalog, &statement.on)?;
    let desc = indexable(on, statement.unique)?;
    let key = match &statement.key {
        Some(parts) => parts
            .iter()
            .map(|part| key_column(desc, on, part))
            .collect::<Result<Vec<usize>, PlanError>>()?,
        None => default_key(desc),
    };
    let item = match &statement.name {
        Some(ident) => normalize_ident(ident),
        None => default_name(catalog, on, desc, &key, statement.key.is_none()),
    };
    let name = QualifiedName {
        item,
        ..on.name.clone()
    };
    if check_not_exists(catalog, &name, statement.if_not_exists)? {
        notices.push(PlanNotice {
            message: format!("index \"{}\" already exists, skipping", name.item),
            hint: None,
        });
        return Ok(Plan::NoOp { tag: TAG });
    }
    let in_cluster = statement.in_cluster.as_ref();
    let cluster = resolve_cluster(catalog, in_cluster, &session.cluster)?.id;
    let create_sql = create_sql(
        catalog,
        &name.item,
        statement.unique,
        Some(cluster),
        &on.name,
        desc,
        &key,
        statement.key.as_deref(),
    );
    Ok(Plan::CreateIndex(CreateIndexPlan {
        name,
        definition: IndexDefinition {
            on: on.id,
            key,
            unique: statement.unique,
            cluster,
            constraint: false,
        },
        create_sql,
    }))
}

/// The `CREATE INDEX` statement an index is kept as (its `SHOW CREATE INDEX`):
/// every name qualified and quoted, its cluster (none for a constraint's index),
/// each key column with the ordering its key part gave (`parts`, when the
/// statement named them).
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_sql(
    catalog: &dyn PlanCatalog,
    name: &str,
    unique: bool,
    cluster: Option<ClusterId>,
    on: &QualifiedName,
    desc: &RelationDesc,
    key: &[usize],
    parts: Option<&[IndexKeyPart]>,
) -> String {
    let parts = parts.into_iter().flatten().map(Some);
    CreateIndexStatement {
        name: Some(Ident::with_quote('"', name)),
        if_not_exists: false,
        unique,
        in_cluster: cluster
            .and_then(|cluster| catalog.cluster(cluster))
            .map(|c| Ident::with_quote('"', c.name.clone())),
        on: qualified(on),
        method: None,
        key: Some(
            key.iter()
                .zip(parts.chain(std::iter::repeat(None)))
                .map(|(column, part)| IndexKeyPart {
                    expr: Expr::Identifier(Ident::with_quote('"', desc.columns[*column].0.clone())),
                    descending: part.is_some_and(|p| p.descending),
                    nulls_first: part.and_then(|p| p.nulls_first),
                })
                .collect(),
        ),
    }
    .to_string()
}

/// `DROP INDEX` of a `UNIQUE` constraint's index: refused, as PostgreSQL refuses
/// it; the constraint is dropped with `ALTER TABLE ... DROP CONSTRAINT`.
pub(crate) fn check_not_constraint(
    catalog: &dyn PlanCatalog,
    item: &CatalogItem,
) -> Result<(), PlanError> {
    let ItemDefinition::Index(index) = &item.definition else {
        return Ok(());
    };
    if !index.constraint {
        return Ok(());
    }
    let name = &item.name.item;
    let table = catalog
        .item(index.on)
        .map(|table| table.name.item.clone())
        .unwrap_or_default();
    Err(PlanError::new(
        SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
        format!("cannot drop index {name} because constraint {name} on table {table} requires it"),
    )
    .with_hint(format!(
        "You can drop constraint {name} on table {table} instead."
    )))
}

/// The columns of a relation an index may be created on: any relation; a unique
/// index only of a table, whose writes storage checks.
fn indexable(item: &CatalogItem, unique: bool) -> Result<&RelationDesc, PlanError> {
    let kind = item.definition.kind();
    let desc = item.definition.relation_desc().ok_or_else(|| {
        PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!(
                "cannot create index on {} \"{}\"",
                kind.human_name(),
                item.name
            ),
        )
        .with_detail(format!(
            "Only relations can be indexed, and a {} is not one.",
            kind.human_name()
        ))
    })?;
    if unique && kind != ItemKind::Table {
        return Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!(
                "cannot create unique index on {} \"{}\"",
                kind.human_name(),
                item.name
            ),
        )
        .with_detail(
            "A unique index is a constraint on the rows written to a table; floe \
             cannot enforce one on a relation it computes or ingests.",
        ));
    }
    Ok(desc)
}

/// The column a key part names. Expressions are not keys floe can keep.
fn key_column(
    desc: &RelationDesc,
    on: &CatalogItem,
    part: &IndexKeyPart,
) -> Result<usize, PlanError> {
    let name = match &part.expr {
        Expr::Identifier(ident) => normalize_ident(ident),
        Expr::Nested(inner) => match inner.as_ref() {
            Expr::Identifier(ident) => normalize_ident(ident),
            _ => return Err(expression_key()),
        },
        _ => return Err(expression_key()),
    };
    desc.columns
        .iter()
        .position(|(column, _)| *column == name)
        .ok_or_else(|| {
            PlanError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column \"{name}\" does not exist"),
            )
            .with_detail(format!(
                "{} \"{}\" has no column of that name.",
                on.definition.kind().human_name(),
                on.name
            ))
        })
}

fn expression_key() -> PlanError {
    PlanError::unsupported("index keys other than columns are not supported")
        .with_hint("Index a view that computes the expression as a column.")
}

/// `CREATE DEFAULT INDEX`'s key: the relation's unique key, else every column.
fn default_key(desc: &RelationDesc) -> Vec<usize> {
    match desc.unique_keys.first() {
        Some(key) if !key.is_empty() => key.clone(),
        _ => (0..desc.columns.len()).collect(),
    }
}

/// A name for an index created without one, free in the relation's schema:
/// `<relation>_primary_idx` for a default index, `<relation>_<columns>_idx`
/// otherwise (as Materialize names them), with a number added when taken.
fn default_name(
    catalog: &dyn PlanCatalog,
    on: &CatalogItem,
    desc: &RelationDesc,
    key: &[usize],
    default: bool,
) -> String {
    let stem = if default {
        format!("{}_primary_idx", on.name.item)
    } else {
        let columns: Vec<&str> = key.iter().map(|c| desc.columns[*c].0.as_str()).collect();
        format!("{}_{}_idx", on.name.item, columns.join("_"))
    };
    free_name(catalog, &on.name, stem, &[])
}

/// `stem` if no item of `like`'s schema (nor one of `also_taken`) has that name,
/// else `stem` with the first number added that makes it free, as PostgreSQL
/// chooses the names it makes up.
pub(crate) fn free_name(
    catalog: &dyn PlanCatalog,
    like: &QualifiedName,
    stem: String,
    also_taken: &[String],
) -> String {
    let taken = |item: &str| {
        also_taken.iter().any(|name| name == item)
            || catalog
                .item_by_name(&QualifiedName {
                    item: item.to_string(),
                    ..like.clone()
                })
                .is_some()
    };
    if !taken(&stem) {
        return stem;
    }
    (1..)
        .map(|n| format!("{stem}{n}"))
        .find(|name| !taken(name))
        .unwrap_or(stem)
}

/// The unique indexes of `table`, by name, each with its key columns: the constraints
/// storage checks the table's writes against.
pub fn unique_indexes_of(catalog: &dyn PlanCatalog, table: GlobalId) -> Vec<(String, Vec<usize>)> {
    let mut indexes: Vec<(String, Vec<usize>)> = catalog
        .dependents(table)
        .into_iter()
        .filter_map(|id| catalog.item(id))
        .filter_map(|item| match &item.definition {
            ItemDefinition::Index(index) if index.unique && index.on == table => {
                Some((item.name.item.clone(), index.key.clone()))
            }
            _ => None,
        })
        .collect();
    indexes.sort();
    indexes
}
