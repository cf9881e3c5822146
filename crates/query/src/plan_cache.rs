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
//! A statement with `$n` parameters is kept too when it is run through
//! [`run_with_parameters`]: its plan reads each parameter from a cell it owns
//! ([`crate::parameter`]), so one plan serves every value. Such a plan is lent to
//! one run at a time (the cell holds that run's values); a run that finds it and
//! its copies lent plans its own, kept as another copy (up to [`MAX_COPIES`]).
//!
//! Plans are keyed by the statement (the resolved statement floe hands the
//! engine: names are qualified and views inlined, so a change of search path
//! or a replaced view is another key) under the catalog's revision: any catalog
//! change starts an empty cache. A hit is checked against the session's tables
//! (a transaction may hold a table as it was before a change), and each run
//! starts from a copy of the plan without the state of earlier runs
//! ([`reset_plan_states`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility, WindowFunctionDefinition};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use floe_repr::{ColumnDesc, Row};

use crate::QueryError;
use crate::parameter::{PARAMETER_FUNCTION, ParameterValues, read_parameters};
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
    /// Where a plan of a statement with parameters reads their values.
    parameters: Option<Arc<ParameterValues>>,
    /// Whether a run holds the plan (one with parameters runs one at a time).
    lent: AtomicBool,
    /// Copies of a plan with parameters, for runs that find it lent (connections of
    /// a pool running one statement at once); the kept plan holds them.
    copies: Mutex<Vec<Arc<CachedPlan>>>,
}

/// A plan with parameters, lent to one run: given back when dropped.
struct Lent(Arc<CachedPlan>);

impl Drop for Lent {
    fn drop(&mut self) {
        self.0.lent.store(false, Ordering::Release);
    }
}

/// How many plans of one statement with parameters are kept, for runs at once.
const MAX_COPIES: usize = 8;

impl CachedPlan {
    /// The plan, or a copy of it, that no run holds, lent to the caller.
    fn lend(self: &Arc<Self>) -> Option<Lent> {
        if !self.lent.swap(true, Ordering::Acquire) {
            return Some(Lent(self.clone()));
        }
        let copies = self.copies.lock().ok()?;
        let free = copies
            .iter()
            .find(|copy| !copy.lent.swap(true, Ordering::Acquire))?;
        Some(Lent(free.clone()))
    }

    /// Keeps `copy` of the plan for runs that find it lent (up to [`MAX_COPIES`]).
    fn keep_copy(&self, copy: Arc<CachedPlan>) {
        if let Ok(mut copies) = self.copies.lock()
            && copies.len() + 1 < MAX_COPIES
        {
            copies.push(copy);
        }
    }

    /// A copy of the plan to run, without any state an earlier run left.
    pub fn to_run(&self) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        reset_plan_states(self.physical.clone())
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
    /// Counts lookups, to tell the least recently used entry.
    clock: u64,
    plans: Kept<CachedPlan>,
    descriptions: Kept<Description>,
}

/// What a statement's Describe answered: its columns and its parameters' types.
/// Kept apart from plans, since a statement is described with its `$n` untyped
/// and run with them cast to the types its values are bound in.
#[derive(Debug)]
pub struct Description {
    pub columns: Vec<ColumnDesc>,
    pub parameters: Vec<Option<floe_repr::PgType>>,
    tables: Vec<(TableName, SchemaRef)>,
}

/// Something kept for the tables it was made for.
trait MadeFor {
    fn tables(&self) -> &[(TableName, SchemaRef)];

    /// Whether the session's tables are the ones it was made for.
    fn fits(&self, snapshot: &Snapshot) -> bool {
        self.tables()
            .iter()
            .all(|(name, schema)| snapshot.schema(name).is_some_and(|held| held == *schema))
    }
}

impl MadeFor for CachedPlan {
    fn tables(&self) -> &[(TableName, SchemaRef)] {
        &self.tables
    }
}

impl MadeFor for Description {
    fn tables(&self) -> &[(TableName, SchemaRef)] {
        &self.tables
    }
}

/// Entries by statement, each with the clock of its last use.
#[derive(Debug)]
struct Kept<T>(HashMap<sqlparser::ast::Statement, (Arc<T>, u64)>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(HashMap::new())
    }
}

impl<T: MadeFor> Kept<T> {
    fn get(
        &mut self,
        statement: &sqlparser::ast::Statement,
        clock: u64,
        snapshot: &Snapshot,
    ) -> Option<Arc<T>> {
        let (kept, used) = self.0.get_mut(statement)?;
        *used = clock;
        kept.fits(snapshot).then(|| kept.clone())
    }

    /// Keeps `value`; the least recently used entry makes room when full.
    fn insert(&mut self, statement: sqlparser::ast::Statement, value: Arc<T>, clock: u64) {
        if self.0.len() >= CAPACITY
            && let Some(oldest) = self
                .0
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(statement, _)| statement.clone())
        {
            self.0.remove(&oldest);
        }
        self.0.insert(statement, (value, clock));
    }
}

impl Entries {
    /// The entries for the catalog at `revision`: `None` for an older one, whose
    /// entries would never be used again. A newer one starts empty.
    fn at(&mut self, revision: u64) -> Option<&mut Entries> {
        if revision < self.revision {
            return None;
        }
        if revision > self.revision {
            *self = Entries {
                revision,
                clock: self.clock,
                ..Entries::default()
            };
        }
        self.clock += 1;
        Some(self)
    }
}

impl PlanCache {
    /// The plan kept for `statement` at the catalog revision of the session of
    /// `snapshot`, if it fits that session's tables.
    pub fn get(
        &self,
        statement: &sqlparser::ast::Statement,
        snapshot: &Snapshot,
    ) -> Option<Arc<CachedPlan>> {
        let mut entries = self.entries.lock().ok()?;
        let entries = entries.at(snapshot.revision())?;
        let clock = entries.clock;
        entries.plans.get(statement, clock, snapshot)
    }

    /// Keeps `plan` for `statement`, planned in the session of `snapshot`.
    pub fn insert(
        &self,
        statement: sqlparser::ast::Statement,
        snapshot: &Snapshot,
        plan: CachedPlan,
    ) {
        self.insert_shared(statement, snapshot, Arc::new(plan));
    }

    fn insert_shared(
        &self,
        statement: sqlparser::ast::Statement,
        snapshot: &Snapshot,
        plan: Arc<CachedPlan>,
    ) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if let Some(entries) = entries.at(snapshot.revision()) {
            let clock = entries.clock;
            entries.plans.insert(statement, plan, clock);
        }
    }

    /// What Describe answered for `statement` at the catalog revision of the
    /// session of `snapshot`, if it fits that session's tables.
    pub fn description(
        &self,
        statement: &sqlparser::ast::Statement,
        snapshot: &Snapshot,
    ) -> Option<Arc<Description>> {
        let mut entries = self.entries.lock().ok()?;
        let entries = entries.at(snapshot.revision())?;
        let clock = entries.clock;
        entries.descriptions.get(statement, clock, snapshot)
    }

    /// Keeps what Describe answered for `statement`, planned as `plan` (not yet
    /// optimized) in the session of `snapshot`: its columns and its parameters'
    /// types. Not kept when the plan reads anything but tables through relational
    /// operators (a subquery's tables are not known before it is optimized).
    pub fn keep_description(
        &self,
        statement: sqlparser::ast::Statement,
        snapshot: &Snapshot,
        plan: &LogicalPlan,
        columns: Vec<ColumnDesc>,
        parameters: Vec<Option<floe_repr::PgType>>,
    ) {
        let Some(tables) = snapshot_tables(plan) else {
            return;
        };
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if let Some(entries) = entries.at(snapshot.revision()) {
            let description = Description {
                columns,
                parameters,
                tables,
            };
            let clock = entries.clock;
            entries
                .descriptions
                .insert(statement, Arc::new(description), clock);
        }
    }

    /// How many statements ran on a kept plan.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many plans are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .map_or(0, |entries| entries.plans.0.len())
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
    if let Some(kept) = cache.get(&statement, &snapshot)
        && kept.parameters.is_none()
    {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        let physical = kept.to_run().map_err(QueryError::from_datafusion)?;
        let rows = crate::run(context, physical, &kept.fields).await?;
        return Ok((kept.columns.clone(), rows));
    }
    let mut rewritten = statement.clone();
    rewrite(&mut rewritten);
    let mut query = crate::plan(context, rewritten).await?;
    let planned = physical_plan_scaled(context, &mut query).await?;
    if let Some(keep) = keepable(&query, &planned, None) {
        cache.insert(statement, &snapshot, keep);
    }
    let rows = crate::run(context, planned.physical, &planned.fields).await?;
    Ok((query.columns, rows))
}

/// Runs a query statement whose `$n` parameters have the types `types` and, this
/// time, the values `values` (each of its parameter's type; NULL as a typed null).
/// On the plan kept for the statement when it is free and fits the session; else
/// planned with the parameters read when it runs, and kept when it may run again.
/// `None` when the statement cannot be planned that way (a parameter where the
/// engine needs a value when it plans, as in `LIMIT`, or typed otherwise by its
/// place): the caller binds the values into it instead, which also reports the
/// statement's errors.
pub async fn run_with_parameters(
    context: &SessionContext,
    cache: &PlanCache,
    statement: sqlparser::ast::Statement,
    types: &[DataType],
    values: Vec<ScalarValue>,
    rewrite: fn(&mut sqlparser::ast::Statement),
) -> Result<Option<(Vec<ColumnDesc>, Vec<Row>)>, QueryError> {
    let snapshot = snapshot_of(context);
    let kept = cache
        .get(&statement, &snapshot)
        .filter(|kept| kept.parameters.is_some());
    if let Some(lent) = kept.as_ref().and_then(CachedPlan::lend)
        && let Some(parameters) = &lent.0.parameters
    {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        parameters.set(values);
        let physical = lent.0.to_run().map_err(QueryError::from_datafusion)?;
        let rows = crate::run(context, physical, &lent.0.fields).await?;
        return Ok(Some((lent.0.columns.clone(), rows)));
    }
    let mut rewritten = statement.clone();
    rewrite(&mut rewritten);
    let Ok(mut query) = crate::plan(context, rewritten).await else {
        return Ok(None);
    };
    let parameters = Arc::new(ParameterValues::default());
    let Ok(plan) = read_parameters(query.plan, types, &parameters) else {
        return Ok(None);
    };
    query.plan = plan;
    // The cell stays empty while the plan is made: the engine evaluates what
    // looks constant when it plans (an `IN` list becomes a fixed set), and a
    // parameter must fail there, so that nothing of one run's values stays in
    // the plan.
    let Ok(planned) = physical_plan_scaled(context, &mut query).await else {
        return Ok(None);
    };
    parameters.set(values);
    // Lent to this run from the start; a copy of the kept plan when that one was
    // lent to another run.
    let lent = keepable(&query, &planned, Some(parameters)).map(|plan| {
        plan.lent.store(true, Ordering::Relaxed);
        let plan = Arc::new(plan);
        match &kept {
            Some(kept) => kept.keep_copy(plan.clone()),
            None => cache.insert_shared(statement, &snapshot, plan.clone()),
        }
        Lent(plan)
    });
    let rows = crate::run(context, planned.physical, &planned.fields).await?;
    drop(lent);
    Ok(Some((query.columns, rows)))
}

/// The physical plan of `query` with PostgreSQL's display scales (see
/// [`crate::display_scale`]), which `query`'s plan becomes; of `query` as it
/// is where the engine does not plan the rewritten plan, so that a rewrite it
/// refuses costs trailing zeros, not the answer.
async fn physical_plan_scaled(
    context: &SessionContext,
    query: &mut crate::Query,
) -> Result<crate::PhysicalPlan, QueryError> {
    if let Some(plan) = crate::display_scale::apply(&query.plan) {
        let scaled = crate::Query {
            plan,
            columns: query.columns.clone(),
        };
        if let Ok(planned) = crate::physical_plan(context, &scaled).await
            && !prints_floats_as_numerics(&query.columns, &planned.fields)
        {
            *query = scaled;
            return Ok(planned);
        }
    }
    crate::physical_plan(context, query).await
}

/// Whether a rewritten plan prints as numeric text a column its query
/// describes as a float: a CASE of an integer and a float (typed by its first
/// result while floe chose its operators) that the rewrite took for a numeric.
/// Its rows would not be the type the client was told.
fn prints_floats_as_numerics(columns: &[floe_repr::ColumnDesc], fields: &[Field]) -> bool {
    use floe_repr::PgType;
    columns.iter().zip(fields).any(|(column, field)| {
        matches!(column.pg_type, PgType::Float4 | PgType::Float8)
            && floe_arrow::pg_type_of(field) == PgType::Numeric
    })
}

/// The plan to keep for `query`, planned as `planned`, when it may be kept (see
/// the module documentation). `parameters`: where the plan reads its `$n`, if it
/// has any.
fn keepable(
    query: &crate::Query,
    planned: &crate::PhysicalPlan,
    parameters: Option<Arc<ParameterValues>>,
) -> Option<CachedPlan> {
    if !same_whenever_run(&query.plan) {
        return None;
    }
    let tables = snapshot_tables(&planned.optimized)?;
    Some(CachedPlan {
        physical: planned.physical.clone(),
        columns: query.columns.clone(),
        fields: planned.fields.clone(),
        tables,
        parameters,
        lent: AtomicBool::new(false),
        copies: Mutex::default(),
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
                // Read from the plan's own cell, filled before each run.
                || function.func.name() == PARAMETER_FUNCTION
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

    use datafusion::common::ScalarValue;

    use super::PlanCache;
    use crate::snapshot::{ReadyBatches, TableRows, register_table, snapshot_of};
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
            batches: Arc::new(ReadyBatches(vec![
                RecordBatch::try_new(schema, arrays).unwrap(),
            ])),
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

    /// Runs `sql`, whose `$n` are integers, with `values` (`None` is NULL).
    async fn run_with(
        cache: &PlanCache,
        context: &SessionContext,
        sql: &str,
        values: &[Option<i32>],
    ) -> Vec<Vec<String>> {
        let values = values.iter().map(|v| ScalarValue::Int32(*v)).collect();
        let types = vec![DataType::Int32; 3];
        let (_, rows) =
            super::run_with_parameters(context, cache, statement(sql), &types, values, |_| {})
                .await
                .unwrap_or_else(|e| panic!("{sql}: {}", e.message))
                .unwrap_or_else(|| panic!("{sql} was not planned with its parameters"));
        rows.iter()
            .map(|row| row.iter().map(floe_repr::format_datum).collect())
            .collect()
    }

    #[tokio::test]
    async fn one_plan_serves_every_value_of_a_parameter() {
        let cache = PlanCache::default();
        let context = session(1, &["a"], &[1, 2, 3, 4]);
        let sql = "SELECT a, a * $2 FROM public.t WHERE a >= $1 ORDER BY a";
        let first = run_with(&cache, &context, sql, &[Some(3), Some(10)]).await;
        assert_eq!(first, vec![vec!["3", "30"], vec!["4", "40"]]);
        let second = run_with(&cache, &context, sql, &[Some(2), Some(-1)]).await;
        assert_eq!(
            second,
            vec![vec!["2", "-2"], vec!["3", "-3"], vec!["4", "-4"]]
        );
        // An `IN` list of parameters is not made a fixed set of the first values.
        let in_list = "SELECT a FROM public.t WHERE -a IN (-$1, NULL::int, NULL::int) ORDER BY a";
        let rows = run_with(&cache, &context, in_list, &[Some(1)]).await;
        assert_eq!(rows, vec![vec!["1"]]);
        let rows = run_with(&cache, &context, in_list, &[Some(4)]).await;
        assert_eq!(rows, vec![vec!["4"]]);
        // NULL compares as NULL: no row, then every row again.
        let null = run_with(&cache, &context, sql, &[None, Some(1)]).await;
        assert!(null.is_empty(), "{null:?}");
        let all = run_with(&cache, &context, sql, &[Some(i32::MIN), Some(0)]).await;
        assert_eq!(all.len(), 4);
        assert_eq!((cache.len(), cache.hits()), (2, 4));
        // Another session's rows, the same plan.
        let other = run_with(&cache, &session(1, &["a"], &[7]), sql, &[Some(5), Some(2)]).await;
        assert_eq!(other, vec![vec!["7", "14"]]);
        assert_eq!(cache.hits(), 5);
        // In a subquery and in the select list.
        let sql = "SELECT $1 + 1, (SELECT count(*) FROM public.t WHERE a > $1)";
        assert_eq!(
            run_with(&cache, &context, sql, &[Some(1)]).await,
            vec![vec!["2", "3"]]
        );
        assert_eq!(
            run_with(&cache, &context, sql, &[Some(3)]).await,
            vec![vec!["4", "1"]]
        );
    }

    #[tokio::test]
    async fn a_plan_lent_to_a_run_is_not_lent_to_another() {
        let cache = PlanCache::default();
        let context = session(1, &["a"], &[1, 2, 3]);
        let sql = "SELECT count(*) FROM public.t WHERE a > $1";
        run_with(&cache, &context, sql, &[Some(0)]).await;
        let kept = cache.get(&statement(sql), &snapshot_of(&context)).unwrap();
        kept.lent.store(true, std::sync::atomic::Ordering::SeqCst);
        // Planned again for this run, with its own values.
        let rows = run_with(&cache, &context, sql, &[Some(1)]).await;
        assert_eq!(rows, vec![vec!["2"]]);
        assert_eq!(cache.hits(), 0);
        // That plan was kept as a copy, and is given back after its run.
        let rows = run_with(&cache, &context, sql, &[Some(2)]).await;
        assert_eq!(rows, vec![vec!["1"]]);
        assert_eq!(cache.hits(), 1);
        // Runs at once, as many as the copies kept, each on a plan of its own.
        kept.lent.store(false, std::sync::atomic::Ordering::SeqCst);
        let values: Vec<[Option<i32>; 1]> = (0..super::MAX_COPIES as i32)
            .map(|n| [Some(n % 3)])
            .collect();
        let runs = values.iter().map(|v| run_with(&cache, &context, sql, v));
        let answers = futures::future::join_all(runs).await;
        for (n, rows) in answers.iter().enumerate() {
            assert_eq!(rows, &vec![vec![(3 - n % 3).to_string()]], "run {n}");
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
