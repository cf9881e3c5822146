"""Foreign maintenance of an Iceberg table, done by pyiceberg (not floe), as Spark, AWS S3
Tables or Databricks do it to tables floe writes.

Usage: maintenance.py < REQUEST.json > RESULT.json

REQUEST: {"catalog_url": "http://127.0.0.1:PORT", "client_id": "..", "client_secret": "..",
          "warehouse": "s3://iceberg-tables", "s3_endpoint": "http://127.0.0.1:PORT",
          "region": "us-east-1", "namespace": "ns", "table": "t",
          "ops": [{"op": ...}, ...]}
Operations, applied in order, each one commit:
  {"op": "rewrite", "operation": "replace"|"overwrite"|"delete"}
      reads the table's rows as DuckDB reads them (equality and position deletes applied),
      writes them into new data files and commits a snapshot of that operation removing
      every live data file: a compaction that really rewrites the files (with "replace"),
      or a rewrite other engines label otherwise. The rows stay the same.
  {"op": "expire"}             removes every snapshot but the current one
  {"op": "remove_properties", "keys": [..]}
  {"op": "partition_by_identity", "column": "id"}   a new default partition spec
  {"op": "main_retention", "min_snapshots_to_keep": n, "max_snapshot_age_ms": ms}
      sets the retention settings of the main branch (at its current snapshot)

RESULT: {"snapshot_ids": [ids of the table's snapshots after all operations],
         "current_snapshot_id": id, "properties": {..}}
"""

import json
import sys
import tempfile

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import ManifestContent
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _OverwriteFiles

# The reader beside this script: DuckDB with its extensions loaded from the pip packages.
import reader

OPERATIONS = {
    "replace": Operation.REPLACE,
    "overwrite": Operation.OVERWRITE,
    "delete": Operation.DELETE,
}


def catalog(req):
    return RestCatalog(
        "maintenance",
        **{
            "uri": req["catalog_url"],
            "warehouse": req["warehouse"],
            "credential": "%s:%s" % (req["client_id"], req["client_secret"]),
            "scope": "catalog",
            "oauth2-server-uri": req["catalog_url"] + "/v1/oauth/tokens",
            "s3.endpoint": req["s3_endpoint"],
            "s3.access-key-id": req["client_id"],
            "s3.secret-access-key": req["client_secret"],
            "s3.region": req["region"],
            "s3.path-style-access": "true",
        },
    )


def live_rows(req, table):
    """The table's rows as DuckDB reads them, as Arrow in the table's schema."""
    read = {
        "location": table.metadata_location,
        "s3": {
            "endpoint": req["s3_endpoint"],
            "access_key_id": req["client_id"],
            "secret_access_key": req["client_secret"],
            "region": req["region"],
        },
    }
    with tempfile.TemporaryDirectory(prefix="floe-maintenance-") as tmp:
        con = reader.connect(read, tmp)
        rows = con.sql("SELECT * FROM t").arrow()
        con.close()
    if isinstance(rows, pa.RecordBatchReader):
        rows = rows.read_all()
    return rows.cast(table.schema().as_arrow())


class Rewrite(_OverwriteFiles):
    """An overwrite whose snapshot carries another operation: pyiceberg computes summaries
    for append, overwrite and delete only, so the totals are an overwrite's and the label is
    the one asked for (a compaction's `replace`)."""

    def __init__(self, label, **kwargs):
        super().__init__(operation=Operation.OVERWRITE, **kwargs)
        self._label = label

    def _summary(self, snapshot_properties=None):
        summary = super()._summary(snapshot_properties or {})
        return Summary(operation=self._label, **summary.additional_properties)


def rewrite(req, table, operation):
    snapshot = table.current_snapshot()
    if snapshot is None:
        raise SystemExit("rewrite: the table has no snapshot")
    old = [
        entry.data_file
        for manifest in snapshot.manifests(table.io)
        if manifest.content == ManifestContent.DATA
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    ]
    rows = live_rows(req, table)
    with table.transaction() as tx:
        producer = Rewrite(OPERATIONS[operation], transaction=tx, io=table.io)
        for data_file in old:
            producer.delete_data_file(data_file)
        if rows.num_rows > 0:
            for data_file in _dataframe_to_data_files(
                table_metadata=tx.table_metadata,
                df=rows,
                io=table.io,
                write_uuid=producer.commit_uuid,
            ):
                producer.append_data_file(data_file)
        producer.commit()


def expire(table):
    current = table.current_snapshot()
    old = [s.snapshot_id for s in table.snapshots() if current is None or s.snapshot_id != current.snapshot_id]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()


def apply(req, table, op):
    kind = op["op"]
    if kind == "rewrite":
        rewrite(req, table, op.get("operation", "replace"))
    elif kind == "expire":
        expire(table)
    elif kind == "remove_properties":
        with table.transaction() as tx:
            tx.remove_properties(*op["keys"])
    elif kind == "partition_by_identity":
        with table.update_spec() as update:
            update.add_identity(op["column"])
    elif kind == "main_retention":
        with table.manage_snapshots() as manage:
            manage.create_branch(
                table.current_snapshot().snapshot_id,
                "main",
                max_snapshot_age_ms=op.get("max_snapshot_age_ms"),
                min_snapshots_to_keep=op.get("min_snapshots_to_keep"),
            )
    else:
        raise SystemExit("unknown operation %r" % kind)


def main():
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    req = json.load(sys.stdin)
    cat = catalog(req)
    identifier = (req["namespace"], req["table"])
    for op in req["ops"]:
        # Each operation commits on top of the table it loaded; when a writer (floe)
        # committed in between, it is refused and done again on the new head, as Spark's
        # and S3 Tables' maintenance retry. pyiceberg retries a refused commit itself
        # first, and its overwrite validation then fails on the files floe added
        # (ValidationException): also a refusal, done again from the new head.
        for _ in range(20):
            try:
                apply(req, cat.load_table(identifier), op)
                break
            except (CommitFailedException, ValidationException):
                continue
        else:
            raise SystemExit("%r was refused 20 times" % op)
    table = cat.load_table(identifier)
    current = table.current_snapshot()
    json.dump(
        {
            "snapshot_ids": [s.snapshot_id for s in table.snapshots()],
            "current_snapshot_id": current.snapshot_id if current else None,
            "properties": dict(table.properties),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
