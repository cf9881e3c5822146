"""The peer of the sink benchmark: pyiceberg appending the same rows to the same catalog.

Usage: pyiceberg_append.py < REQUEST.json > RESULT.json

REQUEST: {"catalog_url": "http://127.0.0.1:PORT", "client_id": "..", "client_secret": "..",
          "warehouse": "s3://iceberg-tables", "s3_endpoint": "http://127.0.0.1:PORT",
          "region": "us-east-1", "namespace": "ns", "table": "t",
          "parquet": "/tmp/rows.parquet"}
     or, in place of "parquet", "tsv": "/tmp/rows.tsv" with "columns": [[name, type], ..]
     (types: bigint, text, double, timestamptz, numeric(p,s)): COPY's text format of the
     whole-server benchmark (crates/server/benches/ingest.rs), read into the same types.

The rows (the sink benchmark's APPEND rows, `_mz_diff` and `_mz_timestamp` included, or
the rows the server benchmark copied into floe) are read from a local file first (not
timed), then the table is created and `table.append(arrow_table)` is timed: Parquet
encoding, the upload to S3, manifests and the commit, as pyiceberg does them (one snapshot).

RESULT: {"rows": N, "read_seconds": .., "create_seconds": .., "append_seconds": ..,
         "cpu_seconds": .. (the process's, over creation and append), "data_files": n,
         "bytes": b}
"""

import json
import sys
import time

import pyarrow.parquet as pq
from pyiceberg.catalog.rest import RestCatalog


def arrow_type(name):
    """The Arrow type floe's sink writes for a column of SQL type `name`."""
    import pyarrow as pa

    if name.startswith("numeric("):
        precision, scale = name[len("numeric(") : -1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {
        "bigint": pa.int64(),
        "text": pa.string(),
        "double": pa.float64(),
        "timestamptz": pa.timestamp("us", tz="UTC"),
    }[name]


def read_tsv(path, columns):
    """COPY's text format (tab-separated, no header) as an Arrow table of `columns`."""
    import pyarrow as pa
    import pyarrow.csv as csv

    names = [name for name, _ in columns]
    # Read every column as text, then cast each to its type.
    table = csv.read_csv(
        path,
        read_options=csv.ReadOptions(column_names=names),
        parse_options=csv.ParseOptions(delimiter="\t", quote_char=False),
        convert_options=csv.ConvertOptions(column_types={n: pa.string() for n in names}),
    )
    arrays = []
    for name, type_name in columns:
        arrays.append(table.column(name).cast(arrow_type(type_name)))
    return pa.Table.from_arrays(arrays, names=names)


def main():
    req = json.load(sys.stdin)
    catalog = RestCatalog(
        "seaweedfs",
        **{
            "uri": req["catalog_url"],
            "credential": "%s:%s" % (req["client_id"], req["client_secret"]),
            "warehouse": req["warehouse"],
            "s3.endpoint": req["s3_endpoint"],
            "s3.access-key-id": req["client_id"],
            "s3.secret-access-key": req["client_secret"],
            "s3.region": req.get("region", "us-east-1"),
            "s3.path-style-access": "true",
        },
    )
    started = time.perf_counter()
    rows = read_tsv(req["tsv"], req["columns"]) if "tsv" in req else pq.read_table(req["parquet"])
    read_seconds = time.perf_counter() - started

    started = time.perf_counter()
    cpu_started = time.process_time()
    table = catalog.create_table((req["namespace"], req["table"]), schema=rows.schema)
    create_seconds = time.perf_counter() - started

    started = time.perf_counter()
    table.append(rows)
    append_seconds = time.perf_counter() - started
    # CPU of every thread of this process over the creation and the append.
    cpu_seconds = time.process_time() - cpu_started

    summary = table.current_snapshot().summary
    json.dump(
        {
            "rows": rows.num_rows,
            "read_seconds": read_seconds,
            "create_seconds": create_seconds,
            "append_seconds": append_seconds,
            "cpu_seconds": cpu_seconds,
            "data_files": int(summary.get("added-data-files", "0")),
            "bytes": int(summary.get("added-files-size", "0")),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
