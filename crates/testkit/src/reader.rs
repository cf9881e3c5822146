//! An independent reader: DuckDB's iceberg extension (deletes applied) for the rows,
//! pyiceberg for the metadata (`peers/reader.py`), and a reference writer of a table with
//! equality and position deletes (`peers/write_deletes.py`, pyiceberg's low-level API).
//!
//! ```no_run
//! let sw = floe_testkit::seaweedfs_shared();
//! # let (ns, t) = ("ns", "t");
//! let read = floe_testkit::Reader::for_seaweedfs(sw).read(&sw.metadata_location(ns, t));
//! let rows = read.sorted_rows(&["id"]);
//! let last = read.current_snapshot().unwrap();
//! assert_eq!(last["summary"]["mz-sink-id"], "u1");
//! ```

use crate::process::run_python;
use crate::seaweedfs::SeaweedFs;
use serde_json::{Value, json};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(120);

/// S3 access for the reader.
#[derive(Clone, Debug)]
pub struct S3Access {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub credentials: crate::AwsCredentials,
    pub region: String,
}

/// A DuckDB/pyiceberg reader. `Reader::local()` for local metadata files,
/// `Reader::for_seaweedfs(sw)` / `Reader::s3(..)` for `s3://` locations.
#[derive(Clone, Debug)]
pub struct Reader {
    s3: Option<S3Access>,
}

/// A column as DuckDB types it (`BIGINT`, `VARCHAR`, `DECIMAL(38,10)`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: String,
}

/// What the reader saw.
#[derive(Clone, Debug)]
pub struct TableRead {
    pub columns: Vec<Column>,
    /// One JSON object per row, keyed by column name. DECIMAL as string, temporal types
    /// in ISO 8601, BLOB as hex, UUID as string.
    pub rows: Vec<Value>,
    /// The metadata.json document.
    pub metadata: Value,
    /// `metadata.snapshots` (each with its `summary`).
    pub snapshots: Vec<Value>,
    pub current_snapshot_id: Option<i64>,
    /// Live files of the current snapshot: `{"content": "data" | "position_deletes" |
    /// "equality_deletes", "file_path", "record_count", "equality_ids",
    /// "sequence_number", "manifest_content", "column_sizes", "value_counts",
    /// "null_value_counts", "lower_bounds", "upper_bounds" (hex), ...}`.
    pub files: Vec<Value>,
    /// The current snapshot's manifests: `{"manifest_path", "content", "partition_spec_id",
    /// "partitions": [{"contains_null", "contains_nan", "lower_bound", "upper_bound"}]}`
    /// (bounds in hex, as Iceberg serializes single values).
    pub manifests: Vec<Value>,
    /// With [`Reader::read_filtered_with_pyiceberg`]: the data files its scan plan reads.
    pub planned_files: Vec<String>,
}

impl TableRead {
    /// Rows sorted by the given columns (then by their JSON text).
    pub fn sorted_rows(&self, by: &[&str]) -> Vec<Value> {
        let mut rows = self.rows.clone();
        rows.sort_by(|a, b| {
            for key in by {
                let o = cmp_json(&a[*key], &b[*key]);
                if o != Ordering::Equal {
                    return o;
                }
            }
            a.to_string().cmp(&b.to_string())
        });
        rows
    }
    /// The current snapshot's entry of `snapshots`.
    pub fn current_snapshot(&self) -> Option<&Value> {
        let id = self.current_snapshot_id?;
        self.snapshots
            .iter()
            .find(|s| s["snapshot-id"].as_i64() == Some(id))
    }
    /// Live files with this content (`data`, `position_deletes`, `equality_deletes`).
    pub fn files_with_content(&self, content: &str) -> Vec<&Value> {
        self.files
            .iter()
            .filter(|f| f["content"] == content)
            .collect()
    }

    /// The live deletion vectors of a format version 3 table, by the data file each
    /// applies to; panics on a position delete file that is no deletion vector (a v3
    /// table takes none) or a vector that names no data file.
    pub fn deletion_vectors_by_data_file(&self) -> HashMap<String, Vec<&Value>> {
        let mut by_file: HashMap<String, Vec<&Value>> = HashMap::new();
        for file in self.files_with_content("position_deletes") {
            assert_eq!(
                file["file_format"], "puffin",
                "a v3 table takes no position delete files: {file}"
            );
            let target = file["referenced_data_file"]
                .as_str()
                .unwrap_or_else(|| panic!("a deletion vector names its data file: {file}"));
            by_file.entry(target.to_string()).or_default().push(file);
        }
        by_file
    }
}

impl TableRead {
    /// The rows that position delete files delete from a data file with a deletion
    /// vector which the vector leaves out, by data file (read with
    /// [`Reader::read_with_delete_positions`]). A reader ignores a file's position delete
    /// files once it has a vector (Iceberg's spec), so the vector must hold them all.
    pub fn position_deletes_missing_from_vectors(&self) -> BTreeMap<String, Vec<u64>> {
        let deletes = self.files_with_content("position_deletes");
        let mut missing = BTreeMap::new();
        for vector in deletes.iter().filter(|f| f["file_format"] == "puffin") {
            let target = vector["referenced_data_file"].as_str().unwrap_or_default();
            let held: HashSet<u64> = positions(&vector["positions"]).into_iter().collect();
            let mut left_out: Vec<u64> = deletes
                .iter()
                .flat_map(|file| positions(&file["positions_by_file"][target]))
                .filter(|pos| !held.contains(pos))
                .collect();
            left_out.sort_unstable();
            left_out.dedup();
            if !left_out.is_empty() {
                missing.insert(target.to_string(), left_out);
            }
        }
        missing
    }
}

impl TableRead {
    /// How many data files have both a deletion vector and rows a position delete file
    /// deletes (read with [`Reader::read_with_delete_positions`]): the files
    /// [`TableRead::position_deletes_missing_from_vectors`] checks.
    pub fn files_with_vector_and_position_deletes(&self) -> usize {
        let deletes = self.files_with_content("position_deletes");
        deletes
            .iter()
            .filter(|f| f["file_format"] == "puffin")
            .filter(|vector| {
                let target = vector["referenced_data_file"].as_str().unwrap_or_default();
                deletes
                    .iter()
                    .any(|file| !positions(&file["positions_by_file"][target]).is_empty())
            })
            .count()
    }
}

fn positions(list: &Value) -> Vec<u64> {
    list.as_array()
        .map(|list| list.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

fn cmp_json(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        _ => a.to_string().cmp(&b.to_string()),
    }
}

impl Reader {
    /// For metadata on the local file system.
    pub fn local() -> Reader {
        Reader { s3: None }
    }
    /// For `s3://` locations at an S3 endpoint.
    pub fn s3(access: S3Access) -> Reader {
        Reader { s3: Some(access) }
    }
    /// For tables in a SeaweedFS instance (its S3 endpoint and key pair).
    pub fn for_seaweedfs(sw: &SeaweedFs) -> Reader {
        Reader::s3(S3Access {
            endpoint: sw.s3_endpoint(),
            credentials: sw.credentials(),
            region: sw.region().to_string(),
        })
    }

    /// Like [`Reader::read`], but the rows are those pyiceberg's own scan reads (it
    /// applies position deletes and refuses equality deletes).
    pub fn read_with_pyiceberg(&self, metadata_location: &str) -> TableRead {
        let mut request = self.request(metadata_location, None);
        request["engine"] = json!("pyiceberg");
        self.run_request(&request)
    }

    /// Like [`Reader::read`], and each live position delete file says what it deletes:
    /// a deletion vector its `positions`, a position delete file its `positions_by_file`
    /// (data file path -> positions).
    pub fn read_with_delete_positions(&self, metadata_location: &str) -> TableRead {
        let mut request = self.request(metadata_location, None);
        request["delete_positions"] = json!(true);
        self.run_request(&request)
    }

    /// pyiceberg's scan with `row_filter` (such as `"id = 3"`): its rows, and in
    /// `planned_files` the data files its plan reads (partition pruning shows there).
    pub fn read_filtered_with_pyiceberg(
        &self,
        metadata_location: &str,
        row_filter: &str,
    ) -> TableRead {
        let mut request = self.request(metadata_location, None);
        request["engine"] = json!("pyiceberg");
        request["row_filter"] = json!(row_filter);
        self.run_request(&request)
    }

    /// How long DuckDB takes to run `sql` (as in [`Reader::query`]) on the table, `repeat`
    /// times in one connection (extensions loaded before the first): each run's time.
    /// For benchmarks.
    pub fn time_query(&self, metadata_location: &str, sql: &str, repeat: usize) -> Vec<f64> {
        let mut request = self.request(metadata_location, Some(sql));
        request["repeat"] = json!(repeat);
        let out = run_python("reader.py", &request, TIMEOUT);
        out["query_seconds"]
            .as_array()
            .map(|runs| runs.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    }

    fn request(&self, location: &str, query: Option<&str>) -> Value {
        let s3 = self.s3.as_ref().map(|s| {
            json!({
                "endpoint": s.endpoint,
                "access_key_id": s.credentials.access_key_id,
                "secret_access_key": s.credentials.secret_access_key,
                "session_token": s.credentials.session_token,
                "region": s.region,
            })
        });
        json!({"location": location, "s3": s3, "query": query})
    }

    /// All rows (as DuckDB reads them, deletes applied) and the metadata of the table
    /// whose metadata.json is at `metadata_location`.
    pub fn read(&self, metadata_location: &str) -> TableRead {
        self.run(metadata_location, None)
    }

    /// Like [`Reader::read`], but the rows are those of `sql`, in which the table is `t`
    /// (e.g. `SELECT id, count(*) AS n FROM t GROUP BY id`).
    pub fn query(&self, metadata_location: &str, sql: &str) -> TableRead {
        self.run(metadata_location, Some(sql))
    }

    fn run(&self, location: &str, sql: Option<&str>) -> TableRead {
        self.run_request(&self.request(location, sql))
    }

    fn run_request(&self, request: &Value) -> TableRead {
        let out = run_python("reader.py", request, TIMEOUT);
        TableRead {
            columns: out["columns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .map(|c| Column {
                            name: c["name"].as_str().unwrap_or_default().into(),
                            ty: c["type"].as_str().unwrap_or_default().into(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            rows: out["rows"].as_array().cloned().unwrap_or_default(),
            snapshots: out["snapshots"].as_array().cloned().unwrap_or_default(),
            current_snapshot_id: out["current_snapshot_id"].as_i64().filter(|id| *id >= 0),
            files: out["files"].as_array().cloned().unwrap_or_default(),
            manifests: out["manifests"].as_array().cloned().unwrap_or_default(),
            planned_files: out["planned_files"]
                .as_array()
                .map(|files| {
                    files
                        .iter()
                        .filter_map(|f| f.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            metadata: out["metadata"].clone(),
        }
    }
}

/// A table written by pyiceberg (not floe) with equality and position deletes.
#[derive(Clone, Debug)]
pub struct ReferenceTable {
    pub metadata_location: String,
    /// The rows a correct reader returns: `{"id": 1, "name": "a"}`, ... sorted by id.
    pub expected_rows: Vec<Value>,
    /// Snapshot ids in commit order (an append, then a row delta).
    pub snapshot_ids: Vec<i64>,
}

/// Writes table `namespace.table` into `sw` with pyiceberg's low-level API (see
/// `peers/write_deletes.py`): an append of (1,a) (2,b) (3,c) (4,d), then one row delta
/// adding data (3,c2) (5,e), a position delete of (2,b) and an equality delete of id=3,
/// which removes (3,c) but not (3,c2). The namespace is created if needed.
pub fn write_reference_table_with_deletes(
    sw: &SeaweedFs,
    namespace: &str,
    table: &str,
) -> ReferenceTable {
    let out = run_python(
        "write_deletes.py",
        &json!({
            "catalog_url": sw.catalog_url(),
            "client_id": sw.access_key(),
            "client_secret": sw.secret_key(),
            "warehouse": sw.warehouse(),
            "s3_endpoint": sw.s3_endpoint(),
            "region": sw.region(),
            "namespace": namespace,
            "table": table,
        }),
        TIMEOUT,
    );
    reference_table(&out)
}

/// Like [`write_reference_table_with_deletes`], on the local file system: pyiceberg's
/// SQLite catalog in `dir`, data and metadata under `dir` (`file://` locations). Read it
/// with [`Reader::local`].
pub fn write_local_reference_table_with_deletes(
    dir: &std::path::Path,
    namespace: &str,
    table: &str,
) -> ReferenceTable {
    let out = run_python(
        "write_deletes.py",
        &json!({"local_dir": dir, "namespace": namespace, "table": table}),
        TIMEOUT,
    );
    reference_table(&out)
}

fn reference_table(out: &Value) -> ReferenceTable {
    ReferenceTable {
        metadata_location: out["metadata_location"]
            .as_str()
            .expect("metadata_location")
            .to_string(),
        expected_rows: out["expected_rows"].as_array().cloned().unwrap_or_default(),
        snapshot_ids: out["snapshot_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
    }
}
