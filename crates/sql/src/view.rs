//! `CREATE [OR REPLACE] [MATERIALIZED] VIEW`, and plain views inlined into the
//! queries that read them.

use std::ops::ControlFlow;

use floe_repr::{ClusterId, GlobalId, SqlState};
use floe_sql_parser::ast::CreateViewStatement;
use sqlparser::ast::{Ident, ObjectName, TableAlias, TableFactor, VisitorMut};

use crate::catalog::*;
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{SessionContext, create_name, qualified, resolve_relations};

/// A view or materialized view to create. The engine derives its shape (and,
/// for a materialized view, checks it can be maintained) before it is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateViewPlan {
    pub name: QualifiedName,
    pub materialized: bool,
    /// `OR REPLACE` of an existing view: the one it replaces.
    pub replaces: Option<GlobalId>,
    /// The query as the engine plans it: names resolved, plain views inlined.
    pub query: Box<sqlparser::ast::Statement>,
    /// The query with names resolved (`mz_views.definition`).
    pub definition: String,
    /// The relations the query names.
    pub uses: Vec<GlobalId>,
    /// The versions of the altered tables it reads (see `ViewDefinition`).
    pub table_versions: Vec<(GlobalId, u64)>,
    pub cluster: Option<ClusterId>,
    pub create_sql: String,
}

impl CreateViewPlan {
    pub fn tag(&self) -> &'static str {
        if self.materialized {
            "CREATE MATERIALIZED VIEW"
        } else {
            "CREATE VIEW"
        }
    }

    /// The catalog definition, once the engine derived the shape.
    pub fn definition(&self, desc: floe_repr::RelationDesc) -> ItemDefinition {
        let view = ViewDefinition {
            query: self.definition.clone(),
            desc,
            uses: self.uses.clone(),
            cluster: self.cluster,
            table_versions: self.table_versions.clone(),
        };
        if self.materialized {
            ItemDefinition::MaterializedView(view)
        } else {
            ItemDefinition::View(view)
        }
    }
}

pub fn plan_create_view(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    statement: CreateViewStatement,
) -> Result<Plan, PlanError> {
    let name = create_name(catalog, &statement.name)?;
    let kind = if statement.materialized {
        ItemKind::MaterializedView
    } else {
        ItemKind::View
    };
    let tag = if statement.materialized {
        "CREATE MATERIALIZED VIEW"
    } else {
        "CREATE VIEW"
    };
    let replaces = match catalog.item_by_name(&name) {
        None => None,
        Some(_) if statement.if_not_exists => return Ok(Plan::NoOp { tag }),
        Some(existing) if statement.or_replace && existing.definition.kind() == kind => {
            Some(existing.id)
        }
        Some(existing) => {
            return Err(PlanError::new(
                SqlState::DUPLICATE_OBJECT,
                format!(
                    "{} \"{}\" already exists",
                    existing.definition.kind().human_name(),
                    name
                ),
            ));
        }
    };
    let cluster = if statement.materialized {
        let in_cluster = statement.in_cluster.as_ref();
        Some(crate::planner::resolve_cluster(catalog, in_cluster, &session.cluster)?.id)
    } else {
        None
    };
    // Output columns are named by the query engine (floe-query), as SELECT's
    // are, when the view is planned: the stored query keeps the user's text.
    let resolved = resolve_relations(catalog, sqlparser::ast::Statement::Query(statement.query))?;
    let resolved = crate::types::spell_named_types(catalog, resolved)?;
    let uses = relations_used(catalog, &resolved)?;
    if let Some(replaced) = replaces {
        check_replaceable(catalog, &name, kind, replaced, &uses)?;
    }
    let sqlparser::ast::Statement::Query(query) = &resolved else {
        return Err(PlanError::new(
            SqlState::INTERNAL_ERROR,
            "a view's query is not a query",
        ));
    };
    let create_sql = CreateViewStatement {
        name: qualified(&name),
        materialized: statement.materialized,
        or_replace: false,
        if_not_exists: false,
        in_cluster: cluster
            .and_then(|id| catalog.cluster(id))
            .map(|c| Ident::with_quote('"', c.name.clone())),
        query: query.clone(),
    }
    .to_string();
    let definition = resolved.to_string();
    let inlined = inline_views(catalog, resolved)?;
    if statement.materialized {
        refuse_system_relations(catalog, &inlined)?;
    }
    Ok(Plan::CreateView(CreateViewPlan {
        name,
        materialized: statement.materialized,
        replaces,
        query: Box::new(inlined),
        definition,
        table_versions: crate::alter_table::table_versions(catalog, &uses),
        uses,
        cluster,
        create_sql,
    }))
}

/// A materialized view is maintained from the change logs of what it reads;
/// the system catalog's relations have none (they are built when queried),
/// so a view of them would never have contents to read.
fn refuse_system_relations(
    catalog: &dyn PlanCatalog,
    inlined: &sqlparser::ast::Statement,
) -> Result<(), PlanError> {
    let mut system = None;
    let _ = sqlparser::ast::visit_relations(inlined, |relation| {
        let parts = crate::planner::name_parts(relation).unwrap_or_default();
        if let [schema, item] = parts.as_slice()
            && crate::catalog::SYSTEM_SCHEMAS.contains(&schema.as_str())
            && catalog.is_system_relation(schema, item)
        {
            system = Some(format!("{schema}.{item}"));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    match system {
        Some(relation) => Err(PlanError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("materialized views cannot read the system relation \"{relation}\""),
        )
        .with_hint("A plain view of the system catalog reads it when queried.")),
        None => Ok(()),
    }
}

/// `OR REPLACE` drops the old view: nothing may depend on it, the new one included.
fn check_replaceable(
    catalog: &dyn PlanCatalog,
    name: &QualifiedName,
    kind: ItemKind,
    replaced: GlobalId,
    uses: &[GlobalId],
) -> Result<(), PlanError> {
    if uses.contains(&replaced) {
        return Err(PlanError::invalid(format!(
            "cannot replace {} \"{name}\": depended upon by new \"{name}\" definition",
            kind.human_name()
        )));
    }
    if let Some(dependent) = catalog
        .dependents(replaced)
        .first()
        .and_then(|id| catalog.item(*id))
    {
        return Err(PlanError::new(
            SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
            format!(
                "cannot drop {} \"{}\": still depended upon by {} \"{}\"",
                kind.human_name(),
                name.item,
                dependent.definition.kind().human_name(),
                dependent.name.item
            ),
        ));
    }
    Ok(())
}

/// The user items a resolved statement names as relations. Items that are not
/// relations (a sink, a secret) are refused.
pub(crate) fn relations_used(
    catalog: &dyn PlanCatalog,
    statement: &sqlparser::ast::Statement,
) -> Result<Vec<GlobalId>, PlanError> {
    let mut names = Vec::new();
    let _ = sqlparser::ast::visit_relations(statement, |relation| {
        names.push(relation.clone());
        ControlFlow::<()>::Continue(())
    });
    let mut uses = Vec::new();
    for name in names {
        let Some(item) = user_item(catalog, &name) else {
            continue;
        };
        if item.definition.relation_desc().is_none() {
            return Err(PlanError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!(
                    "{} \"{}\" is not a relation",
                    item.definition.kind().human_name(),
                    item.name.item
                ),
            ));
        }
        if !uses.contains(&item.id) {
            uses.push(item.id);
        }
    }
    uses.sort();
    Ok(uses)
}

/// The user item a resolved relation name (`"public"."t"`) refers to.
pub(crate) fn user_item<'a>(
    catalog: &'a dyn PlanCatalog,
    name: &ObjectName,
) -> Option<&'a CatalogItem> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|part| part.as_ident().map(|ident| ident.value.clone()))
        .collect();
    catalog.item_by_name(&crate::planner::fully_qualified(&parts)?)
}

/// How deep views may nest in one another.
const MAX_VIEW_DEPTH: usize = 64;

/// Replaces every plain view a resolved statement reads by its query, as a
/// subquery under the view's name (or the alias it was given), recursively.
pub fn inline_views(
    catalog: &dyn PlanCatalog,
    mut statement: sqlparser::ast::Statement,
) -> Result<sqlparser::ast::Statement, PlanError> {
    struct Inliner<'a> {
        catalog: &'a dyn PlanCatalog,
        depth: usize,
        error: Option<PlanError>,
    }
    impl VisitorMut for Inliner<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            let TableFactor::Table { name, alias, .. } = factor else {
                return ControlFlow::Continue(());
            };
            let Some(item) = user_item(self.catalog, name) else {
                return ControlFlow::Continue(());
            };
            let ItemDefinition::View(view) = &item.definition else {
                return ControlFlow::Continue(());
            };
            match self.expand(view, &item.name.item, alias.take()) {
                Ok(derived) => {
                    *factor = derived;
                    ControlFlow::Continue(())
                }
                Err(error) => {
                    self.error = Some(error);
                    ControlFlow::Break(())
                }
            }
        }
    }
    impl Inliner<'_> {
        fn expand(
            &self,
            view: &ViewDefinition,
            view_name: &str,
            alias: Option<TableAlias>,
        ) -> Result<TableFactor, PlanError> {
            if self.depth >= MAX_VIEW_DEPTH {
                return Err(PlanError::invalid("views are nested too deeply"));
            }
            let parsed = floe_sql_parser::parser::parse_statement(&view.query).map_err(|e| {
                PlanError::new(SqlState::INTERNAL_ERROR, format!("stored view query: {e}"))
            })?;
            let floe_sql_parser::ast::Statement::Standard(statement) = parsed else {
                return Err(PlanError::new(
                    SqlState::INTERNAL_ERROR,
                    "a stored view is not a query",
                ));
            };
            let mut inner = Inliner {
                catalog: self.catalog,
                depth: self.depth + 1,
                error: None,
            };
            let mut statement = *statement;
            crate::alter_table::pin_table_versions(
                self.catalog,
                &mut statement,
                &view.table_versions,
            );
            let _ = VisitMut::visit(&mut statement, &mut inner);
            if let Some(error) = inner.error {
                return Err(error);
            }
            let sqlparser::ast::Statement::Query(subquery) = statement else {
                return Err(PlanError::new(
                    SqlState::INTERNAL_ERROR,
                    "a stored view is not a query",
                ));
            };
            let alias = alias.unwrap_or(TableAlias {
                explicit: true,
                name: Ident::with_quote('"', view_name),
                columns: Vec::new(),
                at: None,
            });
            Ok(TableFactor::Derived {
                lateral: false,
                subquery,
                alias: Some(alias),
                sample: None,
            })
        }
    }
    use sqlparser::ast::VisitMut;
    let mut inliner = Inliner {
        catalog,
        depth: 0,
        error: None,
    };
    let _ = VisitMut::visit(&mut statement, &mut inliner);
    match inliner.error {
        Some(error) => Err(error),
        None => Ok(statement),
    }
}
