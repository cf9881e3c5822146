"""Writes a reference Iceberg table with equality AND position deletes, without floe.

Usage: write_deletes.py < REQUEST.json > RESULT.json

REQUEST: {"catalog_url": "http://127.0.0.1:PORT", "client_id": "..", "client_secret": "..",
          "warehouse": "s3://iceberg-tables", "s3_endpoint": "http://127.0.0.1:PORT",
          "region": "us-east-1", "namespace": "ns", "table": "t"}
      or {"local_dir": "/tmp/dir", "namespace": "ns", "table": "t"} for a table on the local
         file system (pyiceberg's SQLite catalog in that directory).

Table (format v2, unpartitioned): id long NOT NULL (field 1), name string (field 2).
  snapshot 1 (pyiceberg append): (1,a) (2,b) (3,c) (4,d)
  snapshot 2, one row delta written with pyiceberg's low-level API:
    data file        (3,c2) (5,e)
    position delete  (first data file, pos 1)         -> removes (2,b)
    equality delete  on field 1: id = 3               -> removes (3,c) but not (3,c2):
                     an equality delete never applies to data of its own sequence number
  expected rows: (1,a) (3,c2) (4,d) (5,e)

The delete files are Parquet with PARQUET:field_id metadata and full statistics, listed in
a manifest whose content is DELETES, added to a fast append's manifest list.

RESULT: {"metadata_location": "...", "expected_rows": [{"id": .., "name": ..}],
         "snapshot_ids": [s1, s2]}
"""

import json
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
)
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

POS_DELETE_SCHEMA = Schema(
    NestedField(2147483546, "file_path", StringType(), required=True),
    NestedField(2147483545, "pos", LongType(), required=True),
)


class DeletesManifestWriter(ManifestWriterV2):
    """A v2 manifest writer whose manifest content is DELETES."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self):
        return {**super()._meta, "content": "deletes"}


def write_parquet(io, path, schema, rows, content, spec_id, equality_ids=None, metrics=None):
    """Writes `rows` (list of dicts) as Parquet with field ids; returns its DataFile."""
    arrow_schema = schema_to_pyarrow(schema, include_field_ids=True)
    table = pa.Table.from_pylist(rows, schema=arrow_schema)
    out = io.new_output(path)
    with out.create(overwrite=True) as stream:
        with pq.ParquetWriter(stream, arrow_schema) as writer:
            writer.write_table(table)
        meta = writer.writer.metadata
    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=meta,
        stats_columns=compute_statistics_plan(schema, metrics or {}),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    size = len(io.new_input(path))
    return DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=spec_id,
        equality_ids=equality_ids,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )


def open_catalog(req):
    if "local_dir" in req:
        from pyiceberg.catalog.sql import SqlCatalog

        local = req["local_dir"].rstrip("/")
        return SqlCatalog(
            "local", uri="sqlite:///%s/catalog.db" % local, warehouse="file://%s" % local
        )
    props = {
        "uri": req["catalog_url"],
        "credential": "%s:%s" % (req["client_id"], req["client_secret"]),
        "warehouse": req["warehouse"],
        "s3.endpoint": req["s3_endpoint"],
        "s3.access-key-id": req["client_id"],
        "s3.secret-access-key": req["client_secret"],
        "s3.region": req.get("region", "us-east-1"),
        "s3.path-style-access": "true",
    }
    return RestCatalog("seaweedfs", **props)


def main():
    req = json.load(sys.stdin)
    catalog = open_catalog(req)
    ns = req["namespace"]
    catalog.create_namespace_if_not_exists(ns)
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType(), required=False),
        identifier_field_ids=[1],
    )
    table = catalog.create_table((ns, req["table"]), schema=schema)
    schema = table.schema()  # the catalog's field ids are the truth
    id_field = schema.find_field("id").field_id

    # Snapshot 1: ordinary append.
    first = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}, {"id": 4, "name": "d"}]
    table.append(pa.Table.from_pylist(first, schema=schema_to_pyarrow(schema, include_field_ids=False)))
    table = catalog.load_table((ns, req["table"]))
    s1 = table.current_snapshot()
    first_file = next(
        e.data_file.file_path
        for m in s1.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
    )

    # Snapshot 2: new data + position delete + equality delete in one commit.
    io = table.io
    spec_id = table.metadata.default_spec_id
    base = table.location().rstrip("/") + "/data/"
    data = write_parquet(
        io, base + "data-%s.parquet" % uuid.uuid4(), schema,
        [{"id": 3, "name": "c2"}, {"id": 5, "name": "e"}], DataFileContent.DATA, spec_id,
    )
    pos_del = write_parquet(
        io, base + "pos-deletes-%s.parquet" % uuid.uuid4(), POS_DELETE_SCHEMA,
        [{"file_path": first_file, "pos": 1}], DataFileContent.POSITION_DELETES, spec_id,
        # Untruncated bounds on file_path, so readers can tell which data file is referenced.
        metrics={"write.metadata.metrics.column.file_path": "full"},
    )
    eq_schema = Schema(NestedField(id_field, "id", LongType(), required=True))
    eq_del = write_parquet(
        io, base + "eq-deletes-%s.parquet" % uuid.uuid4(), eq_schema,
        [{"id": 3}], DataFileContent.EQUALITY_DELETES, spec_id, equality_ids=[id_field],
    )

    with table.transaction() as txn:
        with txn.update_snapshot().fast_append() as append:
            append.append_data_file(data)
            snapshot_id = append.snapshot_id
            manifest_path = table.location().rstrip("/") + "/metadata/deletes-%s-m0.avro" % uuid.uuid4()
            writer = DeletesManifestWriter(
                spec=table.metadata.spec(),
                schema=schema,
                output_file=io.new_output(manifest_path),
                snapshot_id=snapshot_id,
                avro_compression="deflate",
            )
            with writer:
                for f in (pos_del, eq_del):
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            deletes_manifest = writer.to_manifest_file()
            original = append._process_manifests
            append._process_manifests = lambda manifests: original(manifests) + [deletes_manifest]
            # A row delta: the summary counts the delete files too, as Java's would.
            append._operation = Operation.OVERWRITE
            summarize = append._summary

            def summary_with_deletes(properties=None):
                added = append._added_data_files
                append._added_data_files = added + [pos_del, eq_del]
                try:
                    return summarize(properties or {})
                finally:
                    append._added_data_files = added

            append._summary = summary_with_deletes

    table = catalog.load_table((ns, req["table"]))
    json.dump(
        {
            "metadata_location": table.metadata_location,
            "expected_rows": [
                {"id": 1, "name": "a"},
                {"id": 3, "name": "c2"},
                {"id": 4, "name": "d"},
                {"id": 5, "name": "e"},
            ],
            "snapshot_ids": [s.snapshot_id for s in table.metadata.snapshots],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
