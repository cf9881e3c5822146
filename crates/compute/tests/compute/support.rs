//! Helpers: tables as in-memory change logs, views maintained over them, and
//! DataFusion's batch evaluation of the same query as the reference.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_compute::maintain::{InputLog, Maintainer, OutputLog, View};
use floe_compute::memory::MemoryLog;
use floe_compute::planner::session_for;
use floe_compute::replica::{DataflowSpec, InputSpec, Replica, ReplicaConfig};
use floe_repr::{ColumnType, Datum, RelationDesc, Row, SqlScalarType};

/// A table: its name, shape and change log.
#[derive(Clone)]
pub struct Table {
    pub name: String,
    pub desc: RelationDesc,
    pub log: MemoryLog,
}

impl Table {
    pub fn new(name: &str, columns: &[(&str, SqlScalarType)]) -> Table {
        let desc = RelationDesc {
            columns: columns
                .iter()
                .map(|(n, t)| {
                    (
                        n.to_string(),
                        ColumnType {
                            scalar_type: t.clone(),
                            nullable: true,
                        },
                    )
                })
                .collect(),
            ..RelationDesc::default()
        };
        let log = MemoryLog::new();
        log.advance(1);
        Table {
            name: format!("materialize.public.{name}"),
            desc,
            log,
        }
    }

    pub fn insert(&self, rows: Vec<Row>) -> u64 {
        self.log.write(rows.into_iter().map(|r| (r, 1)).collect())
    }

    pub fn delete(&self, rows: Vec<Row>) -> u64 {
        self.log.write(rows.into_iter().map(|r| (r, -1)).collect())
    }

    pub fn contents(&self) -> Vec<Row> {
        expand(self.log.contents_at(u64::MAX - 1).rows)
    }
}

pub fn expand(rows: Vec<(Row, i64)>) -> Vec<Row> {
    let mut out = Vec::new();
    for (row, count) in rows {
        for _ in 0..count.max(0) {
            out.push(row.clone());
        }
    }
    out
}

pub fn spec(id: u64, query: &str, tables: &[&Table]) -> DataflowSpec {
    DataflowSpec {
        id,
        name: format!("view{id}"),
        query: query.to_string(),
        inputs: tables
            .iter()
            .map(|t| InputSpec {
                name: t.name.clone(),
                desc: t.desc.clone(),
            })
            .collect(),
        as_of: 0,
    }
}

pub fn replica(workers: usize) -> Arc<Replica> {
    Arc::new(
        Replica::start(
            ReplicaConfig {
                workers,
                cluster: None,
            },
            floe_compute::planner::sql_planner(),
        )
        .expect("replica starts"),
    )
}

/// A view maintained into an in-memory output log.
pub struct Maintained {
    pub maintainer: Maintainer,
    pub output: MemoryLog,
    pub tables: Vec<Table>,
}

pub fn maintain(
    replica: &Arc<Replica>,
    id: u64,
    query: &str,
    tables: &[&Table],
    output: MemoryLog,
) -> Maintained {
    let view = View {
        spec: spec(id, query, tables),
        inputs: tables
            .iter()
            .map(|t| Arc::new(t.log.clone()) as Arc<dyn InputLog>)
            .collect(),
        output: Box::new(output.clone()) as Box<dyn OutputLog>,
    };
    Maintained {
        maintainer: Maintainer::start(replica.clone(), view),
        output,
        tables: tables.iter().map(|t| (*t).clone()).collect(),
    }
}

impl Maintained {
    /// Waits until the view's log is complete up to every input's upper and
    /// returns its contents (rows sorted) and errors there.
    pub fn settle(&self) -> (Vec<Row>, Vec<String>) {
        let target = self
            .tables
            .iter()
            .map(|t| t.log.current_upper())
            .min()
            .unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let upper = self.output.current_upper();
            if upper >= target && upper > 0 {
                let contents = self.output.contents_at(upper - 1);
                let mut rows = expand(contents.rows);
                sort_rows(&mut rows);
                let errors = contents
                    .errors
                    .into_iter()
                    .map(|(e, _)| e.message)
                    .collect();
                return (rows, errors);
            }
            assert!(
                Instant::now() < deadline,
                "view did not reach {target} (upper {upper}, status {:?})",
                self.maintainer.status()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

pub fn sort_rows(rows: &mut [Row]) {
    rows.sort_by_key(|r| format!("{r:?}"));
}

/// DataFusion's batch answer to `query` over the tables' current contents.
pub fn batch_answer(query: &str, tables: &[&Table]) -> Result<Vec<Row>, String> {
    let spec = spec(0, query, tables);
    let context = session_for(&spec).map_err(|e| e.to_string())?;
    for table in tables {
        let batch =
            floe_arrow::rows_to_batch(&table.desc, &table.contents()).map_err(|e| e.to_string())?;
        let provider = datafusion::datasource::MemTable::try_new(batch.schema(), vec![vec![batch]])
            .map_err(|e| e.to_string())?;
        let _ = context.deregister_table(table.name.as_str());
        context
            .register_table(table.name.as_str(), Arc::new(provider))
            .map_err(|e| e.to_string())?;
    }
    let frame = runtime()
        .block_on(context.sql(query))
        .map_err(|e| e.to_string())?;
    let fields: Vec<datafusion::arrow::datatypes::Field> = frame
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let batches = runtime()
        .block_on(frame.collect())
        .map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for batch in batches {
        let columns: Vec<Vec<Datum>> = batch
            .columns()
            .iter()
            .zip(&fields)
            .map(|(a, f)| floe_arrow::array_to_datums(a, f))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        for i in 0..batch.num_rows() {
            rows.push(columns.iter().map(|c| c[i].clone()).collect());
        }
    }
    sort_rows(&mut rows);
    Ok(rows)
}

/// Rows from small literals.
pub fn int_rows(rows: &[&[Option<i64>]]) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| v.map_or(Datum::Null, Datum::Int64))
                .collect()
        })
        .collect()
}

/// A histogram of rows, for readable assertion failures.
pub fn counts(rows: &[Row]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for row in rows {
        *out.entry(format!("{row:?}")).or_insert(0) += 1;
    }
    out
}

/// A runtime for DataFusion's batch execution.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}
