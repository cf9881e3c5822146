//! Tables whose rows a plan reads when it runs, not when it is planned.
//!
//! Each query's session holds a [`Snapshot`]: the rows of every table the
//! statement reads, as of the statement (or as a transaction first read them).
//! The engine sees each table as a [`SnapshotTable`], whose scan is a
//! [`SnapshotScanExec`] that names the table and finds its rows in the running
//! task's snapshot. A physical plan therefore holds no rows of its own, and
//! [`crate::plan_cache`] can run it again over a later snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{Result as DfResult, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};

/// A table's name as the engine's catalog holds it: `(schema, name)`.
pub type TableName = (String, String);

/// A table's rows as a scan reads them: batches of the columns it asks for. A table
/// kept in another form converts a column when a scan first needs it, since a query
/// often reads a few columns of a wide table.
pub trait TableBatches: std::fmt::Debug + Send + Sync {
    /// How many rows the table has.
    fn num_rows(&self) -> usize;

    /// The rows as batches of the columns `projection` names (every column when
    /// `None`), in its order, each batch with `schema.project(projection)` as its
    /// schema (`schema` is the table's). With a `limit`, batches enough to hold that
    /// many rows when the table has them.
    fn batches(
        &self,
        schema: &SchemaRef,
        projection: Option<&[usize]>,
        limit: Option<usize>,
    ) -> DfResult<Vec<RecordBatch>>;

    /// The display scale of each row's value of the unconstrained numeric column
    /// `column`, as stored (`1.50` has 2), in the rows' order: an `Int32` array of
    /// every row (of an array of numerics, a list of its items'), NULL where the
    /// value is; `None` when the rows keep no scales (the values then print
    /// without trailing zeros).
    fn display_scales(&self, _column: usize) -> DfResult<Option<ArrayRef>> {
        Ok(None)
    }
}

pub use floe_arrow::{stored_scale, stored_scales, stored_scales_of};

/// Batches converted already, with the display scales of their unconstrained
/// numeric columns as the rows they were made from held them.
#[derive(Debug, Clone)]
pub struct ScaledBatches {
    pub batches: Vec<RecordBatch>,
    /// By column: every row's display scale, where the column is an
    /// unconstrained numeric.
    pub scales: HashMap<usize, ArrayRef>,
}

impl TableBatches for ScaledBatches {
    fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    fn batches(
        &self,
        schema: &SchemaRef,
        projection: Option<&[usize]>,
        limit: Option<usize>,
    ) -> DfResult<Vec<RecordBatch>> {
        ReadyBatches(self.batches.clone()).batches(schema, projection, limit)
    }

    fn display_scales(&self, column: usize) -> DfResult<Option<ArrayRef>> {
        Ok(self.scales.get(&column).cloned())
    }
}

/// Batches converted already: a transaction's view of a table, RETURNING's rows.
#[derive(Debug, Clone)]
pub struct ReadyBatches(pub Vec<RecordBatch>);

impl TableBatches for ReadyBatches {
    fn num_rows(&self) -> usize {
        self.0.iter().map(RecordBatch::num_rows).sum()
    }

    fn batches(
        &self,
        _schema: &SchemaRef,
        projection: Option<&[usize]>,
        _limit: Option<usize>,
    ) -> DfResult<Vec<RecordBatch>> {
        match projection {
            Some(columns) => Ok(self
                .0
                .iter()
                .map(|batch| batch.project(columns))
                .collect::<Result<_, _>>()?),
            None => Ok(self.0.clone()),
        }
    }
}

/// The rows of one table in a query's snapshot.
#[derive(Debug, Clone)]
pub struct TableRows {
    pub schema: SchemaRef,
    pub batches: Arc<dyn TableBatches>,
    /// Counts the scans that ran (`pg_stat_get_numscans`): a plan only described
    /// counts nothing, and a cached plan counts each time it runs.
    pub scans: Arc<AtomicU64>,
}

/// The rows each table of a query reads, and the catalog revision the
/// session was built at; a session's extension (see [`snapshot_of`]).
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The catalog's revision when the session was built: the plans cached under
    /// it were made for this catalog.
    revision: AtomicU64,
    tables: Mutex<HashMap<TableName, TableRows>>,
}

impl Snapshot {
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    /// Records the catalog revision the session's tables were taken at.
    pub fn set_revision(&self, revision: u64) {
        self.revision.store(revision, Ordering::Relaxed);
    }

    fn rows(&self, name: &TableName) -> Option<TableRows> {
        self.tables.lock().ok()?.get(name).cloned()
    }

    /// The schema the session's table `name` has, if it has one.
    pub fn schema(&self, name: &TableName) -> Option<SchemaRef> {
        Some(self.tables.lock().ok()?.get(name)?.schema.clone())
    }
}

/// The snapshot of `context` (every session from `Engine::context` has one).
pub fn snapshot_of(context: &SessionContext) -> Arc<Snapshot> {
    let state = context.state_ref();
    let state = state.read();
    state
        .config()
        .get_extension::<Snapshot>()
        .unwrap_or_default()
}

/// Registers `rows` as the table `name` of `context`'s catalog, replacing a table
/// of that name (a transaction's view of a table), and puts them in its snapshot.
pub fn register_table(
    context: &SessionContext,
    catalog: &str,
    name: TableName,
    rows: TableRows,
) -> DfResult<()> {
    let Some(provider_catalog) = context.catalog(catalog) else {
        return internal_err!("no catalog {catalog}");
    };
    let schema = match provider_catalog.schema(&name.0) {
        Some(schema) => schema,
        None => {
            let schema: Arc<dyn datafusion::catalog::SchemaProvider> =
                Arc::new(datafusion::catalog::MemorySchemaProvider::new());
            provider_catalog.register_schema(&name.0, schema.clone())?;
            schema
        }
    };
    let table = SnapshotTable {
        name: name.clone(),
        schema: rows.schema.clone(),
        rows: rows.batches.num_rows(),
        scale_columns: Vec::new(),
    };
    schema.deregister_table(&name.1)?;
    schema.register_table(name.1.clone(), Arc::new(table))?;
    let snapshot = snapshot_of(context);
    let Ok(mut tables) = snapshot.tables.lock() else {
        return internal_err!("the query's snapshot is poisoned");
    };
    tables.insert(name, rows);
    Ok(())
}

/// A table of the query's snapshot, as the planner sees it: its schema and, for
/// join ordering, its size when planned (inexact: a cached plan runs on later rows).
#[derive(Debug)]
pub struct SnapshotTable {
    pub name: TableName,
    pub schema: SchemaRef,
    rows: usize,
    /// The unconstrained numeric columns (and arrays of them) whose display scales
    /// follow the table's columns, as columns of their own (see
    /// [`SnapshotTable::with_scales`]).
    scale_columns: Vec<usize>,
}

impl SnapshotTable {
    /// The table with a column of the display scales of each of `columns` (its
    /// unconstrained numerics) after its own, which `crate::display_scale` reads;
    /// the table planned from SQL has none, so `*` never names them.
    pub fn with_scales(&self, columns: Vec<usize>) -> SnapshotTable {
        SnapshotTable {
            name: self.name.clone(),
            schema: self.schema.clone(),
            rows: self.rows,
            scale_columns: columns,
        }
    }

    /// The table's columns, then its scale columns.
    fn scaled_schema(&self) -> SchemaRef {
        if self.scale_columns.is_empty() {
            return self.schema.clone();
        }
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for column in &self.scale_columns {
            let field = self.schema.field(*column);
            fields.push(floe_arrow::stored_scale_field(field, *column));
        }
        Arc::new(Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        ))
    }
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.scaled_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let scaled = self.scaled_schema();
        let projected = match projection {
            Some(columns) => Arc::new(scaled.project(columns)?),
            None => scaled,
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(projected.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Arc::new(SnapshotScanExec {
            name: self.name.clone(),
            table_schema: self.schema.clone(),
            projection: projection.cloned(),
            scale_columns: self.scale_columns.clone(),
            limit,
            rows: self.rows,
            properties: Arc::new(properties),
        }))
    }
}

/// Reads a table's rows from the running task's [`Snapshot`].
#[derive(Debug)]
pub struct SnapshotScanExec {
    name: TableName,
    /// The whole table's schema, checked against the snapshot's: a plan made for
    /// another shape of the table must not read it.
    table_schema: SchemaRef,
    projection: Option<Vec<usize>>,
    /// The columns whose display scales follow the table's in the projection's
    /// numbering (see [`SnapshotTable::with_scales`]).
    scale_columns: Vec<usize>,
    limit: Option<usize>,
    /// The table's rows when planned, for the optimizer's estimates.
    rows: usize,
    properties: Arc<PlanProperties>,
}

impl DisplayAs for SnapshotScanExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "SnapshotScanExec: {}.{}", self.name.0, self.name.1)
    }
}

impl ExecutionPlan for SnapshotScanExec {
    fn name(&self) -> &'static str {
        "SnapshotScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("a snapshot scan has one partition, not {partition}");
        }
        let rows = context
            .session_config()
            .get_extension::<Snapshot>()
            .and_then(|snapshot| snapshot.rows(&self.name));
        let Some(rows) = rows else {
            return internal_err!(
                "{}.{} is not in the query's snapshot",
                self.name.0,
                self.name.1
            );
        };
        if rows.schema != self.table_schema {
            return internal_err!(
                "{}.{} changed shape since planned",
                self.name.0,
                self.name.1
            );
        }
        rows.scans.fetch_add(1, Ordering::Relaxed);
        let batches = if self.scale_columns.is_empty() {
            rows.batches
                .batches(&self.table_schema, self.projection.as_deref(), self.limit)?
        } else {
            self.scaled_batches(&rows)?
        };
        let stream = MemoryStream::try_new(batches, self.schema(), None)?.with_fetch(self.limit);
        Ok(Box::pin(stream))
    }

    fn partition_statistics(&self, _partition: Option<usize>) -> DfResult<Arc<Statistics>> {
        Ok(Arc::new(
            Statistics::new_unknown(&self.schema()).with_num_rows(Precision::Inexact(self.rows)),
        ))
    }
}

impl SnapshotScanExec {
    /// The projected batches of a scan that also reads display scales: the table's
    /// columns of the projection read as any scan reads them, each scale column the
    /// slice of the table's scales beside its batch's rows (all NULL where the rows
    /// keep no scales).
    fn scaled_batches(&self, rows: &TableRows) -> DfResult<Vec<RecordBatch>> {
        let width = self.table_schema.fields().len();
        let wanted: Vec<usize> = match &self.projection {
            Some(columns) => columns.clone(),
            None => (0..width + self.scale_columns.len()).collect(),
        };
        let own: Vec<usize> = wanted.iter().copied().filter(|c| *c < width).collect();
        let batches = rows
            .batches
            .batches(&self.table_schema, Some(&own), self.limit)?;
        let mut scales = HashMap::new();
        for column in wanted.iter().filter(|c| **c >= width) {
            let Some(scaled) = self.scale_columns.get(column - width) else {
                return internal_err!("a scale column past the table's");
            };
            scales.insert(*column, rows.batches.display_scales(*scaled)?);
        }
        let schema = self.schema();
        let no_scales = |column: usize, length: usize| {
            let data_type = schema.field(column).data_type();
            datafusion::arrow::array::new_null_array(data_type, length)
        };
        let mut offset = 0;
        let mut out = Vec::with_capacity(batches.len());
        for batch in batches {
            let length = batch.num_rows();
            let mut own_columns = batch.columns().iter();
            let mut columns = Vec::with_capacity(wanted.len());
            for (position, column) in wanted.iter().enumerate() {
                if *column < width {
                    match own_columns.next() {
                        Some(array) => columns.push(array.clone()),
                        None => return internal_err!("a scan's batch lacks a column"),
                    }
                    continue;
                }
                let array = match scales.get(column).cloned().flatten() {
                    Some(all) if all.len() >= offset + length => all.slice(offset, length),
                    _ => no_scales(position, length),
                };
                columns.push(array);
            }
            out.push(RecordBatch::try_new_with_options(
                schema.clone(),
                columns,
                &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(length)),
            )?);
            offset += length;
        }
        Ok(out)
    }
}
