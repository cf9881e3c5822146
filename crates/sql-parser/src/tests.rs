use crate::ast::*;
use crate::parser::{ParserErrorKind, parse_statement, parse_statements};
use sqlparser::ast::{Ident, ObjectName};

/// Every statement prints as SQL that parses back to the same AST.
fn assert_round_trip(sql: &str) -> Statement {
    let parsed = parse_statement(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let printed = parsed.to_string();
    let reparsed = parse_statement(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert_eq!(parsed, reparsed, "{sql} printed as {printed}");
    parsed
}

#[test]
fn floe_statements_round_trip() {
    for sql in [
        "CREATE SECRET s AS 'x''y'",
        "CREATE SECRET IF NOT EXISTS db.sch.s AS 'v'",
        "ALTER SECRET IF EXISTS s AS 'w'",
        "CREATE TYPE pair AS (a int, b text list)",
        "CREATE TYPE s.il AS LIST (ELEMENT TYPE = int list)",
        "create type tm as map (key type text, value type = map[text=>int])",
        "CREATE CONNECTION aws TO AWS (ASSUME ROLE ARN = 'arn:aws:iam::1:role/r', REGION 'us-east-1')",
        "create connection c to aws (access key id = secret k, secret access key = secret s, session token 'tok') with (validate = false)",
        "CREATE CONNECTION ic TO ICEBERG CATALOG (CATALOG TYPE = 's3tablesrest', URL = 'http://x/iceberg', WAREHOUSE = 'arn', AWS CONNECTION = aws)",
        "CREATE CONNECTION ic TO ICEBERG CATALOG (CATALOG TYPE 'rest', CREDENTIAL = SECRET o, OAUTH2 SERVER URL = 'http://t', SCOPE = 'all-apis', ACCESS DELEGATION = 'vended-credentials') WITH (VALIDATE)",
        "VALIDATE CONNECTION ic",
        "ALTER CONNECTION ic SET (URL = 'x')",
        "ALTER CONNECTION ic SET (SECRET ACCESS KEY = 'it''s', URL = 'x')",
        "CREATE SINK s IN CLUSTER c FROM t INTO ICEBERG CATALOG CONNECTION ic (NAMESPACE = 'ns', TABLE = 't') KEY (a, b) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL = '1m')",
        "CREATE SINK IF NOT EXISTS s FROM t INTO ICEBERG CATALOG CONNECTION ic (NAMESPACE 'ns', TABLE 't') MODE APPEND WITH (COMMIT INTERVAL '10s')",
        "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION ic (NAMESPACE 'ns', TABLE 't')",
        "ALTER SINK s SET (COMMIT INTERVAL = '5m')",
        "ALTER SINK IF EXISTS s RESET (COMMIT INTERVAL)",
        "CREATE SOURCE c FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1s')",
        "CREATE SOURCE a IN CLUSTER q FROM LOAD GENERATOR AUCTION FOR ALL TABLES",
        "CREATE CONNECTION pg TO POSTGRES (HOST 'db', PORT 5432, USER 'u', PASSWORD SECRET pw, DATABASE 'd', SSL MODE 'verify-full', SSL CERTIFICATE AUTHORITY = SECRET ca) WITH (VALIDATE = false)",
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES",
        "CREATE SOURCE IF NOT EXISTS s IN CLUSTER c FROM POSTGRES CONNECTION db.sch.pg (PUBLICATION = 'p', TEXT COLUMNS (t.a, public.t.b), EXCLUDE COLUMNS = (u.c)) FOR TABLES (public.t, u AS renamed)",
        "create source s from postgres connection pg (publication 'p') for schemas (public, \"Other\")",
        "ALTER SOURCE s ADD SUBSOURCE public.t AS t2, u WITH (TEXT COLUMNS (u.c))",
        "ALTER SOURCE IF EXISTS s DROP SUBSOURCE IF EXISTS t2, u CASCADE",
        "CREATE CLUSTER c (SIZE = '25cc', REPLICATION FACTOR = 1)",
        "CREATE CLUSTER c REPLICAS (r1 (SIZE = '25cc'), r2 (SIZE '50cc'))",
        "ALTER CLUSTER c SET (REPLICATION FACTOR = 0)",
        "CREATE CLUSTER REPLICA c.r1 (SIZE = '25cc')",
        "DROP CLUSTER REPLICA c.r1",
        "DROP SECRET IF EXISTS a, b CASCADE",
        "DROP MATERIALIZED VIEW v",
        "CREATE VIEW v AS SELECT a, count(*) FROM t GROUP BY a",
        "CREATE OR REPLACE VIEW sch.v AS WITH w AS (SELECT 1 AS x) SELECT x FROM w",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS mv IN CLUSTER c AS SELECT t.a FROM t JOIN u ON t.a = u.a",
        "create materialized view mv as select * from t union all select * from u order by 1 limit 3",
        "SHOW SECRETS",
        "SHOW SINKS FROM public LIKE 's%'",
        "SHOW CONNECTIONS WHERE name = 'x'",
        "SHOW CREATE SINK s",
        "SHOW CREATE CONNECTION db.sch.c",
        "SHOW COLUMNS FROM t",
        "SHOW search_path",
        "SHOW TIME ZONE",
        "SET search_path TO public, mz_catalog",
        "SET SESSION application_name = 'psql'",
        "SET TIME ZONE 'UTC'",
        "SET extra_float_digits = 3",
        "RESET ALL",
        "SELECT 1",
        "BEGIN",
        "CREATE TABLE t (a int PRIMARY KEY, b text NOT NULL)",
    ] {
        assert_round_trip(sql);
    }
}

#[test]
fn options_take_an_optional_equals_sign_and_any_case() {
    let with_equals = assert_round_trip(
        "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION ic (NAMESPACE = 'x', TABLE = 't') MODE APPEND",
    );
    let without = assert_round_trip(
        "create sink s from t into iceberg catalog connection ic (namespace 'x', table 't') mode append",
    );
    assert_eq!(with_equals, without);
}

#[test]
fn known_multi_word_option_names_are_matched_longest_first() {
    let Statement::CreateConnection(c) = assert_round_trip(
        "CREATE CONNECTION c TO AWS (SECRET ACCESS KEY = SECRET s, ASSUME ROLE SESSION NAME 'n', FOO BAR = 'x')",
    ) else {
        panic!("not a connection");
    };
    let names: Vec<_> = c.options.iter().map(|o| o.name.0.as_str()).collect();
    assert_eq!(
        names,
        ["SECRET ACCESS KEY", "ASSUME ROLE SESSION NAME", "FOO BAR"]
    );
    assert!(matches!(c.options[0].value, Some(OptionValue::Secret(_))));
}

#[test]
fn several_statements_split_on_semicolons() {
    let statements = parse_statements(";; SELECT 1; CREATE SECRET s AS 'x';").unwrap();
    assert_eq!(statements.len(), 2);
    assert!(parse_statements("   ").unwrap().is_empty());
}

#[test]
fn unsupported_statements_are_named_not_syntax_errors() {
    for (sql, name) in [
        (
            "ALTER MATERIALIZED VIEW v RENAME TO w",
            "ALTER MATERIALIZED VIEW",
        ),
        (
            "CREATE TYPE mood AS ENUM ('sad', 'happy')",
            "CREATE TYPE ... AS ENUM",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'x')",
            "KAFKA sinks",
        ),
        (
            "CREATE SOURCE s FROM MYSQL CONNECTION m FOR ALL TABLES",
            "MYSQL sources",
        ),
        (
            "ALTER SOURCE s SET (RETAIN HISTORY = FOR '1h')",
            "ALTER SOURCE",
        ),
    ] {
        let error = parse_statement(sql).unwrap_err();
        assert_eq!(error.kind, ParserErrorKind::Unsupported, "{sql}");
        assert!(error.message.contains(name), "{sql}: {}", error.message);
    }
}

#[test]
fn postgres_sources_parse_into_their_parts() {
    let Statement::CreatePostgresSource(source) = parse_statement(
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p', TEXT COLUMNS (t.a)) \
         FOR TABLES (public.t AS x, u)",
    )
    .unwrap() else {
        panic!("not a Postgres source");
    };
    assert_eq!(source.connection.to_string(), "pg");
    assert_eq!(
        source.options,
        [
            PostgresSourceOption::Publication("p".into()),
            PostgresSourceOption::TextColumns(vec![ObjectName::from(vec![
                Ident::new("t"),
                Ident::new("a")
            ])]),
        ]
    );
    let PostgresTableSelection::Tables(tables) = &source.selection else {
        panic!("not FOR TABLES");
    };
    assert_eq!(tables[0].name.to_string(), "public.t");
    assert_eq!(tables[0].alias, Some(Ident::new("x")));
    assert_eq!(tables[1].alias, None);
    let Statement::CreateConnection(connection) =
        parse_statement("CREATE CONNECTION pg TO POSTGRES (HOST 'h', SSL MODE = 'require')")
            .unwrap()
    else {
        panic!("not a connection");
    };
    assert_eq!(connection.connection_type, ConnectionType::Postgres);
    assert_eq!(connection.options[1].name.0, "SSL MODE");
    for bad in [
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p')",
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (SLOT 'x') FOR ALL TABLES",
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg () FOR ALL TABLES",
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES ()",
        "ALTER SOURCE s ADD SUBSOURCE",
    ] {
        let error = parse_statement(bad).unwrap_err();
        assert_eq!(
            error.kind,
            ParserErrorKind::Syntax,
            "{bad}: {}",
            error.message
        );
    }
}

#[test]
fn syntax_errors_say_where() {
    let error = parse_statement(
        "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION ic (NAMESPACE 'x') MODE SIDEWAYS",
    )
    .unwrap_err();
    assert_eq!(error.kind, ParserErrorKind::Syntax);
    assert!(
        error.message.contains("UPSERT or APPEND"),
        "{}",
        error.message
    );
    assert!(error.message.contains("line 1"), "{}", error.message);
    let error = parse_statement("SELEC 1").unwrap_err();
    assert_eq!(error.kind, ParserErrorKind::Syntax);
}

#[test]
fn deeply_nested_input_is_an_error_not_a_crash() {
    let sql = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(parse_statement(&sql).is_err());
}

#[test]
fn create_table_with_materialize_types_round_trips() {
    for sql in [
        "CREATE TABLE t (a int list, b text list list NOT NULL, c map[text=>int] DEFAULT NULL)",
        "CREATE TABLE IF NOT EXISTS s.t (id int PRIMARY KEY, m map[text=>map[text=>bigint list]], PRIMARY KEY (id))",
        "create table t (a uint8, r int4range, n numeric(10,2) list CONSTRAINT c NOT NULL)",
        "CREATE TABLE t (a int, b text)",
        "CREATE TABLE t (a uint2, b uint4, c uint8, d tstzrange, e jsonb)",
    ] {
        let statement = assert_round_trip(sql);
        assert!(matches!(statement, Statement::Standard(_)), "{sql}");
    }
    let printed = parse_statement("CREATE TABLE t (a int list, m map[text=>int])")
        .unwrap()
        .to_string();
    assert_eq!(printed, "CREATE TABLE t (a INT list, m map[TEXT=>INT])");
    for bad in [
        "CREATE TABLE t (a map[text int])",
        "CREATE TABLE t (a map[text=>int)",
        "CREATE TABLE t (a int list,",
    ] {
        assert!(parse_statement(bad).is_err(), "{bad}");
    }
}

#[test]
fn alter_connection_actions_are_read_from_the_kept_text() {
    use crate::parser::parse_alter_connection_actions;
    let Statement::AlterConnection(alter) = parse_statement(
        "ALTER CONNECTION c SET (REGION = 'eu-west-1', ENDPOINT 'http://h'), DROP (ASSUME ROLE SESSION NAME), RESET (session token) WITH (VALIDATE = false)",
    )
    .unwrap() else {
        panic!("not an ALTER CONNECTION");
    };
    let parsed = parse_alter_connection_actions(&alter.action).unwrap();
    let names: Vec<String> = parsed
        .actions
        .iter()
        .map(|action| match action {
            AlterConnectionAction::Set(option) => format!("set {option}"),
            AlterConnectionAction::Drop(name) => format!("drop {name}"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "set REGION = 'eu-west-1'",
            "set ENDPOINT = 'http://h'",
            "drop ASSUME ROLE SESSION NAME",
            "drop SESSION TOKEN",
        ]
    );
    assert_eq!(parsed.with_options.len(), 1);
    for (bad, kind) in [
        ("SET REGION = 'x'", ParserErrorKind::Syntax),
        ("DROP ()", ParserErrorKind::Syntax),
        ("SET (REGION = 'x') garbage", ParserErrorKind::Syntax),
        ("RENAME TO d", ParserErrorKind::Unsupported),
        ("ROTATE KEYS", ParserErrorKind::Unsupported),
        ("", ParserErrorKind::Syntax),
    ] {
        let error = parse_alter_connection_actions(bad).unwrap_err();
        assert_eq!(error.kind, kind, "{bad}: {error}");
    }
}

#[test]
fn comment_on_round_trips() {
    for sql in [
        "COMMENT ON TABLE t IS 'orders, one row per order'",
        "COMMENT ON MATERIALIZED VIEW s.mv IS 'it''s'",
        "COMMENT ON COLUMN t.id IS NULL",
        "comment on sink materialize.public.k is 'x'",
        "CREATE SCHEMA IF NOT EXISTS s",
        "DROP SCHEMA IF EXISTS s, t CASCADE",
    ] {
        assert_round_trip(sql);
    }
    let Statement::Comment(comment) = parse_statement("COMMENT ON COLUMN s.t.c IS 'x'").unwrap()
    else {
        panic!("not a COMMENT");
    };
    assert_eq!(comment.target, CommentTarget::Column);
    assert_eq!(comment.comment.as_deref(), Some("x"));
    for bad in [
        "COMMENT ON TABLE t",
        "COMMENT ON TABLE t IS 3",
        "COMMENT ON t IS 'x'",
    ] {
        assert!(parse_statement(bad).is_err(), "{bad}");
    }
}

fn subscribe_of(sql: &str) -> SubscribeStatement {
    match parse_statement(sql).unwrap() {
        Statement::Subscribe(subscribe) => subscribe,
        other => panic!("not a SUBSCRIBE: {other:?}"),
    }
}

#[test]
fn subscribe_parses_its_relation_and_options() {
    let subscribe =
        subscribe_of("COPY (SUBSCRIBE TO v WITH (SNAPSHOT = false, PROGRESS)) TO STDOUT");
    assert_eq!(subscribe.relation.to_string(), "v");
    assert!(!subscribe.snapshot && subscribe.progress && subscribe.copy);
    let plain = subscribe_of("copy (subscribe public.t) to stdout");
    assert!(plain.snapshot && !plain.progress);
    let statement = subscribe_of("SUBSCRIBE t WITH (PROGRESS = true)");
    assert!(!statement.copy && statement.progress);
    let query = subscribe_of("SUBSCRIBE (SELECT a, count(*) FROM t GROUP BY a)");
    assert!(matches!(query.relation, SubscribeRelation::Query(_)));
    assert!(subscribe_of("COPY (SUBSCRIBE (SELECT 1)) TO STDOUT").copy);
    assert!(parse_statement("COPY (SUBSCRIBE t WITH (LIMIT 1)) TO STDOUT").is_err());
    assert!(parse_statement("SUBSCRIBE (SELECT 1").is_err());
    // Each prints SQL that parses back to itself.
    for sql in [
        "SUBSCRIBE TO v WITH (SNAPSHOT = false)",
        "COPY (SUBSCRIBE (SELECT a FROM t WHERE a > 1) WITH (PROGRESS)) TO STDOUT",
    ] {
        let statement = parse_statement(sql).unwrap();
        assert_eq!(parse_statement(&statement.to_string()).unwrap(), statement);
    }
}

#[test]
fn cursors_over_subscriptions_parse() {
    let Statement::Declare(declare) =
        parse_statement("DECLARE c CURSOR WITHOUT HOLD FOR SUBSCRIBE (SELECT 1)").unwrap()
    else {
        panic!("not a DECLARE");
    };
    assert_eq!(declare.name.value, "c");
    assert!(matches!(*declare.statement, Statement::Subscribe(_)));
    let error = parse_statement("DECLARE c CURSOR FOR SELECT 1").unwrap_err();
    assert_eq!(error.kind, ParserErrorKind::Unsupported);
    for (sql, count, timeout) in [
        ("FETCH c", Some(1), None),
        ("FETCH 10 c", Some(10), None),
        ("FETCH ALL FROM c WITH (TIMEOUT = '1s')", None, Some("1s")),
        (
            "FETCH FORWARD 2 IN c WITH (TIMEOUT '0s')",
            Some(2),
            Some("0s"),
        ),
    ] {
        let Statement::Fetch(fetch) = parse_statement(sql).unwrap() else {
            panic!("not a FETCH: {sql}");
        };
        assert_eq!(fetch.name.value, "c", "{sql}");
        assert_eq!(fetch.count, count, "{sql}");
        assert_eq!(fetch.timeout.as_deref(), timeout, "{sql}");
        assert_eq!(
            parse_statement(&fetch.to_string()).unwrap(),
            Statement::Fetch(fetch)
        );
    }
    assert!(parse_statement("FETCH -1 c").is_err());
    assert_eq!(
        parse_statement("close c").unwrap(),
        Statement::Close(sqlparser::ast::Ident::new("c"))
    );
}

#[test]
fn create_index_in_materialize_and_postgres_forms_round_trips() {
    for sql in [
        "CREATE INDEX i ON t (a)",
        "CREATE INDEX ON t (a, b DESC)",
        "create unique index if not exists i on sch.t using btree (a asc nulls last, b desc nulls first)",
        "CREATE INDEX i IN CLUSTER c ON t (a)",
        "CREATE INDEX IN CLUSTER c ON t USING ARRANGEMENT (a)",
        "CREATE DEFAULT INDEX ON t",
        "CREATE DEFAULT INDEX IF NOT EXISTS IN CLUSTER c ON t USING ARRANGEMENT",
        "CREATE INDEX CONCURRENTLY i ON ONLY t (a)",
        "SHOW INDEXES",
        "SHOW INDEXES ON t",
        "SHOW INDEXES FROM s IN CLUSTER c",
        "SHOW INDEXES IN CLUSTER c",
    ] {
        assert_round_trip(sql);
    }
    let Statement::CreateIndex(index) =
        assert_round_trip("CREATE UNIQUE INDEX i ON t (a DESC, (b))")
    else {
        panic!("not an index");
    };
    assert!(index.unique);
    assert_eq!(index.name, Some(Ident::new("i")));
    let key = index.key.unwrap();
    assert_eq!(key.len(), 2);
    assert!(key[0].descending && !key[1].descending);
    let Statement::Show(ShowStatement::Indexes {
        from, in_cluster, ..
    }) = assert_round_trip("SHOW INDEXES IN CLUSTER c")
    else {
        panic!("not SHOW INDEXES");
    };
    assert_eq!((from, in_cluster), (None, Some(Ident::new("c"))));
    for sql in [
        "CREATE INDEX i ON t",
        "CREATE INDEX i ON t ()",
        "CREATE UNIQUE DEFAULT INDEX ON t",
        "CREATE INDEX i t (a)",
    ] {
        let error = parse_statement(sql).unwrap_err();
        assert_eq!(error.kind, ParserErrorKind::Syntax, "{sql}");
    }
}

#[test]
fn between_symmetric_is_the_range_in_either_order() {
    let printed = |sql: &str| assert_round_trip(sql).to_string();
    assert_eq!(
        printed("SELECT a BETWEEN SYMMETRIC 3 AND 1 FROM t"),
        "SELECT (a BETWEEN 3 AND 1 OR a BETWEEN 1 AND 3) FROM t"
    );
    assert_eq!(
        printed("SELECT a NOT BETWEEN SYMMETRIC b AND c + 1 AND d"),
        "SELECT (a NOT BETWEEN b AND c + 1 AND a NOT BETWEEN c + 1 AND b) AND d"
    );
    assert_eq!(
        printed("SELECT a BETWEEN ASYMMETRIC 1 AND 3"),
        "SELECT a BETWEEN 1 AND 3"
    );
    assert!(parse_statement("SELECT a BETWEEN SYMMETRIC 3").is_err());
}

#[test]
fn a_join_alias_joins_the_using_list() {
    let marker = crate::join_alias::JOIN_ALIAS;
    let printed =
        parse_statement("SELECT j.a FROM t JOIN u USING (a, b) AS j WHERE x = 'USING (a) AS k'")
            .unwrap()
            .to_string();
    assert_eq!(
        printed,
        format!("SELECT j.a FROM t JOIN u USING(a, b, \"{marker}j\") WHERE x = 'USING (a) AS k'")
    );
    // Only a list of names followed by AS is an alias.
    assert!(parse_statement("SELECT 1 FROM t JOIN u USING (a) AS").is_err());
    let plain = parse_statement("SELECT 1 FROM t JOIN u USING (a) j").map(|s| s.to_string());
    assert!(plain.is_err() || !plain.unwrap().contains(marker));
}

#[test]
fn table_queries_are_select_star() {
    let parsed = |sql: &str| parse_statement(sql).map(|s| s.to_string());
    assert_eq!(parsed("TABLE t").unwrap(), "SELECT * FROM t");
    assert_eq!(parsed("table s.\"T\";").unwrap(), "SELECT * FROM s.\"T\"");
    assert_eq!(
        parsed("SELECT a FROM (TABLE t UNION ALL TABLE u) AS x").unwrap(),
        "SELECT a FROM (SELECT * FROM t UNION ALL SELECT * FROM u) AS x"
    );
    assert_eq!(
        parsed("SELECT 1 EXCEPT DISTINCT TABLE u").unwrap(),
        "SELECT 1 EXCEPT DISTINCT SELECT * FROM u"
    );
    assert_eq!(
        parsed("CREATE VIEW v AS TABLE t").unwrap(),
        "CREATE VIEW v AS SELECT * FROM t"
    );
    // `TABLE` that does not begin a query stays.
    assert_eq!(
        parsed("CREATE TABLE table_t (a int)").unwrap(),
        "CREATE TABLE table_t (a INT)"
    );
    assert_eq!(parsed("DROP TABLE t").unwrap(), "DROP TABLE t");
    assert!(parse_statement("TABLE").is_err());
    assert_eq!(
        parsed("SELECT 'TABLE t' AS x").unwrap(),
        "SELECT 'TABLE t' AS x"
    );
}

#[test]
fn list_and_map_expressions_parse() {
    let parsed = |sql: &str| parse_statement(sql).map(|s| s.to_string());
    assert_eq!(
        parsed("SELECT '{1}'::int list, CAST(x AS map[text=>int list])").unwrap(),
        "SELECT '{1}'::INT list, CAST(x AS map[TEXT=>INT list])"
    );
    assert_eq!(
        parsed("SELECT LIST[1, 2], LIST[], MAP['a' => 1]").unwrap(),
        "SELECT floe_list(ARRAY[1, 2]), floe_list(ARRAY[]), floe_map(ARRAY['a'], ARRAY[1])"
    );
    assert_eq!(
        parsed("SELECT LIST[LIST[1], NULL]").unwrap(),
        "SELECT floe_list_of_lists(floe_list(ARRAY[1]), NULL)"
    );
    // A plain cast and an alias stay as they were.
    assert_eq!(
        parsed("SELECT x::int AS list, CAST(y AS text)").unwrap(),
        "SELECT x::INT AS list, CAST(y AS TEXT)"
    );
    assert!(parse_statement("SELECT MAP['a' 1]").is_err());
    assert!(parse_statement("SELECT LIST[1").is_err());
    assert!(parse_statement("SELECT CAST(x AS map[text int])").is_err());
}
