//! `SUBSCRIBE [TO] name | (query)`, on its own, in `COPY (...) TO STDOUT` or in a cursor:
//! a relation's contents, then its changes.

use floe_repr::{ClusterId, GlobalId, RelationDesc, SqlState};
use floe_sql_parser::ast::{SubscribeRelation, SubscribeStatement};
use sqlparser::ast::ObjectName;

use crate::catalog::{ItemDefinition, PlanCatalog, QualifiedName};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{SessionContext, resolve_item, resolve_relations};

/// What a SUBSCRIBE reads and how it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribePlan {
    pub from: SubscribeFrom,
    /// Whether the contents as of the start come first.
    pub snapshot: bool,
    /// Whether progress rows are sent.
    pub progress: bool,
    /// Whether the rows go out as COPY text lines (`COPY (SUBSCRIBE ...) TO STDOUT`).
    pub copy: bool,
}

/// Where a subscription's changes come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscribeFrom {
    /// A table, a source or a materialized view: its change log.
    Relation {
        id: GlobalId,
        name: QualifiedName,
        desc: RelationDesc,
    },
    /// A query (a plain view is `SELECT * FROM` it): a dataflow of its own, planned as
    /// a materialized view's, on the session's cluster while the subscription runs.
    Query {
        /// Names resolved and plain views inlined, as a materialized view's query.
        query: Box<sqlparser::ast::Statement>,
        cluster: ClusterId,
        /// The user relations the query names (a plain view as itself): the
        /// session needs SELECT on each.
        reads: Vec<GlobalId>,
    },
}

pub(crate) fn plan_subscribe(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    statement: SubscribeStatement,
) -> Result<Plan, PlanError> {
    let query = match statement.relation {
        SubscribeRelation::Query(query) => query,
        SubscribeRelation::Name(name) => {
            let item = match resolve_item(catalog, &name) {
                Ok(item) => item,
                Err(error) => return Err(refuse_system_relation(catalog, &name).unwrap_or(error)),
            };
            match &item.definition {
                ItemDefinition::View(_) => select_all(name)?,
                definition => {
                    let Some(desc) = definition.desc() else {
                        return Err(PlanError::new(
                            SqlState::WRONG_OBJECT_TYPE,
                            format!(
                                "\"{}\" is not a table, source, view or materialized view",
                                item.name
                            ),
                        ));
                    };
                    return Ok(Plan::Subscribe(SubscribePlan {
                        from: SubscribeFrom::Relation {
                            id: item.id,
                            name: item.name.clone(),
                            desc: desc.clone(),
                        },
                        snapshot: statement.snapshot,
                        progress: statement.progress,
                        copy: statement.copy,
                    }));
                }
            }
        }
    };
    let cluster = catalog.cluster_by_name(&session.cluster).ok_or_else(|| {
        PlanError::new(
            SqlState::UNDEFINED_OBJECT,
            format!("unknown cluster '{}'", session.cluster),
        )
    })?;
    let resolved = resolve_relations(catalog, sqlparser::ast::Statement::Query(query))?;
    let reads = crate::view::relations_used(catalog, &resolved)?;
    Ok(Plan::Subscribe(SubscribePlan {
        from: SubscribeFrom::Query {
            query: Box::new(crate::view::inline_views(catalog, resolved)?),
            cluster: cluster.id,
            reads,
        },
        snapshot: statement.snapshot,
        progress: statement.progress,
        copy: statement.copy,
    }))
}

/// `SELECT * FROM name`: what subscribing to a plain view follows.
fn select_all(name: ObjectName) -> Result<Box<sqlparser::ast::Query>, PlanError> {
    match crate::dml::parse_query(&format!("SELECT * FROM {name}"))? {
        sqlparser::ast::Statement::Query(query) => Ok(query),
        _ => Err(PlanError::new(
            SqlState::INTERNAL_ERROR,
            "SELECT * FROM a view is not a query",
        )),
    }
}

/// The refusal of a builtin relation's name, which has no change log to follow.
fn refuse_system_relation(catalog: &dyn PlanCatalog, name: &ObjectName) -> Option<PlanError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|part| part.as_ident().map(crate::planner::normalize_ident))
        .collect();
    let (schemas, item): (Vec<&str>, &String) = match parts.as_slice() {
        [item] => (vec!["mz_catalog", "mz_internal", "pg_catalog"], item),
        [.., schema, item] => (vec![schema.as_str()], item),
        [] => return None,
    };
    schemas
        .into_iter()
        .any(|schema| catalog.is_system_relation(schema, item))
        .then(|| {
            PlanError::unsupported(format!(
                "SUBSCRIBE to system relation \"{item}\" is not supported"
            ))
        })
}
