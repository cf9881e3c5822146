//! Physical plans kept for statements that run again.
//!
//! Planning a small query (the engine's SQL planner, analyzer, optimizer and
//! physical planner) costs several times what running it does, and clients send
//! the same statements again and again (drivers' catalog lookups, an
//! application's queries, a dashboard's refresh). A plan is kept when it means
//! the same whenever it runs:
//! - it reads tables only through [`crate::snapshot`], so it holds no rows and
//!   reads the snapshot of the session that runs it;
//! - every function it calls is immutable (or fixed for the life of the process,
//!   as `version()` is): `now()`, `mz_now()`, `random()` and
//!   the catalog functions (`current_user`, `pg_table_is_visible`, ...) are folded
//!   or bound when planned, so a plan that calls one is not kept;
//! - no subquery is left for [`crate::subquery`] to run (its calls hold the
//!   session they were planned in), and it is no recursive query (its work
//!   table is state), holds no `$n` parameter and no large `VALUES` list.
//!
//! Plans are keyed by the statement (the resolved statement floe hands the
//! engine: names are qualified and views inlined, so a change of search path
//! or a replaced view is another key) under the catalog's revision: any catalog
//! change starts an empty cache. A hit is checked against the session's tables
//! (a transaction may hold a table as it was before a change), and each run
//! starts from a copy of the plan without the state of earlier runs
//! ([`reset_plan_states`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility, WindowFunctionDefinition};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use floe_repr::{ColumnDesc, Row};

use crate::QueryError;
use crate::snapshot::{Snapshot, SnapshotTable, TableName, snapshot_of};

/// How many plans are kept: the least recently used one makes room.
const CAPACITY: usize = 256;

/// The most rows a kept plan's `VALUES` lists may hold: a plan holds them.
const MAX_VALUES_ROWS: usize = 64;

/// A plan ready to run again.
#[derive(Debug)]
pub struct CachedPlan {
    physical: Arc<dyn ExecutionPlan>,
    pub columns: Vec<ColumnDesc>,
    /// The output's fields, which type its conversion to rows.
    pub fields: Vec<Field>,
    /// The tables it reads and the schema each had when planned.
    tables: Vec<(TableName, SchemaRef)>,
}

impl CachedPlan {
    /// A copy of the plan to run, without any state an earlier run left.
    pub fn to_run(&self) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        reset_plan_states(self.physical.clone())
    }

    /// Whether the session's tables are the ones the plan was made for.
    fn fits(&self, snapshot: &Snapshot) -> bool {
        self.tables
            .iter()
            .all(|(name, schema)| snapshot.schema(name).is_some_and(|held| held == *schema))
    }
}

/// The kept plans of a server.
#[derive(Debug, Default)]
pub struct PlanCache {
    entries: Mutex<Entries>,
    /// How many statements ran on a kept plan.
    hits: AtomicU64,
}

#[derive(Debug, Default)]
struct Entries {
    /// The catalog revision the plans were made at.
    revision: u64,
    /// Counts lookups, to tell the least recently used plan.
    clock: u64,
    plans: HashMap<sqlparser::ast::Statement, (Arc<CachedPlan>, u64)>,
}

impl PlanCache {
    /// The plan kept for `statement` at the catalog revision of the session of
    /// `snapshot`, if it fits that session's tables.
    pub fn get(
        &self,
        statement: &sqlparser::ast::Statement,
        snapshot: &Snapshot,
    ) -> Option<Arc<CachedPlan>> {
        let revision = snapshot.revision();
        let mut entries = self.entries.lock().ok()?;
        if entries.revision != revision {
            return None;
        }
        entries.clock += 1;
        let clock = entries.clock;
        let (plan, used) = entries.plans.get_mut(statement)?;
        *used = clock;
        let plan = plan.clone();
        plan.fits(snapshot).then_some(plan)
    }

    /// Keeps `plan` for `statement`, planned in the session of `snapshot`.
    pub fn insert(
        &self,
        statement: sqlparser::ast::Statement,
        snapshot: &Snapshot,
        plan: CachedPlan,
    ) {
        let revision = snapshot.revision();
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        // A plan of an older catalog would never be used again.
        if revision < entries.revision {
            return;
        }
        if revision > entries.revision {
            entries.plans.clear();
            entries.revision = revision;
        }
        if entries.plans.len() >= CAPACITY
            && let Some(oldest) = entries
                .plans
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(statement, _)| statement.clone())
        {
            entries.plans.remove(&oldest);
        }
        let clock = entries.clock;
        entries.plans.insert(statement, (Arc::new(plan), clock));
    }

    /// How many statements ran on a kept plan.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many plans are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map_or(0, |entries| entries.plans.len())
    }
}

/// Runs a query statement in `context`: on the plan kept for it when one fits the
/// session, else planned (after `rewrite`, the caller's own spellings) and the
/// plan kept when it may run again. Returns the columns and the rows.
pub async fn run(
    context: &SessionContext,
    cache: &PlanCache,
    statement: sqlparser::ast::Statement,
    rewrite: fn(&mut sqlparser::ast::Statement),
) -> Result<(Vec<ColumnDesc>, Vec<Row>), QueryError> {
    let snapshot = snapshot_of(context);
    if let Some(kept) = cache.get(&statement, &snapshot) {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        let physical = kept.to_run().map_err(QueryError::from_datafusion)?;
        let rows = crate::run(context, physical, &kept.fields).await?;
        return Ok((kept.columns.clone(), rows));
    }
    let mut rewritten = statement.clone();
    rewrite(&mut rewritten);
    let query = crate::plan(context, rewritten).await?;
    let planned = crate::physical_plan(context, &query).await?;
    if let Some(keep) = keepable(&query, &planned) {
        cache.insert(statement, &snapshot, keep);
    }
    let rows = crate::run(context, planned.physical, &planned.fields).await?;
    Ok((query.columns, rows))
}

/// The plan to keep for `query`, planned as `planned`, when it may be kept (see
/// the module documentation).
fn keepable(query: &crate::Query, planned: &crate::PhysicalPlan) -> Option<CachedPlan> {
    if !same_whenever_run(&query.plan) {
        return None;
    }
    let tables = snapshot_tables(&planned.optimized)?;
    Some(CachedPlan {
        physical: planned.physical.clone(),
        columns: query.columns.clone(),
        fields: planned.fields.clone(),
        tables,
    })
}

/// Whether every function `plan` calls (its subqueries' included) is immutable
/// and it holds no parameter or session variable.
fn same_whenever_run(plan: &LogicalPlan) -> bool {
    let mut same = true;
    let _ = plan.apply_with_subqueries(|node| {
        same = !any_expression(node, |expr| !expression_is_fixed(expr));
        Ok(if same {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    same
}

/// Whether `predicate` holds for an expression of `node` or a part of one.
fn any_expression(node: &LogicalPlan, mut predicate: impl FnMut(&Expr) -> bool) -> bool {
    let mut found = false;
    let _ = node.apply_expressions(|expr| {
        found = expr.exists(|part| Ok(predicate(part)))?;
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

fn expression_is_fixed(expr: &Expr) -> bool {
    let immutable = |volatility: Volatility| volatility == Volatility::Immutable;
    match expr {
        Expr::ScalarFunction(function) => {
            immutable(function.func.signature().volatility)
                || crate::functions::system::FIXED_FOR_THE_PROCESS.contains(&function.func.name())
        }
        Expr::AggregateFunction(function) => immutable(function.func.signature().volatility),
        Expr::WindowFunction(window) => match &window.fun {
            WindowFunctionDefinition::AggregateUDF(function) => {
                immutable(function.signature().volatility)
            }
            WindowFunctionDefinition::WindowUDF(function) => {
                immutable(function.signature().volatility)
            }
        },
        Expr::Placeholder(_) | Expr::ScalarVariable(..) => false,
        _ => true,
    }
}

/// The tables an optimized plan reads and their schemas, when it is made only
/// of relational operators over snapshot tables, with no subquery left.
fn snapshot_tables(plan: &LogicalPlan) -> Option<Vec<(TableName, SchemaRef)>> {
    let mut tables = Vec::new();
    let mut keepable = true;
    let _ = plan.apply(|node| {
        keepable = match node {
            LogicalPlan::TableScan(scan) => match source_as_provider(&scan.source) {
                Ok(provider) => match snapshot_table(provider.as_ref()) {
                    Some(table) => {
                        tables.push((table.name.clone(), table.schema.clone()));
                        true
                    }
                    None => false,
                },
                Err(_) => false,
            },
            LogicalPlan::Values(values) => values.values.len() <= MAX_VALUES_ROWS,
            LogicalPlan::Projection(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Window(_)
            | LogicalPlan::Aggregate(_)
            | LogicalPlan::Sort(_)
            | LogicalPlan::Join(_)
            | LogicalPlan::Repartition(_)
            | LogicalPlan::Union(_)
            | LogicalPlan::EmptyRelation(_)
            | LogicalPlan::SubqueryAlias(_)
            | LogicalPlan::Limit(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::Unnest(_) => !holds_subquery(node),
            _ => false,
        };
        Ok(if keepable {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    keepable.then_some(tables)
}

fn snapshot_table(provider: &dyn TableProvider) -> Option<&SnapshotTable> {
    (provider as &dyn std::any::Any).downcast_ref::<SnapshotTable>()
}

/// Whether an expression of `node` holds a subquery.
fn holds_subquery(node: &LogicalPlan) -> bool {
    any_expression(node, |expr| {
        matches!(
            expr,
            Expr::ScalarSubquery(_)
                | Expr::Exists(_)
                | Expr::InSubquery(_)
                | Expr::SetComparison(_)
                | Expr::OuterReferenceColumn(..)
        )
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    use datafusion::arrow::array::{ArrayRef, Int32Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::catalog::{
        CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemoryCatalogProviderList,
        MemorySchemaProvider,
    };
    use datafusion::execution::context::SessionContext;

    use super::PlanCache;
    use crate::snapshot::{TableRows, register_table};
    use crate::{DATABASE, Engine};

    /// A session at catalog `revision` whose table `t` holds `values` in its
    /// columns `columns` (each row repeats the value).
    fn session(revision: u64, columns: &[&str], values: &[i32]) -> SessionContext {
        let catalog = Arc::new(MemoryCatalogProvider::new());
        catalog
            .register_schema("public", Arc::new(MemorySchemaProvider::new()))
            .unwrap();
        let list = Arc::new(MemoryCatalogProviderList::new());
        list.register_catalog(DATABASE.into(), catalog as Arc<dyn CatalogProvider>);
        let context = Engine::new().context(list as Arc<dyn CatalogProviderList>);
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|name| Field::new(*name, DataType::Int32, true))
                .collect::<Vec<_>>(),
        ));
        let arrays: Vec<ArrayRef> = columns
            .iter()
            .map(|_| Arc::new(Int32Array::from(values.to_vec())) as ArrayRef)
            .collect();
        let rows = TableRows {
            schema: schema.clone(),
            batches: vec![RecordBatch::try_new(schema, arrays).unwrap()],
            scans: Arc::new(AtomicU64::new(0)),
        };
        register_table(&context, DATABASE, ("public".into(), "t".into()), rows).unwrap();
        crate::snapshot::snapshot_of(&context).set_revision(revision);
        context
    }

    fn statement(sql: &str) -> sqlparser::ast::Statement {
        sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut parser| parser.parse_statement())
            .unwrap()
    }

    /// Runs `sql` in `context`; the rows as PostgreSQL prints them.
    async fn run(cache: &PlanCache, context: &SessionContext, sql: &str) -> Vec<Vec<String>> {
        let (_, rows) = super::run(context, cache, statement(sql), |_| {})
            .await
            .unwrap_or_else(|e| panic!("{sql}: {}", e.message));
        rows.iter()
            .map(|row| row.iter().map(floe_repr::format_datum).collect())
            .collect()
    }

    #[tokio::test]
    async fn a_kept_plan_reads_the_rows_of_the_session_that_runs_it() {
        let cache = PlanCache::default();
        let sql = "SELECT count(*), sum(a) FROM public.t WHERE a > 1";
        let first = run(&cache, &session(1, &["a"], &[1, 2, 3]), sql).await;
        assert_eq!(first, vec![vec!["2", "5"]]);
        assert_eq!((cache.len(), cache.hits()), (1, 0));
        let second = run(&cache, &session(1, &["a"], &[2, 3, 4, 5]), sql).await;
        assert_eq!(second, vec![vec!["4", "14"]]);
        assert_eq!(cache.hits(), 1, "the second run used the kept plan");
        // A count the optimizer could answer from the table's size when planned.
        let sql = "SELECT count(*) FROM public.t";
        run(&cache, &session(1, &["a"], &[1, 2, 3]), sql).await;
        let count = run(&cache, &session(1, &["a"], &[1]), sql).await;
        assert_eq!(count, vec![vec!["1"]]);
        assert_eq!(cache.hits(), 2);
        // A join and a sort, run twice: no state of the first run is left.
        let sql = "SELECT x.a, y.a FROM public.t x JOIN public.t y ON x.a = y.a + 1 ORDER BY 1";
        let context = session(1, &["a"], &[1, 2, 3]);
        let first = run(&cache, &context, sql).await;
        let second = run(&cache, &session(1, &["a"], &[5, 6]), sql).await;
        assert_eq!(first, vec![vec!["2", "1"], vec!["3", "2"]]);
        assert_eq!(second, vec![vec!["6", "5"]]);
        assert_eq!(cache.hits(), 3);
    }

    #[tokio::test]
    async fn another_catalog_revision_or_table_shape_plans_again() {
        let cache = PlanCache::default();
        let sql = "SELECT * FROM public.t";
        run(&cache, &session(1, &["a"], &[1]), sql).await;
        // The catalog changed: the kept plans are of no use.
        let rows = run(&cache, &session(2, &["a", "b"], &[7]), sql).await;
        assert_eq!(rows, vec![vec!["7", "7"]]);
        assert_eq!(cache.hits(), 0);
        // A session holding the table as it was (a transaction's first read).
        let rows = run(&cache, &session(2, &["a"], &[8]), sql).await;
        assert_eq!(rows, vec![vec!["8"]]);
        assert_eq!(cache.hits(), 0);
        // A plan made before a change is not kept under the new revision.
        let late = PlanCache::default();
        run(&late, &session(3, &["a"], &[1]), sql).await;
        run(&late, &session(2, &["a"], &[1]), sql).await;
        run(&late, &session(3, &["a"], &[1]), sql).await;
        assert_eq!(late.hits(), 1);
    }

    #[tokio::test]
    async fn plans_that_would_not_mean_the_same_later_are_not_kept() {
        for sql in [
            "SELECT now()",
            "SELECT a, random() FROM public.t",
            "SELECT mz_now()",
            // Left for `subquery` to run: its calls hold the planning session.
            "SELECT a, (SELECT count(*) FROM public.t y WHERE y.a < x.a) FROM public.t x",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) \
             SELECT n FROM r",
        ] {
            let cache = PlanCache::default();
            let context = session(1, &["a"], &[1, 2]);
            run(&cache, &context, sql).await;
            assert_eq!(cache.len(), 0, "{sql} was kept");
        }
        for sql in [
            "SELECT 1",
            "SELECT version()",
            "SELECT a FROM public.t WHERE a IN (SELECT a FROM public.t WHERE a > 1)",
            "SELECT a, row_number() OVER (ORDER BY a) FROM public.t",
        ] {
            let cache = PlanCache::default();
            run(&cache, &session(1, &["a"], &[1, 2]), sql).await;
            assert_eq!(cache.len(), 1, "{sql} was not kept");
        }
    }

    #[tokio::test]
    async fn the_least_recently_used_plan_makes_room() {
        let cache = PlanCache::default();
        let context = session(1, &["a"], &[1]);
        run(&cache, &context, "SELECT 0").await;
        for n in 1..super::CAPACITY {
            run(&cache, &context, &format!("SELECT {n}")).await;
        }
        run(&cache, &context, "SELECT 0").await;
        assert_eq!((cache.len(), cache.hits()), (super::CAPACITY, 1));
        run(&cache, &context, "SELECT -1").await;
        assert_eq!(cache.len(), super::CAPACITY);
        // `SELECT 1` was the oldest used: gone; `SELECT 0` stays.
        run(&cache, &context, "SELECT 0").await;
        run(&cache, &context, "SELECT 1").await;
        assert_eq!(cache.hits(), 2);
    }
}
