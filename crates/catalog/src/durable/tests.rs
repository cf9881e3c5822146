//! The golden file: every kind of definition as format 1 stores it. A line
//! that no longer matches means a stored format drifted, which would make
//! existing data directories unreadable: keep the line and add a format
//! instead (see the module comment of `durable`).

use floe_repr::{ClusterId, ColumnType, GlobalId, RelationDesc, SqlScalarType};
use floe_sql::catalog::{
    AwsAuth, AwsConnection, ConnectionDefinition, DeleteMode, IcebergCatalogConnection,
    IcebergCatalogType, IndexDefinition, Ingestion, ItemDefinition, PostgresColumn,
    PostgresConnection, PostgresSslMode, PostgresTable, SinkDefinition, SinkEnvelope,
    SnapshotRetention, SourceDefinition, StringOrSecret, TableDefinition, ViewDefinition,
};

use super::{FORMAT, decode_definition, encode_definition};

const GOLDEN: &str = include_str!("golden-v1.txt");

fn column(name: &str, scalar_type: SqlScalarType, nullable: bool) -> (String, ColumnType) {
    (
        name.to_string(),
        ColumnType {
            scalar_type,
            nullable,
        },
    )
}

/// One column of every scalar type, nested ones included.
fn every_scalar_type() -> RelationDesc {
    use SqlScalarType::*;
    let numeric = Numeric {
        precision: Some(10),
        max_scale: Some(2),
    };
    let types = vec![
        Bool,
        Int16,
        Int32,
        Int64,
        UInt16,
        UInt32,
        UInt64,
        Float32,
        Float64,
        numeric.clone(),
        Numeric {
            precision: None,
            max_scale: None,
        },
        Date,
        Time,
        Timestamp,
        TimestampTz,
        Text,
        VarChar {
            max_length: Some(5),
        },
        VarChar { max_length: None },
        Bytes,
        Uuid,
        Jsonb,
        Interval,
        Range {
            element: Box::new(numeric),
        },
        Record {
            fields: vec![("a".into(), Int32, false), ("b".into(), Text, true)],
        },
        List {
            element: Box::new(List {
                element: Box::new(Int64),
            }),
        },
        Map {
            value: Box::new(Jsonb),
        },
        Oid,
    ];
    RelationDesc {
        columns: types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| column(&format!("c{i}"), ty, i % 2 == 0))
            .collect(),
        unique_keys: vec![vec![0], vec![1, 2]],
    }
}

fn iceberg(catalog_type: IcebergCatalogType) -> IcebergCatalogConnection {
    IcebergCatalogConnection {
        catalog_type,
        url: None,
        warehouse: None,
        credential: None,
        scope: None,
        oauth2_server_url: None,
        vended_credentials: false,
        aws_connection: None,
    }
}

fn sink(envelope: SinkEnvelope, key: Option<Vec<String>>) -> SinkDefinition {
    SinkDefinition {
        from: GlobalId::User(12),
        connection: GlobalId::User(11),
        cluster: ClusterId::User(2),
        namespace: "ns".into(),
        table: "t".into(),
        envelope,
        key_not_enforced: key.is_some(),
        key,
        commit_interval_ms: 60_000,
        version: 3,
        takes_over: None,
        from_version: 0,
        delete_mode: DeleteMode::Equality,
        snapshot_retention: None,
        target_file_size: None,
        partition_by: None,
    }
}

/// A definition of every kind, by name.
fn samples() -> Vec<(&'static str, ItemDefinition)> {
    let desc = RelationDesc {
        columns: vec![column("id", SqlScalarType::Int64, false)],
        unique_keys: vec![vec![0]],
    };
    vec![
        ("secret", ItemDefinition::Secret),
        (
            "aws_credentials",
            ItemDefinition::Connection(ConnectionDefinition::Aws(AwsConnection {
                endpoint: Some("http://localhost:9000".into()),
                region: Some("us-east-1".into()),
                auth: AwsAuth::Credentials {
                    access_key_id: StringOrSecret::Secret(GlobalId::User(1)),
                    secret_access_key: GlobalId::User(2),
                    session_token: Some(StringOrSecret::Inline {
                        slot: "session_token".into(),
                    }),
                },
            })),
        ),
        (
            "aws_plain_key",
            ItemDefinition::Connection(ConnectionDefinition::Aws(AwsConnection {
                endpoint: None,
                region: None,
                auth: AwsAuth::Credentials {
                    access_key_id: StringOrSecret::String("AKIA".into()),
                    secret_access_key: GlobalId::User(2),
                    session_token: None,
                },
            })),
        ),
        (
            "aws_assume_role",
            ItemDefinition::Connection(ConnectionDefinition::Aws(AwsConnection {
                endpoint: None,
                region: Some("eu-west-1".into()),
                auth: AwsAuth::AssumeRole {
                    arn: "arn:aws:iam::000000000000:role/r".into(),
                    session_name: Some("s".into()),
                },
            })),
        ),
        (
            "iceberg_rest",
            ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(
                IcebergCatalogConnection {
                    url: Some("https://catalog.example/api".into()),
                    warehouse: Some("wh".into()),
                    credential: Some(StringOrSecret::Secret(GlobalId::User(1))),
                    scope: Some("PRINCIPAL_ROLE:ALL".into()),
                    oauth2_server_url: Some("https://auth.example/token".into()),
                    vended_credentials: true,
                    ..iceberg(IcebergCatalogType::Rest)
                },
            )),
        ),
        (
            "iceberg_s3_tables",
            ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(
                IcebergCatalogConnection {
                    warehouse: Some("arn:aws:s3tables:us-east-1:000000000000:bucket/b".into()),
                    aws_connection: Some(GlobalId::User(4)),
                    ..iceberg(IcebergCatalogType::S3TablesRest)
                },
            )),
        ),
        (
            "iceberg_local",
            ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(iceberg(
                IcebergCatalogType::Local,
            ))),
        ),
        (
            "table",
            ItemDefinition::Table(TableDefinition {
                defaults: (0..every_scalar_type().columns.len())
                    .map(|i| (i == 1).then(|| "true".to_string()))
                    .collect(),
                desc: every_scalar_type(),
                version: 0,
                types: vec![],
            }),
        ),
        (
            "table_of_named_types",
            ItemDefinition::Table(TableDefinition {
                defaults: vec![None],
                desc: RelationDesc {
                    columns: vec![(
                        "l".into(),
                        ColumnType {
                            scalar_type: SqlScalarType::List {
                                element: Box::new(SqlScalarType::Int32),
                            },
                            nullable: true,
                        },
                    )],
                    unique_keys: vec![],
                },
                version: 0,
                types: vec![GlobalId::User(9)],
            }),
        ),
        (
            "type",
            ItemDefinition::Type(floe_sql::catalog::TypeDefinition {
                scalar_type: SqlScalarType::Record {
                    fields: vec![
                        ("a".into(), SqlScalarType::Int32, true),
                        (
                            "b".into(),
                            SqlScalarType::Map {
                                value: Box::new(SqlScalarType::Text),
                            },
                            true,
                        ),
                    ],
                },
                uses: vec![GlobalId::User(9)],
            }),
        ),
        (
            "source",
            ItemDefinition::Source(SourceDefinition {
                generator: "COUNTER".into(),
                tick_interval_ms: 1000,
                cluster: ClusterId::User(1),
                desc: desc.clone(),
                up_to: Some(5),
                parent: None,
                ingestion: None,
            }),
        ),
        (
            "subsource",
            ItemDefinition::Source(SourceDefinition {
                generator: "AUCTION".into(),
                tick_interval_ms: 100,
                cluster: ClusterId::User(3),
                desc,
                up_to: None,
                parent: Some((GlobalId::User(16), "bids".into())),
                ingestion: None,
            }),
        ),
        (
            "postgres_connection",
            ItemDefinition::Connection(ConnectionDefinition::Postgres(PostgresConnection {
                host: "db.example".into(),
                port: 5432,
                user: StringOrSecret::String("replicator".into()),
                password: Some(GlobalId::User(1)),
                database: "shop".into(),
                ssl_mode: PostgresSslMode::VerifyFull,
                ssl_certificate_authority: Some(StringOrSecret::Secret(GlobalId::User(2))),
                ssl_certificate: Some(StringOrSecret::String("-----BEGIN CERTIFICATE-----".into())),
                ssl_key: Some(GlobalId::User(3)),
            })),
        ),
        (
            "postgres_source",
            postgres_part(
                None,
                Ingestion::Postgres {
                    connection: GlobalId::User(20),
                    publication: "p".into(),
                },
            ),
        ),
        (
            "postgres_subsource",
            postgres_part(
                Some((GlobalId::User(21), "public.orders".into())),
                Ingestion::PostgresTable(PostgresTable {
                    oid: 16384,
                    schema: "public".into(),
                    name: "orders".into(),
                    columns: vec![PostgresColumn {
                        name: "amount".into(),
                        type_oid: 1700,
                        type_modifier: 655366,
                        scalar_type: SqlScalarType::Numeric {
                            precision: Some(10),
                            max_scale: Some(2),
                        },
                        nullable: true,
                    }],
                    primary_key: Some(vec![0]),
                }),
            ),
        ),
        (
            "postgres_progress",
            postgres_part(
                Some((GlobalId::User(21), "progress".into())),
                Ingestion::Progress,
            ),
        ),
        (
            "sink_upsert",
            ItemDefinition::Sink(sink(SinkEnvelope::Upsert, Some(vec!["id".into()]))),
        ),
        (
            "sink_append",
            ItemDefinition::Sink(sink(SinkEnvelope::Append, None)),
        ),
        (
            "sink_taking_over",
            ItemDefinition::Sink(SinkDefinition {
                takes_over: Some(GlobalId::User(9)),
                ..sink(SinkEnvelope::Append, None)
            }),
        ),
        (
            "sink_upsert_position_deletes",
            ItemDefinition::Sink(SinkDefinition {
                delete_mode: DeleteMode::Position,
                ..sink(SinkEnvelope::Upsert, Some(vec!["id".into()]))
            }),
        ),
        (
            "sink_maintained",
            ItemDefinition::Sink(SinkDefinition {
                snapshot_retention: Some(SnapshotRetention::Keep { ms: 600_000 }),
                target_file_size: Some(64 << 20),
                ..sink(SinkEnvelope::Upsert, Some(vec!["id".into()]))
            }),
        ),
        (
            "sink_partitioned",
            ItemDefinition::Sink(SinkDefinition {
                partition_by: Some("day(placed_at), bucket(16, id)".into()),
                ..sink(SinkEnvelope::Upsert, Some(vec!["id".into()]))
            }),
        ),
        (
            "sink_keeping_every_snapshot",
            ItemDefinition::Sink(SinkDefinition {
                snapshot_retention: Some(SnapshotRetention::Off),
                ..sink(SinkEnvelope::Append, None)
            }),
        ),
        ("view", ItemDefinition::View(view(None))),
        (
            "materialized_view",
            ItemDefinition::MaterializedView(view(Some(ClusterId::User(2)))),
        ),
        (
            "unique_index",
            ItemDefinition::Index(IndexDefinition {
                on: GlobalId::User(3),
                key: vec![2, 0],
                unique: true,
                cluster: ClusterId::User(1),
                constraint: false,
            }),
        ),
        (
            "unique_constraint",
            ItemDefinition::Index(IndexDefinition {
                on: GlobalId::User(3),
                key: vec![1],
                unique: true,
                cluster: ClusterId::User(1),
                constraint: true,
            }),
        ),
    ]
}

/// A view over two relations (a materialized one names its cluster).
fn view(cluster: Option<ClusterId>) -> ViewDefinition {
    ViewDefinition {
        query: "SELECT \"t\".\"id\", count(*) FROM \"materialize\".\"public\".\"t\" JOIN \"materialize\".\"public\".\"u\" USING (\"id\") GROUP BY 1".into(),
        desc: RelationDesc {
            columns: vec![
                column("id", SqlScalarType::Int64, false),
                column("count", SqlScalarType::Int64, false),
            ],
            unique_keys: vec![vec![0]],
        },
        uses: vec![GlobalId::User(12), GlobalId::User(13)],
        table_versions: Vec::new(),
        cluster,
    }
}

/// A part of a Postgres source (the source, a subsource or its progress).
fn postgres_part(parent: Option<(GlobalId, String)>, ingestion: Ingestion) -> ItemDefinition {
    ItemDefinition::Source(SourceDefinition {
        generator: "POSTGRES".into(),
        tick_interval_ms: 0,
        cluster: ClusterId::User(1),
        desc: RelationDesc {
            columns: vec![column("lsn", SqlScalarType::UInt64, false)],
            unique_keys: vec![],
        },
        up_to: None,
        parent,
        ingestion: Some(ingestion),
    })
}

/// The variant a sample is: a new variant fails to compile here until it has
/// its sample (and its golden line).
fn variant(definition: &ItemDefinition) -> &'static str {
    match definition {
        ItemDefinition::Secret => "secret",
        ItemDefinition::Connection(ConnectionDefinition::Aws(_)) => "aws connection",
        ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(_)) => "iceberg connection",
        ItemDefinition::Connection(ConnectionDefinition::Postgres(_)) => "postgres connection",
        ItemDefinition::Table(_) => "table",
        ItemDefinition::Source(_) => "source",
        ItemDefinition::Sink(_) => "sink",
        ItemDefinition::View(_) => "view",
        ItemDefinition::MaterializedView(_) => "materialized view",
        ItemDefinition::Index(_) => "index",
        ItemDefinition::Type(_) => "type",
    }
}

#[test]
fn every_kind_of_definition_has_a_sample() {
    let covered: std::collections::BTreeSet<&str> =
        samples().iter().map(|(_, d)| variant(d)).collect();
    assert_eq!(covered.len(), 11, "{covered:?}");
}

/// The golden file's lines: `name = stored definition`.
fn golden() -> Vec<(&'static str, &'static str)> {
    GOLDEN
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            line.split_once(" = ")
                .expect("a golden line is `name = json`")
        })
        .collect()
}

#[test]
fn stored_definitions_match_the_golden_file() {
    assert_eq!(FORMAT, 1, "a new format gets its own golden file");
    let golden = golden();
    let mut missing = Vec::new();
    for (name, definition) in samples() {
        let stored = encode_definition(&definition).unwrap();
        let Some((_, expected)) = golden.iter().find(|(n, _)| *n == name) else {
            missing.push(format!("{name} = {stored}"));
            continue;
        };
        assert_eq!(
            &stored, expected,
            "the stored form of {name} drifted from format 1: existing data directories could no longer be read. Keep format 1 as it is and add a format (see durable.rs)"
        );
    }
    assert!(
        missing.is_empty(),
        "samples missing from the golden file; add these lines:\n{}",
        missing.join("\n")
    );
    assert_eq!(
        golden.len(),
        samples().len(),
        "every golden line has its sample"
    );
}

#[test]
fn the_golden_file_reads_back_as_the_definitions() {
    let samples = samples();
    for (name, stored) in golden() {
        let (_, definition) = samples.iter().find(|(n, _)| *n == name).unwrap();
        let read = decode_definition(&GlobalId::User(1), 1, stored).unwrap();
        assert_eq!(&read, definition, "{name}");
    }
}

#[test]
fn an_unknown_format_is_refused_with_the_way_out() {
    let error = decode_definition(&GlobalId::User(7), 2, "\"Secret\"").unwrap_err();
    assert_eq!(
        error.to_string(),
        "catalog is corrupt: the definition of u7 is in format 2, which this floe does not read (it reads format 1); use a newer floe"
    );
}

#[test]
fn format_1_is_what_floe_0_1_0_wrote() {
    // Every definition in the data directory floe 0.1.0 wrote (the server's
    // upgrade fixture) reads as format 1 and is written back byte for byte.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../server/tests/fixtures/data-dir-0.1.0/data/catalog.db");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("catalog.db");
    std::fs::copy(&fixture, &copy).unwrap();
    let connection = rusqlite::Connection::open(&copy).unwrap();
    let mut statement = connection
        .prepare("SELECT id, definition FROM items ORDER BY oid")
        .unwrap();
    let rows: Vec<(String, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(rows.len() >= 20, "the fixture holds every kind of item");
    for (id, stored) in rows {
        let id: GlobalId = id.parse().unwrap();
        let definition = decode_definition(&id, 1, &stored).unwrap();
        assert_eq!(encode_definition(&definition).unwrap(), stored, "{id}");
    }
}
