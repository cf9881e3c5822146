"""Reads a sink's Iceberg table with DuckDB (deletes applied) and prints a query over it.

Run by `scripts/read-sink` as `floe sink-access SINK -- python read_sink.py QUERY`: floe
writes the table's access document to this program's standard input (JSON with
`metadata_location` and the `storage` properties of its files, credentials included).
The table is the view `t`. Credentials come only through stdin, and every value that is
one is scrubbed from what this program prints, errors included.
"""

import glob
import json
import os
import sys
from urllib.parse import urlsplit

import duckdb

# Storage properties that are credentials (floe's own rule, rest.rs is_sensitive_property,
# plus the key id).
SENSITIVE_WORDS = ("secret", "token", "password", "sas", "credential", "private", "key-id")


def sensitive(key):
    return any(word in key.lower() for word in SENSITIVE_WORDS)


def quote(value):
    return "'" + str(value).replace("'", "''") + "'"


def connect():
    """DuckDB with the httpfs, avro and iceberg extensions of the pip packages, loaded by
    file: nothing is downloaded."""
    site = os.path.dirname(os.path.dirname(duckdb.__file__))
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in ("httpfs", "avro", "iceberg"):
        pattern = os.path.join(site, f"duckdb_extension_{name}", "extensions", "*", f"{name}.duckdb_extension")
        con.execute(f"LOAD {quote(glob.glob(pattern)[0])}")
    return con


def s3_secret(storage):
    """The DuckDB S3 secret of the table's storage properties, or None (local files)."""
    if "s3.access-key-id" not in storage:
        return None
    options = [
        "TYPE s3",
        "KEY_ID " + quote(storage["s3.access-key-id"]),
        "SECRET " + quote(storage.get("s3.secret-access-key", "")),
        "REGION " + quote(storage.get("s3.region") or storage.get("client.region") or "us-east-1"),
    ]
    if storage.get("s3.session-token"):
        options.append("SESSION_TOKEN " + quote(storage["s3.session-token"]))
    endpoint = storage.get("s3.endpoint")
    if endpoint:
        url = urlsplit(endpoint)
        options.append("ENDPOINT " + quote(url.netloc + url.path.rstrip("/")))
        options.append("USE_SSL " + ("true" if url.scheme == "https" else "false"))
    path_style = storage.get("s3.path-style-access", "true" if endpoint else "false")
    options.append("URL_STYLE " + quote("path" if path_style.lower() == "true" else "vhost"))
    return "CREATE SECRET floe_sink (" + ", ".join(options) + ")"


def main():
    query = sys.argv[1] if len(sys.argv) > 1 else "SELECT * FROM t"
    access = json.load(sys.stdin)
    storage = access.get("storage") or {}
    secrets = [value for key, value in storage.items() if sensitive(key) and value]
    try:
        con = connect()
        secret = s3_secret(storage)
        if secret:
            con.execute(secret)
        location = access["metadata_location"]
        con.execute(f"CREATE VIEW t AS SELECT * FROM iceberg_scan({quote(location)})")
        print(con.sql(query))
    except Exception as error:  # noqa: BLE001 - any failure is reported, scrubbed
        message = str(error)
        for value in secrets:
            message = message.replace(value, "********")
        print(f"read-sink: {access.get('sink')}: {message}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
