//! Materialized views: each one's dataflow runs on its cluster's replica
//! (`floe-compute`), reads its inputs' change logs and keeps its own change log
//! (a storage collection like a table's) in step, so SELECT, sinks, lag, read
//! holds and compaction treat it like any other relation.
//!
//! The log holds rows only. Errors the query produces at run time (division by
//! zero in one row) are kept in memory ([`ViewErrors`]): they are a function of the
//! inputs, so a restarted dataflow produces them again in its first output.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::logical_expr::LogicalPlan;
use floe_compute::maintain::{InputLog, Maintainer, OutputBatch, OutputContents, OutputLog, View};
use floe_compute::plan::RenderPlan;
use floe_compute::replica::{DataflowSpec, InputSpec, Planner, Replica, ReplicaConfig};
use floe_compute::{ComputeError, DataflowError, ErrorKind};
use floe_repr::codec::row_to_bytes;
use floe_repr::{ClusterId, ColumnType, GlobalId, RelationDesc, Row, SqlState, Timestamp};
use floe_sql::catalog::{ItemDefinition, PlanCatalog, QualifiedName};
use floe_storage::Storage;

use crate::error::AdapterError;
use crate::view_errors::ViewErrors;

/// The shape of a planned query's output, as a view stores it. Column names are
/// the ones SELECT shows (floe-query's engine-only suffixes of duplicate names
/// removed); a view, unlike a query, may not have two columns of one name.
pub(crate) fn relation_desc(plan: &LogicalPlan) -> Result<RelationDesc, AdapterError> {
    let mut columns: Vec<(String, ColumnType)> = Vec::new();
    for field in plan.schema().fields() {
        let name = floe_query::naming::visible_name(field.name());
        if columns.iter().any(|(taken, _)| taken == name) {
            return Err(AdapterError::Query {
                code: SqlState::DUPLICATE_COLUMN,
                message: format!("column \"{name}\" specified more than once"),
            });
        }
        let scalar_type = stored_type(field);
        columns.push((
            name.to_string(),
            ColumnType {
                scalar_type,
                nullable: field.is_nullable(),
            },
        ));
    }
    Ok(RelationDesc {
        columns,
        unique_keys: Vec::new(),
    })
}

/// The type a view stores a column of its query's output as. A computed
/// numeric (a quotient, an average, an expression of them) may hold more
/// digits than a bare numeric column's ten: the view keeps them all, as
/// `numeric(38, s)`, since floe never rounds a value it stores.
fn stored_type(field: &datafusion::arrow::datatypes::Field) -> floe_repr::SqlScalarType {
    use datafusion::arrow::datatypes::DataType;
    use floe_repr::SqlScalarType;
    let ty = floe_arrow::sql_type_of(field)
        .unwrap_or_else(|| floe_arrow::scalar_type_of_pg(floe_arrow::pg_type_of(field)));
    match (&ty, field.data_type()) {
        (
            SqlScalarType::Numeric {
                max_scale: None, ..
            },
            DataType::Decimal128(precision, scale),
        ) if *scale > floe_arrow::BARE_NUMERIC_SCALE => SqlScalarType::Numeric {
            precision: Some(*precision),
            max_scale: u8::try_from(*scale).ok(),
        },
        _ => ty,
    }
}

/// A compute error as the client sees it: refusals are 0A000.
/// A materialized view's dataflow keeps its inputs' whole rows: an input of
/// a column the dataflow cannot encode (a map) is refused when the view is
/// created, rather than failing when its dataflow is built.
pub(crate) fn refuse_unencodable_inputs(
    plan: &datafusion::logical_expr::LogicalPlan,
) -> Result<(), AdapterError> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut refusal = None;
    let _ = plan.apply_with_subqueries(|node| {
        if let datafusion::logical_expr::LogicalPlan::TableScan(scan) = node
            && let Err(error) = floe_compute::row::RowCodec::new(scan.source.schema())
        {
            refusal = Some(compute_error(error));
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    refusal.map_or(Ok(()), Err)
}

pub(crate) fn compute_error(error: ComputeError) -> AdapterError {
    let code = match error.kind {
        ErrorKind::Unsupported | ErrorKind::NotAllowed => SqlState::FEATURE_NOT_SUPPORTED,
        ErrorKind::Plan => SqlState::SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION,
        ErrorKind::Log | ErrorKind::Replica | ErrorKind::Internal => SqlState::INTERNAL_ERROR,
    };
    AdapterError::Query {
        code,
        message: error.message,
    }
}

/// An error in a view's contents, as a query reading the view fails with it.
pub(crate) fn dataflow_error(error: &DataflowError) -> AdapterError {
    AdapterError::Query {
        code: dataflow_error_code(error),
        message: crate::error::lowercase_first(error.message.trim()),
    }
}

/// The SQLSTATE of an error in a view's contents.
pub(crate) fn dataflow_error_code(error: &DataflowError) -> SqlState {
    // The codes a row's evaluation raises (the same as SELECT's for that row).
    const ROW_ERRORS: [SqlState; 22] = [
        SqlState::FEATURE_NOT_SUPPORTED,
        SqlState::CARDINALITY_VIOLATION,
        SqlState::DATA_EXCEPTION,
        SqlState::STRING_DATA_RIGHT_TRUNCATION,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        SqlState::INVALID_DATETIME_FORMAT,
        SqlState::DATETIME_FIELD_OVERFLOW,
        SqlState::DIVISION_BY_ZERO,
        SqlState::INVALID_ARGUMENT_FOR_LOGARITHM,
        SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION,
        SqlState::INVALID_ROW_COUNT_IN_LIMIT_CLAUSE,
        SqlState::ARRAY_SUBSCRIPT_ERROR,
        SqlState::INVALID_REGULAR_EXPRESSION,
        SqlState::NULL_VALUE_NOT_ALLOWED,
        SqlState::INVALID_JSON_TEXT,
        SqlState::INTERVAL_FIELD_OVERFLOW,
        SqlState::INVALID_BINARY_REPRESENTATION,
        SqlState::CHARACTER_NOT_IN_REPERTOIRE,
        SqlState::UNTRANSLATABLE_CHARACTER,
        SqlState::INVALID_PARAMETER_VALUE,
        SqlState::INVALID_TEXT_REPRESENTATION,
        SqlState::BAD_COPY_FILE_FORMAT,
    ];
    ROW_ERRORS
        .into_iter()
        .find(|code| code.code() == error.code)
        .unwrap_or(SqlState::INTERNAL_ERROR)
}

/// Plans a view's query the way SELECT plans one (floe's parser, then the query
/// engine with Postgres' semantics), over empty tables of the inputs' shapes, and
/// lowers it to a dataflow. The session is floe-query's, as SELECT's is: its
/// functions (casts, checked arithmetic, jsonb) are the ones the plan calls.
fn plan_view(spec: &DataflowSpec) -> Result<RenderPlan, ComputeError> {
    let context = crate::query::empty_context().map_err(|e| ComputeError::plan(e.to_string()))?;
    floe_compute::planner::register_inputs(&context, spec)?;
    let statement = match floe_sql_parser::parser::parse_statement(&spec.query) {
        Ok(floe_sql_parser::ast::Statement::Standard(statement)) => *statement,
        Ok(_) => return Err(ComputeError::plan("a view's query is not a query")),
        Err(e) => return Err(ComputeError::plan(e.to_string())),
    };
    let plan = futures::executor::block_on(crate::query::logical_plan(&context, statement))
        .map_err(|e| ComputeError::plan(e.to_string()))?;
    // Rows are stored as they print: at PostgreSQL's display scales, unless
    // the dataflow cannot run the rewritten plan (then without trailing zeros).
    if let Some(scaled) = floe_query::display_scale::apply_to_dataflow(&plan.plan)
        && let Ok(compiled) = floe_compute::compile(&scaled, &context.state())
    {
        return Ok(compiled);
    }
    floe_compute::compile(&plan.plan, &context.state())
}

/// Timely workers per replica process for a cluster size: the machine's
/// cores are shared, so sizes map to a few workers.
fn workers_for_size(size: &str) -> usize {
    match size {
        "25cc" | "50cc" | "100cc" | "3xsmall" | "2xsmall" | "xsmall" => 1,
        "200cc" | "300cc" | "small" | "medium" => 2,
        _ => 4,
    }
}

/// A view's dataflow input: a relation's change log, held back from compaction
/// at what the view has read. Rows are cut to the `width` the dataflow was
/// planned with: a table's column added while the view runs is not its.
pub(crate) struct StorageInput {
    pub storage: Arc<Storage>,
    pub id: GlobalId,
    pub holder: String,
    pub width: usize,
    /// Whether the hold lasts only while the process runs (a subscription's) rather
    /// than being written down (a materialized view's).
    pub transient: bool,
}

impl StorageInput {
    /// The logs of a dataflow's inputs (`inputs`, in the order of `spec`'s), each read
    /// on behalf of `holder`.
    pub(crate) fn logs(
        storage: &Arc<Storage>,
        inputs: &[GlobalId],
        spec: &DataflowSpec,
        holder: &str,
        transient: bool,
    ) -> Vec<Arc<dyn InputLog>> {
        inputs
            .iter()
            .zip(&spec.inputs)
            .map(|(input, input_spec)| {
                Arc::new(StorageInput {
                    storage: storage.clone(),
                    id: *input,
                    holder: holder.to_string(),
                    width: input_spec.desc.columns.len(),
                    transient,
                }) as Arc<dyn InputLog>
            })
            .collect()
    }
}

impl InputLog for StorageInput {
    fn upper(&self) -> Result<u64, ComputeError> {
        self.storage
            .upper(self.id)
            .map(|t| t.0)
            .map_err(|e| ComputeError::log(e.to_string()))
    }

    fn read(&self, lower: u64, upper: u64) -> Result<Vec<(Row, u64, i64)>, ComputeError> {
        let mut updates = Vec::new();
        let result = self
            .storage
            .read(
                self.id,
                Timestamp(lower),
                Timestamp(upper),
                65_536,
                &mut |chunk| {
                    updates.extend(chunk.into_iter().map(|mut u| {
                        u.row.truncate(self.width);
                        (u.row, u.ts.0, u.diff)
                    }));
                    Ok(())
                },
            )
            .map_err(|e| ComputeError::log(e.to_string()))?;
        result.map_err(ComputeError::log)?;
        let held = if self.transient {
            self.storage
                .set_transient_read_hold(self.id, &self.holder, Timestamp(upper))
        } else {
            self.storage
                .set_read_hold(self.id, &self.holder, Timestamp(upper))
        };
        held.map_err(|e| ComputeError::log(e.to_string()))?;
        Ok(updates)
    }
}

/// A materialized view's own log: rows in storage, errors in memory.
struct StorageOutput {
    storage: Arc<Storage>,
    id: GlobalId,
    errors: ViewErrors,
}

impl OutputLog for StorageOutput {
    fn upper(&self) -> Result<u64, ComputeError> {
        self.storage
            .upper(self.id)
            .map(|t| t.0)
            .map_err(|e| ComputeError::log(e.to_string()))
    }

    fn contents(&self) -> Result<OutputContents, ComputeError> {
        let (rows, _) = self
            .storage
            .contents(self.id)
            .map_err(|e| ComputeError::log(e.to_string()))?;
        let mut counted: HashMap<Vec<u8>, (Row, i64)> = HashMap::new();
        for row in rows {
            counted.entry(row_to_bytes(&row)).or_insert((row, 0)).1 += 1;
        }
        Ok(OutputContents {
            rows: counted.into_values().collect(),
            errors: self.errors.contents(self.id),
        })
    }

    fn append(&mut self, batch: OutputBatch) -> Result<(), ComputeError> {
        // Errors first: a sink reading the view between the two steps then sees the log's
        // old upper, below any new error, and never a new upper without its errors. (An
        // append that fails restarts the maintainer, whose first output corrects both.)
        self.errors.apply(self.id, &batch.errors);
        let rows = batch
            .rows
            .into_iter()
            .map(|(row, ts, diff)| (row, Timestamp(ts), diff))
            .collect();
        self.storage
            .append_at(
                self.id,
                Timestamp(batch.lower),
                Timestamp(batch.upper),
                rows,
            )
            .map_err(|e| ComputeError::log(e.to_string()))?;
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running materialized view.
struct Running {
    maintainer: Maintainer,
    inputs: Vec<GlobalId>,
}

/// The replicas and the maintained views of this server.
#[derive(Default)]
pub(crate) struct Views {
    replicas: Mutex<HashMap<ClusterId, Arc<Replica>>>,
    running: Mutex<HashMap<GlobalId, Running>>,
    /// The running views' run-time errors.
    errors: ViewErrors,
}

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Views").finish_non_exhaustive()
    }
}

/// The name of a view's hold on an input.
fn holder(view: GlobalId) -> String {
    format!("materialized-view-{view}")
}

impl Views {
    /// Starts (or restarts) maintaining a materialized view. A cluster without
    /// replicas runs nothing: the view's upper stays where it is.
    pub(crate) fn start(
        &self,
        storage: &Arc<Storage>,
        catalog: &floe_catalog::CatalogState,
        id: GlobalId,
    ) -> Result<(), AdapterError> {
        self.stop(storage, id);
        let Some(item) = catalog.item(id) else {
            return Ok(());
        };
        let ItemDefinition::MaterializedView(view) = &item.definition else {
            return Ok(());
        };
        let Some(cluster) = view.cluster.and_then(|c| catalog.cluster(c)) else {
            return Err(AdapterError::Internal(format!(
                "the cluster of materialized view {} does not exist",
                item.name
            )));
        };
        let Some(size) = cluster.replicas.first().map(|r| r.size.clone()) else {
            return Ok(());
        };
        let (spec, inputs) = dataflow_spec(catalog, id, &item.name, &view.query)?;
        let replica = self.replica(cluster.id, &size)?;
        let logs = StorageInput::logs(storage, &inputs, &spec, &holder(id), false);
        let output = StorageOutput {
            storage: storage.clone(),
            id,
            errors: self.errors.clone(),
        };
        let maintainer = Maintainer::start(replica, View::new(spec, logs, output));
        lock(&self.running).insert(id, Running { maintainer, inputs });
        Ok(())
    }

    /// Stops maintaining a view and releases its holds on its inputs.
    pub(crate) fn stop(&self, storage: &Storage, id: GlobalId) {
        let running = lock(&self.running).remove(&id);
        if let Some(running) = running {
            running.maintainer.stop();
            self.errors.forget(id);
            for input in running.inputs {
                let _ = storage.drop_read_hold(input, &holder(id));
            }
        }
    }

    /// The first error in a view's contents, if it has one: its own or one of the
    /// materialized views it reads (`view_and_upstream`).
    pub(crate) fn error(&self, view_and_upstream: &[GlobalId]) -> Option<AdapterError> {
        self.errors
            .first_of(view_and_upstream)
            .as_ref()
            .map(dataflow_error)
    }

    /// The views' run-time errors, for the sinks that read the views.
    pub(crate) fn errors(&self) -> ViewErrors {
        self.errors.clone()
    }

    /// The logs a running view's dataflow reads (`None` when it is not running).
    pub(crate) fn inputs(&self, id: GlobalId) -> Option<Vec<GlobalId>> {
        lock(&self.running).get(&id).map(|r| r.inputs.clone())
    }

    /// How a view's maintenance is doing (`None` when it is not running).
    pub(crate) fn status(&self, id: GlobalId) -> Option<floe_compute::maintain::Status> {
        lock(&self.running).get(&id).map(|r| r.maintainer.status())
    }

    /// The size of every arrangement of every running view's dataflow, on every worker
    /// (`mz_internal.mz_arrangement_sizes`). Blocks while the replicas measure: call it
    /// off the async threads. A replica that cannot answer is left out (its views show
    /// no arrangements) rather than failing the query.
    pub(crate) fn arrangement_sizes(&self) -> Vec<ViewArrangementSize> {
        let by_number: HashMap<u64, GlobalId> = lock(&self.running)
            .keys()
            .map(|id| match id {
                GlobalId::User(n) | GlobalId::System(n) => (*n, *id),
            })
            .collect();
        let replicas: Vec<Arc<Replica>> = lock(&self.replicas).values().cloned().collect();
        let mut sizes = Vec::new();
        for replica in replicas {
            let measured = match replica.arrangement_sizes(SIZES_TIMEOUT) {
                Ok(measured) => measured,
                Err(error) => {
                    tracing::warn!(error = %error, "a replica did not report its arrangement sizes");
                    continue;
                }
            };
            sizes.extend(measured.into_iter().filter_map(|size| {
                Some(ViewArrangementSize {
                    view: *by_number.get(&size.dataflow)?,
                    operator: size.operator,
                    worker: size.worker,
                    records: size.records,
                    bytes: size.bytes,
                })
            }));
        }
        sizes
    }

    /// The cluster's replica, started with the workers its size gives.
    pub(crate) fn replica(
        &self,
        cluster: ClusterId,
        size: &str,
    ) -> Result<Arc<Replica>, AdapterError> {
        let mut replicas = lock(&self.replicas);
        if let Some(replica) = replicas.get(&cluster)
            && replica.check().is_ok()
        {
            return Ok(replica.clone());
        }
        let planner: Planner = Arc::new(plan_view);
        let replica = Arc::new(
            Replica::start(
                ReplicaConfig {
                    workers: workers_for_size(size),
                    cluster: None,
                },
                planner,
            )
            .map_err(compute_error)?,
        );
        replicas.insert(cluster, replica.clone());
        Ok(replica)
    }
}

/// How long a query of `mz_arrangement_sizes` waits for a replica's workers.
const SIZES_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One arrangement of a materialized view's dataflow on one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewArrangementSize {
    pub view: GlobalId,
    /// The operator that built it (`Join left`, `Reduce`, ...).
    pub operator: String,
    pub worker: usize,
    /// Updates held.
    pub records: u64,
    /// Bytes held: the updates plus the heap bytes of their rows.
    pub bytes: u64,
}

/// A materialized view's dataflow description: its query with plain views
/// inlined, and the change logs it reads.
fn dataflow_spec(
    catalog: &floe_catalog::CatalogState,
    id: GlobalId,
    name: &QualifiedName,
    query: &str,
) -> Result<(DataflowSpec, Vec<GlobalId>), AdapterError> {
    let statement = match floe_sql_parser::parser::parse_statement(query) {
        Ok(floe_sql_parser::ast::Statement::Standard(statement)) => *statement,
        _ => {
            return Err(AdapterError::Internal(format!(
                "the stored query of {name} does not parse"
            )));
        }
    };
    let mut statement = statement;
    let view = match catalog.item(id).map(|i| &i.definition) {
        Some(ItemDefinition::MaterializedView(view)) => Some(view),
        _ => None,
    };
    if let Some(view) = view {
        floe_sql::alter_table::pin_table_versions(catalog, &mut statement, &view.table_versions);
    }
    let inlined = floe_sql::view::inline_views(catalog, statement)?;
    let number = match id {
        GlobalId::User(n) | GlobalId::System(n) => n,
    };
    let (mut spec, inputs) = query_dataflow_spec(catalog, number, &name.item, &inlined);
    if let Some(view) = view {
        keep_stored_types(&mut spec, &view.desc);
    }
    Ok((spec, inputs))
}

/// A view made by an older floe whose query now plans to other column types
/// (the sum of bigints was a bigint before floe typed it numeric, as
/// Postgres does) keeps the types it was created with: its log holds rows of
/// those types and what reads it (queries, sinks, other views) was planned
/// with them. Its query's columns are cast to the stored types; a query that
/// does not plan is left for the replica to report.
fn keep_stored_types(spec: &mut DataflowSpec, stored: &RelationDesc) {
    let Some(planned) = planned_desc(spec) else {
        return;
    };
    if planned.columns.len() != stored.columns.len() || column_types_match(&planned, stored) {
        return;
    }
    let quote = |name: &str| sqlparser::ast::Ident::with_quote('"', name).to_string();
    let positional = |index: usize| quote(&format!("column{}", index + 1));
    let select: Vec<String> = planned
        .columns
        .iter()
        .zip(&stored.columns)
        .enumerate()
        .map(|(index, ((_, planned), (name, column)))| {
            if planned.scalar_type == column.scalar_type {
                format!("{} AS {}", positional(index), quote(name))
            } else {
                format!(
                    "CAST({} AS {}) AS {}",
                    positional(index),
                    column.scalar_type,
                    quote(name)
                )
            }
        })
        .collect();
    let columns: Vec<String> = (0..stored.columns.len()).map(positional).collect();
    let cast = DataflowSpec {
        query: format!(
            "SELECT {} FROM ({}) AS floe_stored_types ({})",
            select.join(", "),
            spec.query,
            columns.join(", ")
        ),
        ..spec.clone()
    };
    // A type without a cast from today's (or without a SQL spelling) keeps
    // the query as it is.
    let planned_cast = planned_desc(&cast);
    if planned_cast.is_some_and(|desc| column_types_match(&desc, stored)) {
        *spec = cast;
    }
}

/// Updates giving plain views made by an older floe the shape their queries
/// plan to today (the sum of bigints was a bigint before it was numeric). A
/// plain view holds no rows and is inlined into every query that reads it,
/// so it answers with today's types; its stored shape is what the catalog
/// shows (`mz_columns`, psql's `\d`), and follows. A materialized view keeps
/// its stored types instead ([`keep_stored_types`]). A view whose query does
/// not plan here (one reading the system catalog) is left as it is.
pub(crate) fn refreshed_view_shapes(state: &floe_catalog::CatalogState) -> Vec<floe_catalog::Op> {
    let mut ops = Vec::new();
    for item in state.items() {
        let ItemDefinition::View(view) = &item.definition else {
            continue;
        };
        let Ok(floe_sql_parser::ast::Statement::Standard(statement)) =
            floe_sql_parser::parser::parse_statement(&view.query)
        else {
            continue;
        };
        let mut statement = *statement;
        floe_sql::alter_table::pin_table_versions(state, &mut statement, &view.table_versions);
        let Ok(inlined) = floe_sql::view::inline_views(state, statement) else {
            continue;
        };
        let (spec, _) = query_dataflow_spec(state, 0, &item.name.item, &inlined);
        let Some(planned) = planned_desc(&spec) else {
            continue;
        };
        if planned.columns.len() != view.desc.columns.len()
            || column_types_match(&planned, &view.desc)
        {
            continue;
        }
        let mut refreshed = view.clone();
        for ((_, stored), (_, today)) in refreshed.desc.columns.iter_mut().zip(planned.columns) {
            *stored = today;
        }
        ops.push(floe_catalog::Op::UpdateItem {
            id: item.id,
            definition: ItemDefinition::View(refreshed),
            create_sql: item.create_sql.clone(),
        });
    }
    ops
}

/// Whether each column of `planned` has the type of the same column of `stored`.
fn column_types_match(planned: &RelationDesc, stored: &RelationDesc) -> bool {
    planned
        .columns
        .iter()
        .zip(&stored.columns)
        .all(|((_, planned), (_, stored))| planned.scalar_type == stored.scalar_type)
}

/// The shape a dataflow's query plans to today.
fn planned_desc(spec: &DataflowSpec) -> Option<RelationDesc> {
    let context = crate::query::empty_context().ok()?;
    floe_compute::planner::register_inputs(&context, spec).ok()?;
    let statement = match floe_sql_parser::parser::parse_statement(&spec.query) {
        Ok(floe_sql_parser::ast::Statement::Standard(statement)) => *statement,
        _ => return None,
    };
    let plan = futures::executor::block_on(crate::query::logical_plan(&context, statement)).ok()?;
    relation_desc(&plan.plan).ok()
}

/// The dataflow of a query whose plain views are inlined, and the change logs it
/// reads (in the order of the spec's inputs).
pub(crate) fn query_dataflow_spec(
    catalog: &floe_catalog::CatalogState,
    number: u64,
    name: &str,
    inlined: &sqlparser::ast::Statement,
) -> (DataflowSpec, Vec<GlobalId>) {
    let mut inputs = Vec::new();
    let mut specs = Vec::new();
    let _ = sqlparser::ast::visit_relations(inlined, |relation| {
        if let Some(found) = resolved_item(catalog, relation)
            && let Some(desc) = found.definition.desc()
            && !inputs.contains(&found.id)
        {
            inputs.push(found.id);
            specs.push(InputSpec {
                name: found.name.to_string(),
                desc: desc.clone(),
            });
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    (
        DataflowSpec {
            id: number,
            name: name.to_string(),
            query: inlined.to_string(),
            inputs: specs,
            as_of: 0,
        },
        inputs,
    )
}

/// A materialized view and the materialized views it reads, directly or through plain
/// views and other materialized views: the views whose errors are its errors.
pub(crate) fn view_and_upstream(state: &floe_catalog::CatalogState, id: GlobalId) -> Vec<GlobalId> {
    let mut found = vec![id];
    let mut pending = vec![id];
    while let Some(next) = pending.pop() {
        let Some(item) = state.item(next) else {
            continue;
        };
        for used in item.definition.uses() {
            let Some(used_item) = state.item(used) else {
                continue;
            };
            let is_view = matches!(
                used_item.definition,
                ItemDefinition::MaterializedView(_) | ItemDefinition::View(_)
            );
            if is_view && !found.contains(&used) && !pending.contains(&used) {
                pending.push(used);
                if matches!(used_item.definition, ItemDefinition::MaterializedView(_)) {
                    found.push(used);
                }
            }
        }
    }
    found
}

/// How long a query waits for a materialized view to catch up with its inputs.
const CATCH_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl crate::coordinator::Coordinator {
    /// Before a query reads materialized views: waits until each one's log is
    /// complete up to where its inputs are now (so a query sees the writes that
    /// were acknowledged before it), then fails with the first error in their
    /// contents (`division by zero`), as Materialize's SELECT does. A view that
    /// is not running (its cluster has no replica) is read as it is.
    pub(crate) async fn await_materialized_views(
        &self,
        statement: &sqlparser::ast::Statement,
    ) -> Result<(), AdapterError> {
        let views = {
            let catalog = self.catalog.lock().await;
            let state = catalog.state();
            let mut views = Vec::new();
            let _ = sqlparser::ast::visit_relations(statement, |relation| {
                if let Some(item) = resolved_item(state, relation)
                    && matches!(item.definition, ItemDefinition::MaterializedView(_))
                {
                    views.push((
                        item.id,
                        item.name.item.clone(),
                        view_and_upstream(state, item.id),
                    ));
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            views
        };
        for (id, name, upstream) in views {
            self.await_view(id, &name).await?;
            if let Some(error) = self.views.error(&upstream) {
                return Err(error);
            }
        }
        Ok(())
    }

    pub(crate) async fn await_view(&self, id: GlobalId, name: &str) -> Result<(), AdapterError> {
        let Some(inputs) = self.views.inputs(id) else {
            return Ok(());
        };
        // The query reads as of now: the ticker's work is done at once (every table's
        // upper reaches the wall clock, so every acknowledged write is below it), and the
        // view must reach that time, or where a lagging source stands. A materialized
        // view read by this one is bounded by its own inputs, so it sets no target.
        let now = Timestamp::now();
        // On a blocking thread: the tick writes every table's upper under storage's writer.
        self.storage.blocking(|storage| storage.tick()).await?;
        let mut target = now;
        for input in inputs {
            if self.views.inputs(input).is_none() {
                target = target.min(self.storage.upper(input)?);
            }
        }
        let deadline = std::time::Instant::now() + CATCH_UP_TIMEOUT;
        loop {
            // Only what this run of the maintainer appended counts: a log written by an
            // earlier run is corrected by the first append of this one.
            match self.views.status(id) {
                None => return Ok(()),
                Some(floe_compute::maintain::Status::Running { upper }) if upper >= target.0 => {
                    return Ok(());
                }
                Some(_) => {}
            }
            if std::time::Instant::now() > deadline {
                let cause = match self.views.status(id) {
                    Some(floe_compute::maintain::Status::Retrying { error }) => {
                        format!(": {error}")
                    }
                    _ => String::new(),
                };
                return Err(AdapterError::Query {
                    code: SqlState::QUERY_CANCELED,
                    message: format!(
                        "materialized view \"{name}\" did not catch up with its inputs{cause}"
                    ),
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}

/// The user item a resolved relation name (`"public"."t"`) refers to.
fn resolved_item<'a>(
    state: &'a floe_catalog::CatalogState,
    relation: &sqlparser::ast::ObjectName,
) -> Option<&'a floe_sql::catalog::CatalogItem> {
    let parts: Vec<String> = relation
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.clone()))
        .collect();
    let [schema, item] = parts.as_slice() else {
        return None;
    };
    state.item_by_name(&QualifiedName {
        database: floe_sql::catalog::DATABASE.into(),
        schema: schema.clone(),
        item: item.clone(),
    })
}
