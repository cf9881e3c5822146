//! CREATE SOURCE's checks against a real catalog: publications, selections, replica
//! identity, types, TEXT COLUMNS and EXCLUDE COLUMNS, keys.

use floe_postgres::{
    ColumnReference, PgError, PurifyRequest, SubsourceDesc, TableRequest, TableSelection, purify,
};
use floe_repr::{SqlScalarType, SqlState};

use crate::support::Upstream;

fn request(publication: &str, selection: TableSelection) -> PurifyRequest {
    PurifyRequest {
        publication: publication.into(),
        selection,
        text_columns: vec![],
        exclude_columns: vec![],
    }
}

fn table(schema: Option<&str>, name: &str, alias: Option<&str>) -> TableRequest {
    TableRequest {
        schema: schema.map(str::to_string),
        name: name.into(),
        alias: alias.map(str::to_string),
    }
}

fn column(table: &str, column: &str) -> ColumnReference {
    ColumnReference {
        schema: None,
        table: table.into(),
        column: column.into(),
    }
}

async fn purify_err(upstream: &Upstream, request: &PurifyRequest) -> PgError {
    purify(&upstream.config, request)
        .await
        .expect_err("purification must fail")
}

fn column_names(subsource: &SubsourceDesc) -> Vec<&str> {
    subsource
        .table
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect()
}

fn names(subsources: &[SubsourceDesc]) -> Vec<String> {
    subsources.iter().map(|s| s.name.clone()).collect()
}

async fn fixture() -> Upstream {
    let upstream = Upstream::new("purify").await;
    upstream
        .execute(
            "CREATE SCHEMA other;
             CREATE TABLE public.a (id int PRIMARY KEY, v text);
             CREATE TABLE public.b (x bigint, m money, n int);
             CREATE TABLE other.a (k int);
             CREATE TABLE public.no_identity (id int PRIMARY KEY);
             ALTER TABLE public.a REPLICA IDENTITY FULL;
             ALTER TABLE public.b REPLICA IDENTITY FULL;
             ALTER TABLE other.a REPLICA IDENTITY FULL;
             CREATE PUBLICATION all_tables FOR ALL TABLES;
             CREATE PUBLICATION partial FOR TABLE public.a, other.a;
             CREATE PUBLICATION empty;",
        )
        .await;
    upstream
}

#[tokio::test]
async fn publications_must_exist_and_hold_the_tables_asked_for() {
    let upstream = fixture().await;
    let error = purify_err(&upstream, &request("nope", TableSelection::All)).await;
    assert_eq!(error.message, "publication \"nope\" does not exist");
    assert_eq!(error.code, SqlState::UNDEFINED_OBJECT);
    let error = purify_err(&upstream, &request("empty", TableSelection::All)).await;
    assert_eq!(error.message, "publication \"empty\" has no tables");
    let missing = TableSelection::Tables(vec![table(None, "b", None)]);
    let error = purify_err(&upstream, &request("partial", missing)).await;
    assert_eq!(
        error.message,
        "table public.b not found in publication \"partial\""
    );
    assert_eq!(error.code, SqlState::UNDEFINED_TABLE);
    // Two tables named a (public.a, other.a) cannot both be subsource "a".
    let error = purify_err(&upstream, &request("partial", TableSelection::All)).await;
    assert_eq!(error.message, "multiple subsources would be named \"a\"");
    let renamed = TableSelection::Tables(vec![
        table(Some("public"), "a", None),
        table(Some("other"), "a", Some("other_a")),
    ]);
    let subsources = purify(&upstream.config, &request("partial", renamed))
        .await
        .unwrap();
    assert_eq!(names(&subsources), ["a", "other_a"]);
    assert_eq!(subsources[1].table.schema, "other");
    let schemas = TableSelection::Schemas(vec!["other".into()]);
    let subsources = purify(&upstream.config, &request("partial", schemas))
        .await
        .unwrap();
    assert_eq!(names(&subsources), ["a"]);
    assert_eq!(subsources[0].table.qualified_name(), "other.a");
}

#[tokio::test]
async fn tables_need_replica_identity_full_and_supported_types() {
    let upstream = fixture().await;
    let public = TableSelection::Schemas(vec!["public".into()]);
    let error = purify_err(&upstream, &request("all_tables", public)).await;
    // public.b (money) or public.no_identity is refused; replica identity is checked first.
    assert_eq!(
        error.message,
        "table public.no_identity does not have REPLICA IDENTITY FULL"
    );
    assert!(
        error
            .hint
            .unwrap()
            .contains("ALTER TABLE public.no_identity REPLICA IDENTITY FULL")
    );
    let only_b = TableSelection::Tables(vec![table(None, "b", None)]);
    let error = purify_err(&upstream, &request("all_tables", only_b.clone())).await;
    assert_eq!(
        error.message,
        "column public.b.m has unsupported type money"
    );
    assert_eq!(error.code, SqlState::FEATURE_NOT_SUPPORTED);
    assert!(error.hint.unwrap().contains("TEXT COLUMNS (public.b.m)"));
    // TEXT COLUMNS takes it as text; EXCLUDE COLUMNS leaves it out.
    let mut as_text = request("all_tables", only_b.clone());
    as_text.text_columns = vec![column("b", "m")];
    let subsources = purify(&upstream.config, &as_text).await.unwrap();
    let columns = &subsources[0].table.columns;
    assert_eq!(columns[1].name, "m");
    assert_eq!(columns[1].scalar_type, SqlScalarType::Text);
    let mut excluded = request("all_tables", only_b.clone());
    excluded.exclude_columns = vec![column("b", "m")];
    let subsources = purify(&upstream.config, &excluded).await.unwrap();
    assert_eq!(column_names(&subsources[0]), ["x", "n"]);
    // Bad references are refused.
    let mut both = request("all_tables", only_b.clone());
    both.text_columns = vec![column("b", "m")];
    both.exclude_columns = vec![column("b", "m")];
    let error = purify_err(&upstream, &both).await;
    assert_eq!(
        error.message,
        "column public.b.m is in both TEXT COLUMNS and EXCLUDE COLUMNS"
    );
    let mut unknown = request("all_tables", only_b.clone());
    unknown.text_columns = vec![column("b", "zz")];
    let error = purify_err(&upstream, &unknown).await;
    assert_eq!(
        error.message,
        "invalid TEXT COLUMNS option value: column public.b.zz does not exist"
    );
    let mut elsewhere = request("all_tables", only_b);
    elsewhere.exclude_columns = vec![column("a", "v")];
    let error = purify_err(&upstream, &elsewhere).await;
    assert_eq!(
        error.message,
        "invalid EXCLUDE COLUMNS option value: table a is not part of the source"
    );
}

#[tokio::test]
async fn subsources_keep_the_primary_key_and_nullability() {
    let upstream = fixture().await;
    let selection = TableSelection::Tables(vec![table(Some("public"), "a", None)]);
    let subsources = purify(&upstream.config, &request("partial", selection))
        .await
        .unwrap();
    let desc = subsources[0].table.desc();
    assert_eq!(desc.unique_keys, vec![vec![0]]);
    assert!(!desc.columns[0].1.nullable);
    assert!(desc.columns[1].1.nullable);
    // Excluding a key column drops the key.
    let mut excluded = request(
        "partial",
        TableSelection::Tables(vec![table(Some("public"), "a", None)]),
    );
    excluded.exclude_columns = vec![ColumnReference {
        schema: Some("public".into()),
        table: "a".into(),
        column: "id".into(),
    }];
    let subsources = purify(&upstream.config, &excluded).await.unwrap();
    assert!(subsources[0].table.desc().unique_keys.is_empty());
}

#[tokio::test]
async fn types_map_as_materialize_maps_them() {
    let upstream = Upstream::new("types").await;
    upstream
        .execute(
            "CREATE TYPE mood AS ENUM ('sad', 'happy');
             CREATE DOMAIN positive AS int CHECK (VALUE > 0);
             CREATE TABLE t (
                 a smallint, b integer, c bigint, d numeric(10, 2), e numeric, f real,
                 g double precision, h boolean, i text, j varchar(5), k char(3), l bytea,
                 m date, n time, o timestamp, p timestamptz, q interval, r uuid, s json,
                 u jsonb, v int[], w text[], x mood, y positive, z int4range, aa oid,
                 ab numrange, ac tstzrange, ad mood[]
             );
             ALTER TABLE t REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR TABLE t;",
        )
        .await;
    let subsources = purify(&upstream.config, &request("p", TableSelection::All))
        .await
        .unwrap();
    let types: Vec<String> = subsources[0]
        .table
        .columns
        .iter()
        .map(|c| c.scalar_type.to_string())
        .collect();
    assert_eq!(
        types,
        [
            "smallint",
            "integer",
            "bigint",
            "numeric(10,2)",
            "numeric",
            "real",
            "double precision",
            "boolean",
            "text",
            "character varying(5)",
            "text",
            "bytea",
            "date",
            "time",
            "timestamp without time zone",
            "timestamp with time zone",
            "interval",
            "uuid",
            "jsonb",
            "jsonb",
            "integer list",
            "text list",
            "text",
            "integer",
            "int4range",
            "oid",
            "numrange",
            "tstzrange",
            "text list",
        ]
    );
    for unsupported in ["inet", "timetz", "bit(3)", "point", "money[]"] {
        upstream
            .execute(&format!(
                "DROP TABLE IF EXISTS u; CREATE TABLE u (c {unsupported});
                 ALTER TABLE u REPLICA IDENTITY FULL; ALTER PUBLICATION p SET TABLE u;"
            ))
            .await;
        let error = purify_err(&upstream, &request("p", TableSelection::All)).await;
        assert!(
            error
                .message
                .starts_with("column public.u.c has unsupported type"),
            "{unsupported}: {}",
            error.message
        );
    }
}

#[tokio::test]
async fn a_publication_column_list_limits_the_columns() {
    let upstream = Upstream::new("collist").await;
    upstream
        .execute(
            "CREATE TABLE t (a int, b text, c money);
             ALTER TABLE t REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR TABLE t (a, b);",
        )
        .await;
    let subsources = purify(&upstream.config, &request("p", TableSelection::All))
        .await
        .unwrap();
    assert_eq!(column_names(&subsources[0]), ["a", "b"]);
}
