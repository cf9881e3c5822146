//! User tables in the query engine, and the execution of INSERT, UPDATE and
//! DELETE: the engine computes the rows, the storage layer writes them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::context::SessionContext;
use floe_repr::{ColumnDesc, Datum, GlobalId, RelationDesc, Row, SqlState};
use floe_sql::catalog::{ItemDefinition, QualifiedName};
use floe_sql::dml::{DeletePlan, InsertPlan, UpdatePlan, returning_query};
use floe_storage::{AppendError, Storage};
use sqlparser::ast::SelectItem;

use crate::batch_cache::BATCH_ROWS;
use crate::coordinator::ExecuteResponse;
use crate::error::AdapterError;
use crate::query;
use floe_query::snapshot::{ScaledBatches, TableBatches};

/// A table as the engine sees it: a name and its rows as Arrow batches.
#[derive(Debug, Clone)]
pub struct EngineTable {
    pub name: QualifiedName,
    pub schema: SchemaRef,
    pub batches: Arc<dyn TableBatches>,
    /// Counts the engine's scans of the table (`pg_stat_get_numscans`); a table that is
    /// not a relation of the catalog (RETURNING's rows) has a counter of its own.
    pub scans: Arc<AtomicU64>,
}

/// The engine's scans of each relation since the server started, as PostgreSQL's
/// statistics count sequential scans (`pg_stat_get_numscans`): shared by the tables
/// handed to the engine, which count, and the catalog functions, which read them when
/// called (nothing is copied per query).
#[derive(Clone, Debug, Default)]
pub struct ScanCounts(Arc<Mutex<HashMap<GlobalId, Arc<AtomicU64>>>>);

impl ScanCounts {
    /// The counter of a relation's scans, shared by every engine that reads it.
    pub(crate) fn counter(&self, id: GlobalId) -> Arc<AtomicU64> {
        let mut scans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        scans.entry(id).or_default().clone()
    }

    /// How many times the engine has scanned relation `id`.
    pub fn get(&self, id: GlobalId) -> u64 {
        let scans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        scans
            .get(&id)
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// Forgets a dropped relation's scans.
    pub(crate) fn remove(&self, id: GlobalId) {
        let mut scans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        scans.remove(&id);
    }
}

/// Rows as the engine's view of a table.
pub fn engine_table(
    name: &QualifiedName,
    desc: &RelationDesc,
    rows: &[Row],
) -> Result<EngineTable, AdapterError> {
    let mut batches = Vec::new();
    for chunk in rows.chunks(BATCH_ROWS) {
        batches.push(
            relation_batch(desc, chunk)
                .map_err(|e| AdapterError::Internal(format!("converting {name}: {e}")))?,
        );
    }
    Ok(EngineTable {
        name: name.clone(),
        schema: relation_schema(desc),
        batches: Arc::new(ScaledBatches {
            batches,
            scales: display_scales(desc, rows),
        }),
        scans: Arc::default(),
    })
}

/// The display scales of the rows' unconstrained numeric columns (and arrays
/// of them), by column.
fn display_scales(
    desc: &RelationDesc,
    rows: &[Row],
) -> std::collections::HashMap<usize, datafusion::arrow::array::ArrayRef> {
    desc.columns
        .iter()
        .enumerate()
        .filter(|(_, (_, column))| floe_arrow::keeps_display_scales(&column.scalar_type))
        .map(|(index, (_, column))| {
            let data_type = floe_arrow::arrow_data_type(&column.scalar_type);
            let scales = floe_query::snapshot::stored_scales(rows, index, &data_type);
            (index, scales)
        })
        .collect()
}

pub(crate) fn relation_schema(desc: &RelationDesc) -> SchemaRef {
    floe_arrow::arrow_schema(desc)
}

pub(crate) fn relation_batch(
    desc: &RelationDesc,
    rows: &[Row],
) -> Result<RecordBatch, AdapterError> {
    floe_arrow::rows_to_batch(desc, rows).map_err(value_error)
}

/// Registers tables in the engine, each in its schema, with their rows in the
/// query's snapshot (`floe_query::snapshot`); a table registered again replaces
/// the first (a transaction's view of a table).
pub fn register_tables(
    context: &SessionContext,
    tables: Vec<EngineTable>,
) -> Result<(), AdapterError> {
    for table in tables {
        let rows = floe_query::snapshot::TableRows {
            schema: table.schema,
            batches: table.batches,
            scans: table.scans,
        };
        floe_query::snapshot::register_table(
            context,
            floe_query::DATABASE,
            (table.name.schema, table.name.item),
            rows,
        )
        .map_err(|e| AdapterError::Internal(e.to_string()))?;
    }
    Ok(())
}

pub fn storage_error(error: floe_storage::StorageError) -> AdapterError {
    AdapterError::Storage(error)
}

/// A value's error as the client sees it, with its detail and hint.
pub(crate) fn value_error(error: floe_repr::strconv::ValueError) -> AdapterError {
    AdapterError::Engine(floe_query::QueryError::from_value(error))
}

/// The rows of a query as datums, numerics at their display scales; the first
/// `stored` columns are rows of a table as it stores them (see
/// `floe_query::display_scale::apply_to_write`).
async fn run(
    context: &SessionContext,
    statement: sqlparser::ast::Statement,
    stored: usize,
) -> Result<(Vec<ColumnDesc>, Vec<Row>), AdapterError> {
    let mut plan = query::logical_plan(context, statement).await?;
    plan.plan = floe_query::display_scale::apply_to_write(plan.plan, stored)
        .map_err(AdapterError::Engine)?;
    query::execute(context, plan).await
}

/// Refuses a row its table cannot store: a NULL in a NOT NULL column, or a value
/// its column's stored form cannot hold exactly (see [`unstorable_value`]).
fn check_row(name: &QualifiedName, desc: &RelationDesc, row: &Row) -> Result<(), AdapterError> {
    if let Some(message) = not_null_violation(name, desc, row) {
        return Err(AdapterError::Query {
            code: SqlState::NOT_NULL_VIOLATION,
            message,
        });
    }
    match unstorable_value(desc, row) {
        None => Ok(()),
        Some(error) => Err(value_error(error)),
    }
}

/// The error of the first value in `row` that its column cannot store exactly (a
/// numeric of more digits than a column without a scale keeps, say), naming the
/// column: a table must stay readable after every write it accepts.
pub fn unstorable_value(desc: &RelationDesc, row: &Row) -> Option<floe_repr::ValueError> {
    desc.columns
        .iter()
        .zip(row)
        .find_map(|((column, column_type), datum)| {
            let mut error =
                floe_repr::strconv::check_stored(datum, &column_type.scalar_type).err()?;
            error.message = format!("{} for column \"{column}\"", error.message);
            Some(error)
        })
}

/// The message of a NULL in a NOT NULL column of `row`, if there is one.
pub fn not_null_violation(name: &QualifiedName, desc: &RelationDesc, row: &Row) -> Option<String> {
    let (column, _) = desc
        .columns
        .iter()
        .zip(row)
        .find(|((_, column_type), datum)| !column_type.nullable && matches!(datum, Datum::Null))?
        .0;
    Some(format!(
        "null value in column \"{column}\" of relation \"{}\" violates not-null constraint",
        name.item
    ))
}

/// Where a write's changes go.
pub enum WriteTarget<'a> {
    /// Storage, durably, before the statement answers. An `Arc`, so that the
    /// write runs on a blocking thread rather than an async worker.
    Storage(&'a Arc<Storage>),
    /// A transaction's pending changes: checked against storage now, written
    /// at COMMIT.
    Transaction {
        storage: &'a Storage,
        pending: &'a mut crate::transaction::PendingWrites,
    },
}

/// Writes the changes and turns a refused append into the client's error.
/// A durable write waits for its group commit, which storage writes on a thread of
/// its own: the async workers keep answering other sessions meanwhile.
async fn append(
    target: &mut WriteTarget<'_>,
    id: GlobalId,
    name: &QualifiedName,
    desc: &RelationDesc,
    changes: Vec<(Row, i64)>,
) -> Result<(), AdapterError> {
    let refused = match target {
        WriteTarget::Storage(storage) => storage
            .append_many_async(vec![(id, changes)])
            .await
            .map_err(storage_error)?
            .err(),
        WriteTarget::Transaction { storage, pending } => {
            let refused = storage
                .check(id, &pending.to_check(id, &changes))
                .map_err(storage_error)?
                .err();
            if refused.is_none() {
                let keys = storage.unique_keys(id).map_err(storage_error)?;
                pending.stage(id, name, desc, keys, changes);
            }
            refused
        }
    };
    match refused {
        None => Ok(()),
        Some(refused) => Err(append_error(name, desc, refused)),
    }
}

/// The client's error for an append storage refused.
pub fn append_error(
    name: &QualifiedName,
    desc: &RelationDesc,
    refused: AppendError,
) -> AdapterError {
    match refused {
        AppendError::UniqueViolation { ref index, .. } => {
            let constraint = match index {
                Some(index) => index.clone(),
                None => format!("{}_pkey", name.item),
            };
            let (columns, values) = unique_violation(desc, refused).unwrap_or_default();
            AdapterError::UniqueViolation {
                message: format!("duplicate key value violates unique constraint \"{constraint}\""),
                detail: format!("Key ({columns})=({values}) already exists."),
            }
        }
        AppendError::RetractionOfAbsentRow => {
            AdapterError::Internal(format!("{name} changed while the statement ran"))
        }
    }
}

/// The key's column names and values of a unique violation, as PostgreSQL's detail
/// lists them (`a, b` and `1, x`).
pub fn unique_violation(desc: &RelationDesc, refused: AppendError) -> Option<(String, String)> {
    let AppendError::UniqueViolation { columns, key, .. } = refused else {
        return None;
    };
    let columns: Vec<&str> = columns
        .iter()
        .filter_map(|i| desc.columns.get(*i).map(|(name, _)| name.as_str()))
        .collect();
    let values: Vec<String> = key.iter().map(floe_repr::strconv::format_datum).collect();
    Some((columns.join(", "), values.join(", ")))
}

/// A context serving `rows` as the written table, for RETURNING.
fn returning_context(
    name: &QualifiedName,
    desc: &RelationDesc,
    rows: &[Row],
) -> Result<SessionContext, AdapterError> {
    let returning_context = query::empty_context()?;
    let batch = relation_batch(desc, rows)?;
    register_tables(
        &returning_context,
        vec![EngineTable {
            name: name.clone(),
            schema: relation_schema(desc),
            batches: Arc::new(ScaledBatches {
                batches: vec![batch],
                scales: display_scales(desc, rows),
            }),
            scans: Arc::default(),
        }],
    )?;
    Ok(returning_context)
}

/// The columns a write's RETURNING clause produces (extended protocol
/// Describe), without writing anything.
pub async fn returning_desc(
    name: &QualifiedName,
    desc: &RelationDesc,
    items: &[SelectItem],
) -> Result<Vec<ColumnDesc>, AdapterError> {
    let returning_context = returning_context(name, desc, &[])?;
    let plan = query::logical_plan(&returning_context, returning_query(name, items)?).await?;
    Ok(query::describe(&plan))
}

/// The response of a write: its tag, or the RETURNING rows.
async fn respond(
    tag: String,
    name: &QualifiedName,
    desc: &RelationDesc,
    returning: Option<Vec<SelectItem>>,
    written: Vec<Row>,
) -> Result<ExecuteResponse, AdapterError> {
    let Some(items) = returning else {
        return Ok(ExecuteResponse::Command { tag });
    };
    // The RETURNING items are evaluated over the written rows, served as
    // the table itself in a context of their own.
    let returning_context = returning_context(name, desc, &written)?;
    let statement = returning_query(name, &items)?;
    let (columns, rows) = run(&returning_context, statement, 0).await?;
    Ok(ExecuteResponse::Rows {
        desc: columns,
        rows,
        tag: Some(
            tag.rsplit_once(' ')
                .map(|(t, _)| t.to_string())
                .unwrap_or(tag),
        ),
    })
}

/// A row the engine read back from a table, in exactly the form storage
/// holds it (the engine's Arrow types are not the table's: numeric may come
/// back as text), so retracting it matches the stored row.
fn as_stored(desc: &RelationDesc, row: Row) -> Result<Row, AdapterError> {
    row.into_iter()
        .zip(&desc.columns)
        .map(|(datum, (_, column))| {
            floe_repr::cast::cast_datum(datum, &column.scalar_type).map_err(value_error)
        })
        .collect()
}

/// The defaults of the columns a write does not give, evaluated once per
/// statement.
async fn evaluate_defaults(
    context: &SessionContext,
    defaults: &[Option<String>],
    given: &[usize],
) -> Result<HashMap<usize, Datum>, AdapterError> {
    let missing = missing_defaults(defaults, given);
    let mut values = HashMap::new();
    if missing.is_empty() {
        return Ok(values);
    }
    let expressions: Vec<String> = missing
        .iter()
        .map(|i| defaults[*i].clone().unwrap_or_else(|| "NULL".into()))
        .collect();
    let statement =
        floe_sql_parser::parse_statement(&format!("SELECT {}", expressions.join(", ")))?;
    let floe_sql_parser::ast::Statement::Standard(statement) = statement else {
        return Err(AdapterError::Internal(
            "default expression is not a query".into(),
        ));
    };
    let (_, rows) = run(context, *statement, 0).await?;
    if let Some(row) = rows.into_iter().next() {
        for (index, value) in missing.iter().zip(row) {
            values.insert(*index, value);
        }
    }
    Ok(values)
}

/// The values a `COPY ... FROM STDIN` fills in the columns it is not given that have a
/// default: evaluated once, when the copy begins, as the columns' types.
pub async fn copy_defaults(
    context: &SessionContext,
    plan: &floe_sql::dml::CopyFromPlan,
) -> Result<Vec<(usize, Datum)>, AdapterError> {
    let defaults = evaluate_defaults(context, &plan.defaults, &plan.columns).await?;
    let mut values = Vec::with_capacity(defaults.len());
    for (column, value) in defaults {
        let scalar_type = &plan.desc.columns[column].1.scalar_type;
        let value = floe_repr::cast::cast_datum(value, scalar_type).map_err(value_error)?;
        values.push((column, value));
    }
    Ok(values)
}

/// Whether a `COPY ... FROM STDIN` leaves out a column that has a default.
pub fn copy_needs_defaults(plan: &floe_sql::dml::CopyFromPlan) -> bool {
    !missing_defaults(&plan.defaults, &plan.columns).is_empty()
}

/// The columns a write does not give (`given`) that have a default expression.
fn missing_defaults(defaults: &[Option<String>], given: &[usize]) -> Vec<usize> {
    (0..defaults.len())
        .filter(|i| !given.contains(i) && defaults[*i].is_some())
        .collect()
}

/// Writes the rows of a finished `COPY ... FROM STDIN`, whole or not at all; returns
/// how many. In a transaction they are checked now and written at COMMIT: kept
/// encoded when the transaction has not changed the table otherwise, else joined to
/// its changes as rows.
pub async fn copy_in(
    target: &mut WriteTarget<'_>,
    plan: &floe_sql::dml::CopyFromPlan,
    rows: floe_storage::EncodedInserts,
) -> Result<usize, AdapterError> {
    let count = rows.len();
    let refused = match target {
        WriteTarget::Storage(storage) => storage
            .append_inserts(rows)
            .await
            .map_err(storage_error)?
            .err(),
        WriteTarget::Transaction { pending, .. } if pending.writes(plan.table) => {
            pending.settle_loads().map_err(storage_error)?;
            let rows = rows.decoded_rows().map_err(storage_error)?;
            let changes = rows.into_iter().map(|row| (row, 1)).collect();
            return append(target, plan.table, &plan.name, &plan.desc, changes)
                .await
                .map(|()| count);
        }
        WriteTarget::Transaction { storage, pending } => {
            let refused = storage.check_inserts(&rows).map_err(storage_error)?.err();
            if refused.is_none() {
                let load = crate::transaction::TableLoad {
                    name: plan.name.clone(),
                    desc: plan.desc.clone(),
                    keys: storage.unique_keys(plan.table).map_err(storage_error)?,
                    inserts: rows,
                };
                pending.stage_load(plan.table, load);
            }
            refused
        }
    };
    match refused {
        None => Ok(count),
        Some(refused) => Err(append_error(&plan.name, &plan.desc, refused)),
    }
}

/// Where an INSERT's rows come from.
pub enum InsertSource<'a> {
    /// Read off the statement, and no column left out has a default to evaluate: the
    /// INSERT needs no query engine at all (see `literal_insert`).
    Literal(Vec<Row>),
    /// The engine computes what the statement's literals (`literal`, when they were
    /// read) do not give.
    Engine {
        context: &'a SessionContext,
        literal: Option<Vec<Row>>,
    },
}

/// The rows of `plan`'s source when they are literals (see `literal_insert`).
pub fn literal_rows(plan: &InsertPlan) -> Option<Vec<Row>> {
    let targets: Vec<&floe_repr::SqlScalarType> = plan
        .columns
        .iter()
        .map(|column| &plan.desc.columns[*column].1.scalar_type)
        .collect();
    crate::literal_insert::literal_rows(&plan.source, &targets)
}

/// Whether an INSERT of `rows` of literals leaves out a column that has a default
/// expression (which the engine evaluates).
pub fn defaults_needed(plan: &InsertPlan, rows: &[Row]) -> bool {
    let width = rows.first().map_or(0, Vec::len);
    let given = if plan.columns_named {
        &plan.columns[..]
    } else {
        &plan.columns[..width.min(plan.columns.len())]
    };
    plan.defaults
        .iter()
        .enumerate()
        .any(|(column, default)| default.is_some() && !given.contains(&column))
}

pub async fn insert(
    source: InsertSource<'_>,
    target: &mut WriteTarget<'_>,
    mut plan: InsertPlan,
) -> Result<ExecuteResponse, AdapterError> {
    // Rows of literals are read off the statement (see `literal_insert`); the engine runs
    // anything else.
    let (engine, width, source_rows) = match source {
        InsertSource::Literal(rows) => (None, rows.first().map_or(0, Vec::len), rows),
        InsertSource::Engine { context, literal } => match literal {
            Some(rows) => (Some(context), rows.first().map_or(0, Vec::len), rows),
            None => {
                let (source_desc, rows) = run(context, *plan.source, 0).await?;
                (Some(context), source_desc.len(), rows)
            }
        },
    };
    if !plan.columns_named {
        // No column list: the source fills the table's first columns.
        plan.columns.truncate(width);
    }
    if width > plan.columns.len() {
        return Err(AdapterError::Query {
            code: SqlState::SYNTAX_ERROR,
            message: "INSERT has more expressions than target columns".into(),
        });
    }
    if width < plan.columns.len() && !source_rows.is_empty() {
        return Err(AdapterError::Query {
            code: SqlState::SYNTAX_ERROR,
            message: "INSERT has more target columns than expressions".into(),
        });
    }
    let defaults = match engine {
        // `literal_insert` made sure no default is needed.
        None => HashMap::new(),
        Some(context) => evaluate_defaults(context, &plan.defaults, &plan.columns).await?,
    };
    let mut written = Vec::with_capacity(source_rows.len());
    for source_row in source_rows {
        let mut row: Row = (0..plan.desc.columns.len())
            .map(|i| defaults.get(&i).cloned().unwrap_or(Datum::Null))
            .collect();
        for (value, column) in source_row.into_iter().zip(&plan.columns) {
            row[*column] = value;
        }
        for (datum, (_, column_type)) in row.iter_mut().zip(&plan.desc.columns) {
            let value = std::mem::replace(datum, Datum::Null);
            *datum = floe_repr::cast::cast_datum(value, &column_type.scalar_type)
                .map_err(value_error)?;
        }
        check_row(&plan.name, &plan.desc, &row)?;
        written.push(row);
    }
    let changes = written.iter().map(|r| (r.clone(), 1)).collect();
    let table = (plan.table, &plan.name, &plan.desc);
    append_and_respond(target, table, changes, "INSERT 0", plan.returning, written).await
}

/// An UPDATE or a DELETE: a write that reads the rows it changes with a query over its
/// table (Materialize's read-then-write), then turns each row read into changes.
pub enum ReadThenWrite {
    Update(UpdatePlan),
    Delete(DeletePlan),
}

impl ReadThenWrite {
    /// The query that reads the rows the write changes.
    pub fn query(&self) -> &sqlparser::ast::Statement {
        match self {
            ReadThenWrite::Update(plan) => &plan.query,
            ReadThenWrite::Delete(plan) => &plan.query,
        }
    }
}

/// Runs an UPDATE or a DELETE: the rows its query reads become changes to its table.
pub async fn read_then_write(
    context: &SessionContext,
    target: &mut WriteTarget<'_>,
    write: ReadThenWrite,
) -> Result<ExecuteResponse, AdapterError> {
    match write {
        ReadThenWrite::Update(plan) => {
            let (_, rows) = run(context, *plan.query, plan.desc.columns.len()).await?;
            let (changes, written) = updated_rows(&plan.name, &plan.desc, &plan.assigned, rows)?;
            let table = (plan.table, &plan.name, &plan.desc);
            append_and_respond(target, table, changes, "UPDATE", plan.returning, written).await
        }
        ReadThenWrite::Delete(plan) => {
            let (_, rows) = run(context, *plan.query, plan.desc.columns.len()).await?;
            let rows = rows
                .into_iter()
                .map(|row| as_stored(&plan.desc, row))
                .collect::<Result<Vec<_>, _>>()?;
            let changes = rows.iter().map(|r| (r.clone(), -1)).collect();
            let table = (plan.table, &plan.name, &plan.desc);
            append_and_respond(target, table, changes, "DELETE", plan.returning, rows).await
        }
    }
}

/// Rows added (`+1`) and retracted (`-1`), as a write appends them.
type Changes = Vec<(Row, i64)>;

/// An UPDATE's changes and its new rows: each row its query read is the table's columns
/// followed by the values of the `assigned` columns; the old row is retracted and the
/// new one added.
fn updated_rows(
    name: &QualifiedName,
    desc: &RelationDesc,
    assigned: &[usize],
    rows: Vec<Row>,
) -> Result<(Changes, Vec<Row>), AdapterError> {
    let width = desc.columns.len();
    let mut changes = Vec::with_capacity(rows.len() * 2);
    let mut written = Vec::with_capacity(rows.len());
    for row in rows {
        let (old, values) = row.split_at(width.min(row.len()));
        let old = as_stored(desc, old.to_vec())?;
        let mut new = old.clone();
        for (column, value) in assigned.iter().zip(values) {
            new[*column] =
                floe_repr::cast::cast_datum(value.clone(), &desc.columns[*column].1.scalar_type)
                    .map_err(value_error)?;
        }
        check_row(name, desc, &new)?;
        changes.push((old, -1));
        changes.push((new.clone(), 1));
        written.push(new);
    }
    Ok((changes, written))
}

/// Appends `changes` to the `table` (id, name, relation) and answers with `tag` and the
/// count of `written` rows, RETURNING evaluated over them: how INSERT, UPDATE and DELETE
/// end.
async fn append_and_respond(
    target: &mut WriteTarget<'_>,
    table: (GlobalId, &QualifiedName, &RelationDesc),
    changes: Vec<(Row, i64)>,
    tag: &str,
    returning: Option<Vec<SelectItem>>,
    written: Vec<Row>,
) -> Result<ExecuteResponse, AdapterError> {
    let (id, name, desc) = table;
    let tag = format!("{tag} {}", written.len());
    append(target, id, name, desc, changes).await?;
    respond(tag, name, desc, returning, written).await
}

/// The tables and sources the storage layer holds, from the catalog.
pub fn storage_collections(
    state: &floe_catalog::CatalogState,
) -> Vec<(GlobalId, QualifiedName, RelationDesc)> {
    state
        .items()
        .filter_map(|item| match &item.definition {
            ItemDefinition::Table(table) => Some((item.id, item.name.clone(), table.desc.clone())),
            ItemDefinition::Source(source) => {
                Some((item.id, item.name.clone(), source.desc.clone()))
            }
            ItemDefinition::MaterializedView(view) => {
                Some((item.id, item.name.clone(), view.desc.clone()))
            }
            _ => None,
        })
        .collect()
}
