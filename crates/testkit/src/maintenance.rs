//! Foreign maintenance of Iceberg tables: what Spark, AWS S3 Tables or Databricks do to the
//! tables floe writes, done here by pyiceberg (`peers/maintenance.py`), never by floe.
//!
//! ```no_run
//! use floe_testkit::maintenance::{Maintenance, maintain};
//! let sw = floe_testkit::seaweedfs_shared();
//! // A compaction that really rewrites the files, then removal of every older snapshot.
//! maintain(sw, "ns", "t", &[Maintenance::compact(), Maintenance::Expire]);
//! ```

use std::time::Duration;

use serde_json::{Value, json};

use crate::SeaweedFs;

/// One maintenance commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Maintenance {
    /// Reads the table's rows as DuckDB reads them (deletes applied), writes them into new
    /// data files and commits a snapshot with this operation (`replace`, `overwrite` or
    /// `delete`) that removes every live data file. The rows stay the same. A conflict
    /// with another writer is retried on the new head, as Spark's compaction does.
    Rewrite(&'static str),
    /// Removes every snapshot but the current one (`expire_snapshots(retain_last => 1)`).
    Expire,
    /// Removes these table properties.
    RemoveProperties(Vec<String>),
    /// Makes the table's default partition spec `identity(column)`.
    PartitionByIdentity(String),
    /// Sets the retention settings of the `main` branch.
    MainRetention {
        min_snapshots_to_keep: Option<i32>,
        max_snapshot_age_ms: Option<i64>,
    },
}

impl Maintenance {
    /// A compaction: a `replace` snapshot that rewrites every data file.
    pub fn compact() -> Maintenance {
        Maintenance::Rewrite("replace")
    }

    fn to_json(&self) -> Value {
        match self {
            Maintenance::Rewrite(operation) => json!({"op": "rewrite", "operation": operation}),
            Maintenance::Expire => json!({"op": "expire"}),
            Maintenance::RemoveProperties(keys) => json!({"op": "remove_properties", "keys": keys}),
            Maintenance::PartitionByIdentity(column) => {
                json!({"op": "partition_by_identity", "column": column})
            }
            Maintenance::MainRetention {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
            } => json!({
                "op": "main_retention",
                "min_snapshots_to_keep": min_snapshots_to_keep,
                "max_snapshot_age_ms": max_snapshot_age_ms,
            }),
        }
    }
}

/// The table after maintenance.
#[derive(Clone, Debug)]
pub struct Maintained {
    /// The ids of every snapshot the table keeps.
    pub snapshot_ids: Vec<i64>,
    pub current_snapshot_id: Option<i64>,
    pub properties: serde_json::Map<String, Value>,
}

/// Applies `operations` in order (one commit each) to `namespace.table` in `sw`.
pub fn maintain(
    sw: &SeaweedFs,
    namespace: &str,
    table: &str,
    operations: &[Maintenance],
) -> Maintained {
    let out = crate::process::run_python(
        "maintenance.py",
        &json!({
            "catalog_url": sw.catalog_url(),
            "client_id": sw.access_key(),
            "client_secret": sw.secret_key(),
            "warehouse": sw.warehouse(),
            "s3_endpoint": sw.s3_endpoint(),
            "region": sw.region(),
            "namespace": namespace,
            "table": table,
            "ops": operations.iter().map(Maintenance::to_json).collect::<Vec<_>>(),
        }),
        Duration::from_secs(180),
    );
    Maintained {
        snapshot_ids: out["snapshot_ids"]
            .as_array()
            .map(|ids| ids.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
        current_snapshot_id: out["current_snapshot_id"].as_i64(),
        properties: out["properties"].as_object().cloned().unwrap_or_default(),
    }
}
