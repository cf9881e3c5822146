//! Queries that mean what they mean in PostgreSQL and Materialize, executed
//! by DataFusion.
//!
//! DataFusion plans and runs every query, but its names, types, casts,
//! operators and errors are its own. This crate stands between floe's parser
//! and DataFusion and makes a statement mean what Postgres says it means:
//!
//! - [`rewrite`] rewrites the parsed statement before DataFusion sees it:
//!   literals typed as Postgres types them (`1` is `integer`), output
//!   columns named as Postgres names them ([`naming`]), set-returning
//!   functions turned into what DataFusion runs, Postgres' checks that
//!   DataFusion does not make (a subquery used as an expression returns one
//!   column).
//! - [`types`] plans Postgres' and Materialize's type names (`jsonb`,
//!   `int list`, `map[text=>int]`, `uint4`, ranges) to Arrow fields that carry
//!   floe's SQL type in their metadata.
//! - [`semantics`] is an analyzer rule over DataFusion's logical plan: casts
//!   with Postgres' rules and messages, integer arithmetic that fails on
//!   overflow, operators on floe's types.
//! - [`jsonb_keys`] is an analyzer rule that groups, joins and compares
//!   jsonb by value (`1.5` and `1.50` are one number) where DataFusion
//!   would compare the text.
//! - [`functions`] holds the functions Postgres and Materialize have and
//!   DataFusion lacks or defines differently.
//! - [`subquery`] runs the correlated subqueries DataFusion cannot
//!   decorrelate, once per distinct set of outer values.
//! - [`error`] turns DataFusion's errors into Postgres' SQLSTATEs and texts.
//!
//! [`Engine`] holds a session template with all of that registered; a query
//! takes a cheap copy of it with the catalog it reads.

mod aggregate_subquery;
mod case_types;
pub mod display_scale;
pub mod error;
mod failed_decorrelation;
pub mod function_row;
pub mod functions;
mod hidden_recursion;
mod json_record;
pub mod jsonb_keys;
mod lateral;
pub mod naming;
pub mod null_filter;
pub mod parameter;
pub mod plan_cache;
mod qual_order;
mod recursive_decorrelation;
mod recursive_pruning;
mod recursive_query;
mod recursive_union;
mod relations;
pub mod rewrite;
mod row_compare;
mod scope;
pub mod semantics;
pub mod snapshot;
pub mod srf;
pub mod subquery;
pub mod types;
mod union_types;
mod using_join;
mod whole_row;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use datafusion::arrow::datatypes::Field;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::CatalogProviderList;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::{SessionConfig, SessionContext, SessionState};
use datafusion::logical_expr::LogicalPlan;
use floe_repr::{ColumnDesc, Datum, Row};
use futures::FutureExt;

pub use error::QueryError;

/// The name of the database every query runs in.
pub const DATABASE: &str = "materialize";

/// A session template with floe's semantics registered; building it once
/// keeps that cost out of every query.
pub struct Engine {
    template: SessionState,
    /// Sessions made for earlier queries, each handed out again once nothing
    /// holds it: a clone of the template copies its maps of several hundred
    /// functions, a fifth of a small query's time.
    sessions: std::sync::Mutex<Vec<SessionContext>>,
}

/// How many sessions the engine keeps for reuse: one per query running at once.
const KEPT_SESSIONS: usize = 32;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::new()
    }
}

impl Engine {
    pub fn new() -> Engine {
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(DATABASE, "public")
            .with_information_schema(false)
            // Queries here are small and many; one partition avoids the
            // repartitioning and task spawning that only pays off on large inputs.
            .with_target_partitions(1)
            .with_create_default_catalog_and_schema(false);
        let options = config.options_mut();
        // `1.5` is numeric, as in Postgres, not a float.
        options.sql_parser.parse_float_as_decimal = true;
        // floe's Arrow form of text is Utf8 (see floe-arrow).
        options.sql_parser.map_string_types_to_utf8view = false;
        options.sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
        // Postgres keeps ORDER BY inside a subquery that a caller may rely on.
        options.sql_parser.enable_subquery_sort_elimination = false;
        options.execution.time_zone = Some("+00:00".into());
        // DataFusion's logical and physical planners judge a CASE's nullability by
        // different analyses: the logical one knows `b NOT IN (NULL, 1, a)` is never
        // true, so `CASE WHEN b NOT IN (NULL, 1, a) THEN a ELSE -1 END` cannot be
        // NULL; the physical one cannot tell. Under an aggregate the two schemas then
        // disagree and the physical planner refuses the query as an internal error,
        // though the physical side (nullable) is the safe one. Found by the
        // differential test (tests::case_never_taken_under_an_aggregate).
        options.execution.skip_physical_aggregate_schema_check = true;
        // Snapshot scans take no filters, and a cached plan must carry no filter a
        // run derived from its data (see `plan_cache`).
        options.optimizer.enable_dynamic_filter_pushdown = false;
        let mut builder = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_type_planner(Arc::new(types::PgTypePlanner))
            .with_query_planner(Arc::new(subquery::ApplyingQueryPlanner));
        // floe's semantics run before DataFusion's type coercion, so that its
        // casts and operators are the ones coercion sees.
        let mut analyzer = datafusion::optimizer::Analyzer::new();
        analyzer.rules.insert(0, Arc::new(semantics::PgSemantics));
        analyzer.rules.insert(1, Arc::new(jsonb_keys::JsonbByValue));
        *builder.analyzer() = Some(analyzer);
        // DataFusion turns a GROUP BY of constants into an aggregate without
        // grouping, which returns a row for an empty input; Postgres returns
        // none. Found by the differential test:
        // `SELECT 3, count(*) FROM t1 WHERE a > 100 GROUP BY 1` answered
        // `3 | 0` where Postgres answers no row
        // (tests::grouping_by_constants_over_no_rows_returns_no_rows).
        let mut rules: Vec<_> = datafusion::optimizer::Optimizer::new()
            .rules
            .into_iter()
            .filter(|rule| rule.name() != "eliminate_group_by_constant")
            // Pruning that keeps a recursive query's columns (see `recursive_pruning`).
            .map(recursive_pruning::in_place_of_engine_pruning)
            // A decorrelation the engine fails at runs per outer row (see
            // `failed_decorrelation`).
            .map(failed_decorrelation::tolerated)
            // Decorrelation that leaves a recursion bounded by outer columns whole
            // (see `recursive_decorrelation`).
            .map(recursive_decorrelation::beside_correlated_recursion)
            .collect();
        // A filter's NULL is false, as PostgreSQL folds it (see `null_filter`); last, so
        // that the simplifier has folded the NULLs first, and the next pass folds the
        // conjunction.
        rules.push(Arc::new(null_filter::NullFilterAsFalse));
        builder = builder.with_optimizer_rules(rules);
        // DataFusion's physical projection pushdown mis-maps the columns of
        // the asynchronous calls that run subqueries ([`subquery`]) when it
        // moves a projection below them ("input field name x does not match
        // with the projection expression a"); the logical optimizer already
        // pushes projections into scans.
        let physical: Vec<_> = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new()
            .rules
            .into_iter()
            .filter(|rule| rule.name() != "ProjectionPushdown")
            .collect();
        builder = builder.with_physical_optimizer_rules(physical);
        let mut expr_planners = builder.expr_planners().clone().unwrap_or_default();
        expr_planners.insert(0, Arc::new(semantics::PgOperatorPlanner));
        builder = builder.with_expr_planners(expr_planners);
        let mut state = builder.build();
        functions::register(&mut state);
        Engine {
            template: state,
            sessions: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A session over `catalogs` (the `materialize` catalog and its schemas).
    ///
    /// A kept session that nothing else holds is taken again, with the catalogs and
    /// an empty snapshot swapped in: what an earlier query left in it is its
    /// catalogs, its snapshot and the catalog functions it registered
    /// (`floe_adapter::pg_functions`, registered again by each query that calls
    /// them). Else a clone of the template: building a state again would register
    /// every function anew, a third of a small query's time.
    pub fn context(&self, catalogs: Arc<dyn CatalogProviderList>) -> SessionContext {
        let reuse = |context: &SessionContext| {
            let state = context.state_ref();
            let mut state = state.write();
            state.register_catalog_list(catalogs.clone());
            // The rows of the tables the query reads (`snapshot::register_table`).
            state
                .config_mut()
                .set_extension(Arc::new(snapshot::Snapshot::default()));
            state
                .config_mut()
                .set_extension(Arc::new(types::NamedTypes::default()));
        };
        let Ok(mut sessions) = self.sessions.lock() else {
            return self.new_context(catalogs);
        };
        // Held only by the list (and the reference counted here): free.
        if let Some(free) = sessions
            .iter()
            .find(|context| Arc::strong_count(&context.state_ref()) == 2)
        {
            reuse(free);
            return free.clone();
        }
        let context = self.new_context(catalogs);
        if sessions.len() < KEPT_SESSIONS {
            sessions.push(context.clone());
        }
        context
    }

    fn new_context(&self, catalogs: Arc<dyn CatalogProviderList>) -> SessionContext {
        let mut state = self.template.clone();
        state.register_catalog_list(catalogs);
        state
            .config_mut()
            .set_extension(Arc::new(snapshot::Snapshot::default()));
        SessionContext::new_with_state(state)
    }
}

/// A planned query: the engine's plan and the columns the client sees.
#[derive(Debug, Clone)]
pub struct Query {
    pub plan: LogicalPlan,
    /// The result columns with Postgres' names and types.
    pub columns: Vec<ColumnDesc>,
}

/// Plans a statement (a query, or the query part of a write) with Postgres'
/// semantics.
pub async fn plan(
    context: &SessionContext,
    statement: sqlparser::ast::Statement,
) -> Result<Query, QueryError> {
    types::with_named_types(context, plan_statement(context, statement)).await
}

async fn plan_statement(
    context: &SessionContext,
    statement: sqlparser::ast::Statement,
) -> Result<Query, QueryError> {
    guard(async {
        check_subquery_depth(&statement)?;
        let mut statement = statement;
        // The rewrites that need the columns of the tables the statement reads.
        let whole_rows = whole_row::mentions_whole_row_function(&statement);
        let using_joins = using_join::has_using_join(&statement);
        let renamed = relations::renames_columns(&statement);
        let function_aliases = function_row::has_aliased_function(&statement);
        if whole_rows || using_joins || renamed || function_aliases {
            let tables = relations::table_columns(context, &statement).await;
            if renamed {
                relations::complete_column_aliases(&mut statement, &tables)?;
            }
            if whole_rows {
                whole_row::expand(&mut statement, &tables);
            }
            if using_joins {
                using_join::merge(&mut statement, &tables);
            }
            if function_aliases {
                function_row::read_aliases(&mut statement, &tables);
            }
        }
        let state = context.state();
        let to_plan = |statement: sqlparser::ast::Statement| {
            state.statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(
                statement,
            )))
        };
        let plan = match to_plan(rewrite::rewrite(statement.clone())?).await {
            // Postgres allows output columns of one name; when a wildcard
            // expands to a name the select list also names, plan again with
            // that column renamed for the engine (clients see its name).
            Err(error) if duplicate_names(&error) => {
                to_plan(rewrite::rewrite_beside_wildcards(statement.clone())?).await
            }
            planned => planned,
        };
        let plan = match plan {
            Ok(plan) => plan,
            Err(error) if wide_array_source(&statement, &error) => {
                return Err(QueryError::new(
                    floe_repr::SqlState::SYNTAX_ERROR,
                    "subquery must return only one column",
                ));
            }
            Err(error) => return Err(unknown_function_error(&state, statement, error).await),
        };
        // A CASE or a set operation of numbers of different types, planned
        // again with its values cast to their common type (see `case_types`
        // and `union_types`).
        let plan = if case_types::has_mixed_case(&plan) || union_types::has_mixed_union(&plan) {
            typed_values(&state, &statement, plan).await
        } else {
            plan
        };
        recursive_query::refuse_narrowed_terms(&plan)?;
        let columns = describe_analyzed(&state, &plan);
        Ok(Query { plan, columns })
    })
    .await
}

/// `plan`, planned from `statement`, planned again with the results of its CASEs
/// and the first select lists of its set operations whose values are numbers of
/// different types cast to their common type ([`case_types`], [`union_types`]);
/// `plan` itself where either planning fails. Boxed here, so that the
/// caller's future, whose frame every planning's stack sits on, stays small.
fn typed_values<'a>(
    state: &'a SessionState,
    statement: &'a sqlparser::ast::Statement,
    plan: LogicalPlan,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = LogicalPlan> + Send + 'a>> {
    Box::pin(async move {
        let to_plan = |statement: sqlparser::ast::Statement| {
            state.statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(
                statement,
            )))
        };
        let numbered = union_types::marked(&case_types::numbered(statement));
        let Ok(numbered) = rewrite::rewrite(numbered) else {
            return plan;
        };
        let (casts, item_casts) = match to_plan(numbered).await {
            Ok(numbered) => (
                case_types::result_casts(&numbered),
                union_types::item_casts(&numbered),
            ),
            Err(_) => return plan,
        };
        if casts.is_empty() && item_casts.is_empty() {
            return plan;
        }
        let typed = union_types::typed(&case_types::typed(statement, &casts), &item_casts);
        match rewrite::rewrite(typed) {
            Ok(typed) => to_plan(typed).await.unwrap_or(plan),
            Err(_) => plan,
        }
    })
}

/// `error`, or when it is of a function the engine does not know, PostgreSQL's error
/// naming the function's argument types: the statement planned again with each
/// unknown function's calls made calls of [`functions::unknown::UnknownFunction`],
/// which fails when the engine types it (a few rounds, for unknown calls nested in
/// one another).
async fn unknown_function_error(
    state: &SessionState,
    mut statement: sqlparser::ast::Statement,
    error: datafusion::error::DataFusionError,
) -> QueryError {
    use functions::unknown::{replace_calls, unknown_name};
    let mut unknown = unknown_name(&error);
    for _ in 0..4 {
        let Some(replaced) = unknown.and_then(|name| replace_calls(statement, &name)) else {
            break;
        };
        statement = replaced.clone();
        let Ok(rewritten) = rewrite::rewrite(replaced) else {
            break;
        };
        let planned = state
            .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(
                rewritten,
            )))
            .await
            // A call whose type the planner did not ask for (in a filter) fails
            // when the analyzer types it.
            .and_then(|plan| {
                state
                    .analyzer()
                    .execute_and_check(plan, state.config_options(), |_, _| {})
            });
        let Err(next) = planned else {
            break;
        };
        unknown = unknown_name(&next);
        if unknown.is_none() {
            let named = QueryError::from_datafusion(next);
            if named.code == floe_repr::SqlState::UNDEFINED_FUNCTION {
                return named;
            }
            break;
        }
    }
    QueryError::from_datafusion(error)
}

/// The client-visible columns of a plan, typed as [`output_fields`] types them with
/// the analyzer's plan. A plan the analyzer refuses keeps the planner's types: the
/// error comes when it runs (a statement only described may hold parameters of no
/// known type).
fn describe_analyzed(
    state: &datafusion::execution::SessionState,
    plan: &LogicalPlan,
) -> Vec<ColumnDesc> {
    let Ok(analyzed) =
        state
            .analyzer()
            .execute_and_check(plan.clone(), state.config_options(), |_, _| {})
    else {
        return describe(plan);
    };
    output_fields(plan, &analyzed)
        .iter()
        .zip(describe(plan))
        .map(|(field, named)| ColumnDesc {
            name: named.name,
            pg_type: floe_arrow::pg_type_of(field),
        })
        .collect()
}

/// The output fields of `plan` as `analyzed` (the same plan analyzed or optimized)
/// types them: before the analyzer's coercion a `CASE` of an integer and a numeric
/// still has the integer's type, which its rows will not have. A field whose type
/// the analyzer kept stays the planner's, with the metadata that types it for
/// clients (jsonb, a numeric's scale), which later rules do not always carry.
fn output_fields(plan: &LogicalPlan, analyzed: &LogicalPlan) -> Vec<Field> {
    let planned = plan.schema().fields();
    let analyzed = analyzed.schema().fields();
    let same_width = planned.len() == analyzed.len();
    planned
        .iter()
        .enumerate()
        .map(|(index, field)| match analyzed.get(index) {
            Some(typed) if same_width && typed.data_type() != field.data_type() => {
                typed.as_ref().clone().with_name(field.name())
            }
            _ => field.as_ref().clone(),
        })
        .collect()
}

/// How many subqueries may nest inside each other's expressions. DataFusion's plan
/// checks (run on every plan before and after its optimizer) visit a nested
/// subquery's plan twice for each level it is nested in, so planning time doubles
/// with each level: 16 levels took 8 s in a debug build, and 40 held a runtime
/// thread for good. PostgreSQL has no such limit; queries nest a few levels.
pub const MAX_SUBQUERY_DEPTH: usize = 12;

/// Refuses a statement whose expressions nest more than [`MAX_SUBQUERY_DEPTH`]
/// subqueries inside each other (derived tables and inlined views do not count: the
/// checks visit them once).
fn check_subquery_depth(statement: &sqlparser::ast::Statement) -> Result<(), QueryError> {
    use floe_repr::SqlState;
    use sqlparser::ast::{Expr, Visit, Visitor};
    use std::ops::ControlFlow;
    struct Depth {
        current: usize,
        deepest: usize,
    }
    fn is_subquery(expr: &Expr) -> bool {
        matches!(
            expr,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        )
    }
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if is_subquery(expr) {
                self.current += 1;
                self.deepest = self.deepest.max(self.current);
                if self.current > MAX_SUBQUERY_DEPTH {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if is_subquery(expr) {
                self.current -= 1;
            }
            ControlFlow::Continue(())
        }
    }
    let mut depth = Depth {
        current: 0,
        deepest: 0,
    };
    if statement.visit(&mut depth).is_break() {
        return Err(QueryError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "subqueries are nested too deeply",
        )
        .with_detail(format!(
            "The statement nests more than {MAX_SUBQUERY_DEPTH} subqueries inside each \
             other's expressions; floe plans at most {MAX_SUBQUERY_DEPTH}."
        ))
        .with_hint("Move the inner subqueries into a WITH clause or a view."));
    }
    Ok(())
}

/// Whether the engine refused a select list for output columns of one name.
/// Whether the engine refused an `ARRAY(SELECT * ...)`, whose rewrite names the
/// subquery's one column ([`rewrite::ARRAY_SOURCE`]), for a subquery of more
/// columns (the wildcard's count is the engine's to know).
fn wide_array_source(
    statement: &sqlparser::ast::Statement,
    error: &datafusion::error::DataFusionError,
) -> bool {
    use sqlparser::ast::TableFactor;
    use std::ops::ControlFlow;
    struct Finder;
    impl sqlparser::ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            match factor {
                TableFactor::Derived {
                    alias: Some(alias), ..
                } if alias.name.value == rewrite::ARRAY_SOURCE => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    error
        .find_root()
        .to_string()
        .contains("names given as column alias")
        && sqlparser::ast::Visit::visit(statement, &mut Finder).is_break()
}

fn duplicate_names(error: &datafusion::error::DataFusionError) -> bool {
    error
        .find_root()
        .to_string()
        .to_lowercase()
        .contains("projections require unique expression names")
}

/// The client-visible columns of a plan's output.
pub fn describe(plan: &LogicalPlan) -> Vec<ColumnDesc> {
    plan.schema()
        .fields()
        .iter()
        .map(|field| ColumnDesc {
            name: naming::visible_name(field.name()).to_string(),
            pg_type: floe_arrow::pg_type_of(field),
        })
        .collect()
}

/// Runs a planned query and converts its output to rows.
pub async fn execute(context: &SessionContext, query: Query) -> Result<Vec<Row>, QueryError> {
    let planned = physical_plan(context, &query).await?;
    run(context, planned.physical, &planned.fields).await
}

/// A query's physical plan.
pub struct PhysicalPlan {
    pub physical: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    /// The fields of the output (they carry the metadata that types it: jsonb,
    /// uuid, numeric scale, ...); batches are converted against them.
    pub fields: Vec<Field>,
    /// The optimized logical plan it was made from (what `plan_cache` judges).
    pub optimized: LogicalPlan,
}

/// Optimizes a planned query and makes its physical plan.
pub async fn physical_plan(
    context: &SessionContext,
    query: &Query,
) -> Result<PhysicalPlan, QueryError> {
    guard(async {
        let state = context.state();
        let optimized = state
            .optimize(&query.plan)
            .and_then(qual_order::apply)
            .map_err(QueryError::from_datafusion)?;
        // Typed as the query's columns are (see `output_fields`).
        let fields = output_fields(&query.plan, &optimized);
        let physical = state
            .query_planner()
            .create_physical_plan(&optimized, &state)
            .await
            .map_err(QueryError::from_datafusion)?;
        Ok(PhysicalPlan {
            physical,
            fields,
            optimized,
        })
    })
    .await
}

/// Runs a physical plan in `context` and converts its output to rows typed by
/// `fields`.
pub async fn run(
    context: &SessionContext,
    physical: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    fields: &[Field],
) -> Result<Vec<Row>, QueryError> {
    guard(async {
        let batches = datafusion::physical_plan::collect(physical, task_context(context))
            .await
            .map_err(QueryError::from_datafusion)?;
        let mut rows = Vec::new();
        for batch in batches {
            rows.extend(batch_rows(&batch, fields)?);
        }
        Ok(rows)
    })
    .await
}

/// What a physical plan runs with: the session's configuration (its snapshot of
/// the tables read) and runtime. Without the session's maps of functions, which
/// the engine's own `task_ctx` copies for every run (a tenth of a small query's
/// time): a physical plan holds the functions it calls.
fn task_context(context: &SessionContext) -> Arc<datafusion::execution::TaskContext> {
    let state = context.state_ref();
    let state = state.read();
    Arc::new(datafusion::execution::TaskContext::new(
        None,
        state.session_id().to_string(),
        state.config().clone(),
        Default::default(),
        Default::default(),
        Default::default(),
        Default::default(),
        state.runtime_env().clone(),
    ))
}

/// The rows of a batch, typed by `fields`.
pub fn batch_rows(batch: &RecordBatch, fields: &[Field]) -> Result<Vec<Row>, QueryError> {
    let columns: Vec<Vec<Datum>> = batch
        .columns()
        .iter()
        .zip(fields)
        .map(|(array, field)| floe_arrow::array_to_datums(array, field))
        .collect::<Result<_, _>>()
        .map_err(QueryError::from_value)?;
    let mut rows: Vec<Row> = (0..batch.num_rows())
        .map(|_| Vec::with_capacity(columns.len()))
        .collect();
    for column in columns {
        for (row, datum) in rows.iter_mut().zip(column) {
            row.push(datum);
        }
    }
    Ok(rows)
}

/// Runs `work`, turning a panic inside the engine into an internal error
/// (`XX000`): the last line of defence, so no SQL text can drop a connection.
async fn guard<T>(
    work: impl std::future::Future<Output = Result<T, QueryError>>,
) -> Result<T, QueryError> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("the query engine panicked");
            Err(QueryError::internal(format!(
                "query engine failure: {message}"
            )))
        }
    }
}

#[cfg(test)]
mod tests;
