"""Reads an Iceberg table the way an independent engine does (DuckDB), plus its metadata.

Usage: reader.py < REQUEST.json > RESULT.json

REQUEST: {"location": "<metadata.json: local path, file:// or s3:// URL>",
          "s3": {"endpoint": "http://127.0.0.1:PORT", "access_key_id": "..",
                 "secret_access_key": "..", "session_token": null, "region": "us-east-1"},
          "query": "SELECT ... FROM t"   (optional; t is the table as DuckDB reads it),
          "engine": "pyiceberg"   (optional: the rows of pyiceberg's scan instead of DuckDB's),
          "row_filter": "id = 3"   (optional, with pyiceberg: the scan's filter; the files
                                    its plan reads are listed as "planned_files"),
          "repeat": n   (optional: run DuckDB's query n times, for timing)}

RESULT: {"columns": [{"name", "type"}], "rows": [{column: value}],
         "metadata": <the metadata.json document>, "snapshots": [...],
         "current_snapshot_id": int|null,
         "files": [live data and delete files of the current snapshot],
         "manifests": [the current snapshot's manifests: path, content, partition_spec_id,
                       partitions (per field: contains_null, contains_nan, bounds as hex)],
         "planned_files": [paths of the data files pyiceberg's filtered scan reads],
         "query_seconds": [seconds each run of the query took]}

Rows are read by DuckDB's iceberg extension (equality and position deletes applied). The
extensions are loaded from the pip packages' files (httpfs, then avro, then iceberg);
nothing is downloaded. Values: DECIMAL as a string, temporal types in ISO 8601, BLOB as
hex, UUID as a string, NaN/Infinity as strings. Files are listed with pyiceberg from the
manifests (no pyarrow statistics conversion), bounds as hex.
"""

import collections.abc
import datetime
import decimal
import json
import math
import pathlib
import sys
import tempfile
import uuid


def extension_path(module_name: str, ext: str) -> str:
    module = __import__(module_name)
    found = sorted(pathlib.Path(module.__file__).parent.rglob(ext + ".duckdb_extension"))
    if not found:
        raise SystemExit("no %s.duckdb_extension under %s" % (ext, module.__file__))
    return str(found[-1])


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def to_json(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return v
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return str(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, collections.abc.Mapping):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return str(v)


def connect(req, tmp):
    """A DuckDB connection with the extensions and S3 secret of `req`, where view `t` is the
    table at `req["location"]`."""
    import duckdb

    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "extension_directory": tmp,
            "home_directory": tmp,
        }
    )
    for module, ext in (
        ("duckdb_extension_httpfs", "httpfs"),
        ("duckdb_extension_avro", "avro"),
        ("duckdb_extension_iceberg", "iceberg"),
    ):
        con.execute("LOAD " + sql_str(extension_path(module, ext)))
    s3 = req.get("s3")
    if s3:
        endpoint = s3["endpoint"]
        use_ssl = endpoint.startswith("https://")
        host = endpoint.split("://", 1)[-1].rstrip("/")
        parts = [
            "TYPE s3",
            "KEY_ID " + sql_str(s3["access_key_id"]),
            "SECRET " + sql_str(s3["secret_access_key"]),
            "ENDPOINT " + sql_str(host),
            "URL_STYLE 'path'",
            "USE_SSL " + ("true" if use_ssl else "false"),
            "REGION " + sql_str(s3.get("region") or "us-east-1"),
        ]
        if s3.get("session_token"):
            parts.append("SESSION_TOKEN " + sql_str(s3["session_token"]))
        con.execute("CREATE SECRET floe_s3 (" + ", ".join(parts) + ")")
    con.execute("CREATE VIEW t AS SELECT * FROM iceberg_scan(" + sql_str(req["location"]) + ")")
    return con


def duckdb_rows(req, tmp):
    """The query's columns and rows, and the seconds each of its `repeat` runs took (the
    connection made and the extensions loaded before the first)."""
    import time

    con = connect(req, tmp)
    seconds = []
    for _ in range(max(1, int(req.get("repeat") or 1))):
        started = time.perf_counter()
        rel = con.sql(req.get("query") or "SELECT * FROM t")
        fetched = rel.fetchall()
        seconds.append(time.perf_counter() - started)
    columns = [{"name": n, "type": str(ty)} for n, ty in zip(rel.columns, rel.types)]
    rows = [{c["name"]: to_json(v) for c, v in zip(columns, row)} for row in fetched]
    con.close()
    return columns, rows, seconds


def pyiceberg_rows(req):
    """The rows as pyiceberg's own scan reads them (position deletes applied; it refuses
    equality deletes with an error)."""
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(req["location"], properties=io_properties(req))
    scan = table.scan(row_filter=req["row_filter"]) if req.get("row_filter") else table.scan()
    planned = sorted(task.file.file_path for task in scan.plan_files())
    arrow = scan.to_arrow()
    columns = [{"name": f.name, "type": str(f.type)} for f in arrow.schema]
    rows = [{c["name"]: to_json(row[c["name"]]) for c in columns} for row in arrow.to_pylist()]
    return columns, rows, planned


def io_properties(req):
    props = {}
    s3 = req.get("s3")
    if s3:
        props = {
            "s3.endpoint": s3["endpoint"],
            "s3.access-key-id": s3["access_key_id"],
            "s3.secret-access-key": s3["secret_access_key"],
            "s3.region": s3.get("region") or "us-east-1",
            "s3.path-style-access": "true",
        }
        if s3.get("session_token"):
            props["s3.session-token"] = s3["session_token"]
    return props


def file_io(req):
    from pyiceberg.io import load_file_io

    return load_file_io(io_properties(req), req["location"])


def b64_or_hex(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return to_json(value)


def v3_field(data_file, index):
    """A version 3 field of a data file read with the version 3 schema (pyiceberg's
    `DataFile` has no accessors for them): 17 referenced_data_file, 18 content_offset,
    19 content_size_in_bytes."""
    values = getattr(data_file, "_data", [])
    return values[index] if len(values) > index else None


def live_entries(manifest, io, format_version):
    """The manifest's live entries. pyiceberg reads every manifest with the version 2
    schema, which drops version 3's fields (a deletion vector's `referenced_data_file`,
    `content_offset`, `content_size_in_bytes`): a version 3 table's are read with its own."""
    if format_version < 3:
        return manifest.fetch_manifest_entry(io, discard_deleted=True)
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        _inherit_from_manifest,
    )

    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[3],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        return [
            _inherit_from_manifest(entry, manifest)
            for entry in reader
            if entry.status != ManifestEntryStatus.DELETED
        ]


def metadata_and_files(req):
    from pyiceberg.table.metadata import TableMetadataUtil

    io = file_io(req)
    with io.new_input(req["location"]).open() as f:
        raw = f.read()
    doc = json.loads(raw)
    metadata = TableMetadataUtil.parse_raw(raw)
    files = []
    manifests = []
    snapshot = metadata.current_snapshot()
    if snapshot is not None:
        for manifest in snapshot.manifests(io):
            manifests.append(
                {
                    "manifest_path": manifest.manifest_path,
                    "content": {0: "data", 1: "deletes"}[int(manifest.content)],
                    "partition_spec_id": manifest.partition_spec_id,
                    "partitions": [
                        {
                            "contains_null": p.contains_null,
                            "contains_nan": p.contains_nan,
                            "lower_bound": b64_or_hex(p.lower_bound),
                            "upper_bound": b64_or_hex(p.upper_bound),
                        }
                        for p in (manifest.partitions or [])
                    ],
                }
            )
            for entry in live_entries(manifest, io, doc.get("format-version", 2)):
                df = entry.data_file
                files.append(
                    {
                        "content": {0: "data", 1: "position_deletes", 2: "equality_deletes"}[int(df.content)],
                        "file_path": df.file_path,
                        "spec_id": df.spec_id,
                        "partition": [to_json(v) for v in df.partition],
                        "file_format": str(df.file_format.name).lower(),
                        "record_count": df.record_count,
                        "file_size_in_bytes": df.file_size_in_bytes,
                        "equality_ids": list(df.equality_ids) if df.equality_ids else None,
                        # Deletion vectors (format version 3): the data file and the blob.
                        "referenced_data_file": v3_field(df, 17),
                        "content_offset": v3_field(df, 18),
                        "content_size_in_bytes": v3_field(df, 19),
                        "status": entry.status.name.lower(),
                        "snapshot_id": entry.snapshot_id,
                        "sequence_number": entry.sequence_number,
                        "file_sequence_number": entry.file_sequence_number,
                        "manifest_path": manifest.manifest_path,
                        "manifest_content": {0: "data", 1: "deletes"}[int(manifest.content)],
                        "column_sizes": to_json(df.column_sizes),
                        "value_counts": to_json(df.value_counts),
                        "null_value_counts": to_json(df.null_value_counts),
                        "lower_bounds": {str(k): b64_or_hex(v) for k, v in (df.lower_bounds or {}).items()},
                        "upper_bounds": {str(k): b64_or_hex(v) for k, v in (df.upper_bounds or {}).items()},
                    }
                )
    return doc, files, manifests


def deletion_vector_positions(io, data_file):
    """The row positions of a deletion vector: its `deletion-vector-v1` blob (length,
    magic D1 D3 39 64, Roaring's portable 64-bit bitmap, CRC) read from its Puffin file."""
    import struct

    import pyroaring

    offset, size = v3_field(data_file, 18), v3_field(data_file, 19)
    with io.new_input(data_file.file_path).open() as f:
        f.seek(offset)
        blob = f.read(size)
    body = blob[4:-4]
    if body[:4] != bytes([0xD1, 0xD3, 0x39, 0x64]):
        raise ValueError("not a deletion vector: " + data_file.file_path)
    buckets = struct.unpack("<Q", body[4:12])[0]
    if buckets == 0:
        return []
    if buckets != 1:
        raise ValueError("a deletion vector past row 2^32 (not needed by the tests)")
    high = struct.unpack("<I", body[12:16])[0]
    return [(high << 32) | low for low in pyroaring.BitMap.deserialize(body[16:])]


def add_delete_positions(req, files):
    """Adds to each live position delete file what it deletes: a deletion vector's
    `positions`, a position delete file's `positions_by_file` (data file -> positions)."""
    import pyarrow.parquet as pq
    from pyiceberg.table.metadata import TableMetadataUtil

    io = file_io(req)
    with io.new_input(req["location"]).open() as f:
        metadata = TableMetadataUtil.parse_raw(f.read())
    by_path = {}
    for manifest in metadata.current_snapshot().manifests(io):
        for entry in live_entries(manifest, io, metadata.format_version):
            by_path[(entry.data_file.file_path, v3_field(entry.data_file, 18))] = entry.data_file
    for file in files:
        if file["content"] != "position_deletes":
            continue
        data_file = by_path[(file["file_path"], file["content_offset"])]
        if file["file_format"] == "puffin":
            file["positions"] = deletion_vector_positions(io, data_file)
            continue
        with io.new_input(file["file_path"]).open() as f:
            table = pq.read_table(f)
        positions = {}
        for path, pos in zip(table.column("file_path").to_pylist(), table.column("pos").to_pylist()):
            positions.setdefault(path, []).append(pos)
        file["positions_by_file"] = positions


def main():
    req = json.load(sys.stdin)
    doc, files, manifests = metadata_and_files(req)
    if req.get("delete_positions"):
        add_delete_positions(req, files)
    seconds = []
    planned = []
    if req.get("engine") == "pyiceberg":
        columns, rows, planned = pyiceberg_rows(req)
    else:
        with tempfile.TemporaryDirectory(prefix="floe-reader-") as tmp:
            columns, rows, seconds = duckdb_rows(req, tmp)
    out = {
        "columns": columns,
        "rows": rows,
        "metadata": doc,
        "snapshots": doc.get("snapshots", []),
        "current_snapshot_id": doc.get("current-snapshot-id"),
        "files": files,
        "manifests": manifests,
        "planned_files": planned,
        "query_seconds": seconds,
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
