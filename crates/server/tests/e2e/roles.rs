//! Roles against the real binary: CREATE/ALTER/DROP ROLE and role membership by
//! the superuser, logins of roles with SCRAM, what a role that is not a superuser
//! may not do, the catalog views of roles, and no password in clear text anywhere
//! (catalog file, views, log).

use crate::support::{Floe, execute_each, rows};

const SUPERUSER_PASSWORD: &str = "superuser secret 1";
const ALICE_PASSWORD: &str = "alice's first secret";
const ALICE_NEW_PASSWORD: &str = "alice's second secret";

async fn connect(
    floe: &Floe,
    user: &str,
    password: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let config = format!(
        "host=127.0.0.1 port={} user={user} dbname=materialize password='{}'",
        floe.port,
        password.replace('\'', "\\'")
    );
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn sqlstate(error: &tokio_postgres::Error) -> (String, String) {
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {error}"));
    (db.code().code().to_string(), db.message().to_string())
}

/// The superuser creates roles (one with a password), grants membership, alters
/// and drops them; a role logs in with SCRAM with its password and not with
/// another; NOLOGIN and unknown roles fail alike; a role that is not a superuser
/// gets 42501 for role DDL but may change its own password; passwords appear in
/// no view, in no log line, and not in the catalog file, where only SCRAM
/// verifiers are kept; everything survives a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_log_in_and_keep_only_verifiers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["--authenticator", "sasl"];
    let env = [("FLOE_SUPERUSER_PASSWORD", SUPERUSER_PASSWORD)];
    let mut floe = Floe::start_with_env(&data, &args, &env);
    let admin = connect(&floe, "materialize", SUPERUSER_PASSWORD)
        .await
        .expect("the superuser logs in");
    execute_each(
        &admin,
        &format!(
            "CREATE ROLE alice WITH LOGIN PASSWORD '{}';
             CREATE ROLE readers;
             CREATE ROLE writers INHERIT;
             GRANT readers, writers TO alice;
             GRANT readers TO writers",
            ALICE_PASSWORD.replace('\'', "''")
        ),
    )
    .await
    .expect("role DDL by the superuser");

    let roles = rows(
        &admin,
        "SELECT name, inherit, rolcanlogin, rolsuper FROM mz_roles ORDER BY name",
    )
    .await;
    let expected: Vec<Vec<Option<String>>> = [
        ["alice", "t", "t", "f"],
        ["materialize", "t", "t", "t"],
        ["readers", "t", "f", "f"],
        ["writers", "t", "f", "f"],
    ]
    .iter()
    .map(|row| row.iter().map(|v| Some(v.to_string())).collect())
    .collect();
    assert_eq!(roles, expected);
    let members = rows(
        &admin,
        "SELECT r.name, m.name, g.name FROM mz_role_members rm
         JOIN mz_roles r ON r.id = rm.role_id
         JOIN mz_roles m ON m.id = rm.member
         JOIN mz_roles g ON g.id = rm.grantor
         ORDER BY 1, 2",
    )
    .await;
    let members: Vec<String> = members
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| v.clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        members,
        [
            "readers alice materialize",
            "readers writers materialize",
            "writers alice materialize"
        ]
    );
    let pg_roles = rows(
        &admin,
        "SELECT rolname, rolpassword, rolcanlogin FROM pg_roles WHERE rolname IN ('alice', 'readers') ORDER BY 1",
    )
    .await;
    assert_eq!(
        pg_roles,
        vec![
            vec![
                Some("alice".to_string()),
                Some("********".to_string()),
                Some("t".to_string())
            ],
            vec![Some("readers".to_string()), None, Some("f".to_string())],
        ]
    );

    // Statement rules.
    for (sql, code, message) in [
        ("CREATE ROLE alice", "42710", "role 'alice' already exists"),
        (
            "CREATE ROLE mz_x",
            "42939",
            "role name \"mz_x\" is reserved",
        ),
        (
            "CREATE ROLE x NOINHERIT",
            "0A000",
            "non inherit roles are not supported",
        ),
        (
            "CREATE ROLE x LOGIN NOLOGIN",
            "42601",
            "conflicting or redundant options",
        ),
        ("GRANT nobody TO alice", "42704", "unknown role 'nobody'"),
        (
            "GRANT alice TO readers",
            "0LP01",
            "role \"alice\" is a member of role \"readers\"",
        ),
        ("DROP ROLE nobody", "42704", "unknown role 'nobody'"),
    ] {
        let error = admin.batch_execute(sql).await.expect_err(sql);
        assert_eq!(
            sqlstate(&error),
            (code.to_string(), message.to_string()),
            "{sql}"
        );
    }
    admin
        .batch_execute("DROP ROLE IF EXISTS nobody")
        .await
        .expect("IF EXISTS of a missing role is a notice");
    // The superuser may not be dropped.
    let error = admin
        .batch_execute("DROP ROLE materialize")
        .await
        .expect_err("dropping the superuser");
    assert_eq!(sqlstate(&error).0, "42501");

    // Logins: the right password, a wrong one, a role without LOGIN, an unknown role.
    let alice = connect(&floe, "alice", ALICE_PASSWORD)
        .await
        .expect("alice logs in with her password");
    for (user, password) in [
        ("alice", "wrong"),
        ("readers", ALICE_PASSWORD),
        ("nobody", ALICE_PASSWORD),
    ] {
        let error = connect(&floe, user, password)
            .await
            .err()
            .unwrap_or_else(|| panic!("{user} logged in with {password:?}"));
        assert_eq!(
            sqlstate(&error),
            (
                "28P01".to_string(),
                format!("password authentication failed for user \"{user}\"")
            )
        );
    }

    // A role that is not a superuser: no role DDL, but its own password.
    for sql in [
        "CREATE ROLE eve",
        "REVOKE writers FROM alice",
        "DROP ROLE readers",
        "ALTER ROLE alice SUPERUSER",
    ] {
        let error = alice.batch_execute(sql).await.expect_err(sql);
        let db = error.as_db_error().unwrap();
        assert_eq!(db.code().code(), "42501", "{sql}");
        assert_eq!(db.message(), "permission denied for SYSTEM", "{sql}");
        assert_eq!(
            db.detail(),
            Some("The 'alice' role needs CREATEROLE privileges on SYSTEM"),
            "{sql}"
        );
    }
    alice
        .batch_execute(&format!(
            "ALTER ROLE alice PASSWORD '{}'",
            ALICE_NEW_PASSWORD.replace('\'', "''")
        ))
        .await
        .expect("a role changes its own password");
    assert!(connect(&floe, "alice", ALICE_PASSWORD).await.is_err());
    drop(alice);

    // Revoke, alter, drop; then a restart keeps what is left.
    execute_each(
        &admin,
        "REVOKE writers FROM alice;
         ALTER ROLE readers LOGIN;
         DROP ROLE writers",
    )
    .await
    .expect("revoke, alter, drop");
    let log = floe.log();
    floe.terminate();
    let catalog = std::fs::read(data.join("catalog.db")).unwrap();
    let wal = std::fs::read(data.join("catalog.db-wal")).unwrap_or_default();
    for password in [ALICE_PASSWORD, ALICE_NEW_PASSWORD, SUPERUSER_PASSWORD] {
        for (what, bytes) in [("catalog.db", &catalog), ("catalog.db-wal", &wal)] {
            assert!(
                !bytes
                    .windows(password.len())
                    .any(|window| window == password.as_bytes()),
                "{what} holds a password in clear text"
            );
        }
        assert!(!log.contains(password), "the log holds a password");
    }
    assert!(
        catalog
            .windows(b"SCRAM-SHA-256$4096:".len())
            .any(|w| w == b"SCRAM-SHA-256$4096:")
            || wal
                .windows(b"SCRAM-SHA-256$4096:".len())
                .any(|w| w == b"SCRAM-SHA-256$4096:"),
        "the catalog keeps SCRAM verifiers"
    );

    let floe = Floe::start_with_env(&data, &args, &env);
    let admin = connect(&floe, "materialize", SUPERUSER_PASSWORD)
        .await
        .expect("the superuser logs in again");
    let after = rows(
        &admin,
        "SELECT r.name, r.rolcanlogin, (SELECT count(*) FROM mz_role_members WHERE member = r.id)
         FROM mz_roles r ORDER BY 1",
    )
    .await;
    let after: Vec<String> = after
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| v.clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(after, ["alice t 1", "materialize t 0", "readers t 0"]);
    connect(&floe, "alice", ALICE_NEW_PASSWORD)
        .await
        .expect("alice's new password survives the restart");
}

/// Connects as `user` to a server without authentication (a role's name acts as
/// that role).
async fn connect_as(floe: &Floe, user: &str) -> tokio_postgres::Client {
    let config = format!(
        "host=127.0.0.1 port={} user={user} dbname=materialize",
        floe.port
    );
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("{user} connects: {e}"));
    tokio::spawn(connection);
    client
}

/// Asserts that each statement fails with 42501 and the message given.
async fn assert_denied(client: &tokio_postgres::Client, cases: &[(&str, &str)]) {
    for (sql, message) in cases {
        let error = client.batch_execute(sql).await.expect_err(sql);
        assert_eq!(
            sqlstate(&error),
            ("42501".to_string(), message.to_string()),
            "{sql}"
        );
    }
}

async fn assert_allowed(client: &tokio_postgres::Client, statements: &[&str]) {
    for sql in statements {
        client
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

const T: &str = "permission denied for TABLE \"materialize.public.t\"";

/// The privilege matrix: a role without grants is refused every read, write and
/// DDL with Materialize's 42501 texts; grants (directly, through a role it is a
/// member of, and to PUBLIC) allow exactly what they name; REVOKE takes them back;
/// an owner may do everything to what it owns; privilege columns and owners show
/// it all; a role that owns objects cannot be dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privilege_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let admin = floe.connect().await;
    execute_each(
        &admin,
        "CREATE TABLE t (a int);
         INSERT INTO t VALUES (1);
         CREATE SECRET s AS 'x';
         CREATE ROLE alice LOGIN;
         CREATE ROLE readers",
    )
    .await
    .unwrap();
    let alice = connect_as(&floe, "alice").await;

    // Without grants.
    assert_denied(
        &alice,
        &[
            ("SELECT * FROM t", T),
            ("SELECT count(*) FROM public.t", T),
            ("INSERT INTO t VALUES (2)", T),
            ("UPDATE t SET a = 2", T),
            ("DELETE FROM t", T),
            ("COPY t TO STDOUT", T),
            (
                "CREATE TABLE u (a int)",
                "permission denied for SCHEMA \"materialize.public\"",
            ),
            (
                "DROP TABLE t",
                "must be owner of TABLE materialize.public.t",
            ),
            (
                "GRANT SELECT ON t TO alice",
                "must be owner of TABLE materialize.public.t",
            ),
            (
                "ALTER SECRET s AS 'y'",
                "must be owner of SECRET materialize.public.s",
            ),
            (
                "CREATE CLUSTER c (SIZE = '25cc')",
                "permission denied for SYSTEM",
            ),
        ],
    )
    .await;
    // Builtin relations need no grant.
    assert_allowed(&alice, &["SELECT count(*) FROM mz_tables"]).await;

    // Grants: SELECT to alice, INSERT through readers, CREATE on the schema to PUBLIC.
    execute_each(
        &admin,
        "GRANT SELECT ON TABLE t TO alice;
         GRANT INSERT ON t TO readers;
         GRANT readers TO alice;
         GRANT CREATE ON SCHEMA public TO PUBLIC",
    )
    .await
    .unwrap();
    assert_allowed(
        &alice,
        &[
            "SELECT * FROM t",
            "INSERT INTO t VALUES (2)",
            "CREATE TABLE mine (a int)",
            "INSERT INTO mine SELECT a FROM t",
            "UPDATE mine SET a = a + 1",
        ],
    )
    .await;
    assert_denied(&alice, &[("UPDATE t SET a = 2", T), ("DELETE FROM t", T)]).await;
    let alice_id = rows(&admin, "SELECT id FROM mz_roles WHERE name = 'alice'").await[0][0]
        .clone()
        .unwrap();
    let readers_id = rows(&admin, "SELECT id FROM mz_roles WHERE name = 'readers'").await[0][0]
        .clone()
        .unwrap();
    let tables = rows(
        &admin,
        "SELECT name, owner_id, privileges FROM mz_tables ORDER BY name",
    )
    .await;
    assert_eq!(
        tables,
        vec![
            vec![
                Some("mine".to_string()),
                Some(alice_id.clone()),
                Some(format!("{{{alice_id}=arwd/{alice_id}}}")),
            ],
            vec![
                Some("t".to_string()),
                Some("u1".to_string()),
                Some(format!("{{u1=arwd/u1,{alice_id}=r/u1,{readers_id}=a/u1}}")),
            ],
        ]
    );
    let schema = rows(
        &admin,
        "SELECT privileges FROM mz_schemas WHERE name = 'public'",
    )
    .await;
    assert_eq!(schema[0][0].as_deref(), Some("{u1=UC/u1,=UC/u1}"));

    // REVOKE takes a grant back; a membership revoked takes what came through it.
    execute_each(
        &admin,
        "REVOKE SELECT ON t FROM alice;
         REVOKE readers FROM alice",
    )
    .await
    .unwrap();
    assert_denied(
        &alice,
        &[("SELECT * FROM t", T), ("INSERT INTO t VALUES (3)", T)],
    )
    .await;

    // The owner may do everything; ownership changes hands with ALTER ... OWNER TO.
    admin
        .batch_execute("ALTER TABLE t OWNER TO alice")
        .await
        .unwrap();
    assert_allowed(
        &alice,
        &[
            "UPDATE t SET a = a * 10",
            "DELETE FROM t WHERE a = 20",
            "SELECT * FROM t",
            "GRANT SELECT ON t TO readers",
        ],
    )
    .await;
    let error = admin
        .batch_execute("DROP ROLE alice")
        .await
        .expect_err("alice owns tables");
    let db = error.as_db_error().unwrap();
    assert_eq!(db.code().code(), "2BP01");
    assert_eq!(
        db.message(),
        "role \"alice\" cannot be dropped because some objects depend on it"
    );
    assert_allowed(&alice, &["DROP TABLE mine", "DROP TABLE t"]).await;

    // Schemas: CREATE SCHEMA takes CREATE on the database; the creator owns the
    // schema (and so may create in it and drop it); another's schema takes a
    // grant to create in and its ownership to drop.
    admin.batch_execute("CREATE SCHEMA sales").await.unwrap();
    assert_denied(
        &alice,
        &[
            (
                "CREATE SCHEMA mine",
                "permission denied for DATABASE \"materialize\"",
            ),
            (
                "CREATE TABLE sales.x (a int)",
                "permission denied for SCHEMA \"materialize.sales\"",
            ),
            (
                "DROP SCHEMA sales",
                "must be owner of SCHEMA materialize.sales",
            ),
        ],
    )
    .await;
    // Reading a table of a schema takes USAGE on the schema besides SELECT.
    execute_each(
        &admin,
        "CREATE TABLE sales.o (a int);
         GRANT SELECT ON sales.o TO alice",
    )
    .await
    .unwrap();
    assert_denied(
        &alice,
        &[(
            "SELECT * FROM sales.o",
            "permission denied for SCHEMA \"materialize.sales\"",
        )],
    )
    .await;
    execute_each(&admin, "GRANT USAGE ON SCHEMA sales TO alice")
        .await
        .unwrap();
    assert_allowed(&alice, &["SELECT * FROM sales.o"]).await;
    assert_allowed(&admin, &["DROP TABLE sales.o"]).await;
    admin
        .batch_execute("GRANT CREATE ON DATABASE materialize TO alice")
        .await
        .unwrap();
    assert_allowed(
        &alice,
        &["CREATE SCHEMA mine", "CREATE TABLE mine.x (a int)"],
    )
    .await;
    let owners = rows(
        &admin,
        "SELECT name, owner_id FROM mz_schemas WHERE name IN ('mine', 'sales') ORDER BY name",
    )
    .await;
    assert_eq!(
        owners,
        vec![
            vec![Some("mine".to_string()), Some(alice_id.clone())],
            vec![Some("sales".to_string()), Some("u1".to_string())],
        ]
    );
    assert_allowed(&alice, &["DROP TABLE mine.x", "DROP SCHEMA mine"]).await;
    admin
        .batch_execute("REVOKE CREATE ON DATABASE materialize FROM alice")
        .await
        .unwrap();
    assert_allowed(&admin, &["DROP ROLE alice"]).await;
}

/// The matrix beyond tables: SELECT on views, materialized views and sources; USAGE
/// on secrets; CREATE on clusters. A view reads as its owner, so SELECT on the view
/// is enough without SELECT on its table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privileges_on_views_sources_secrets_and_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let admin = floe.connect().await;
    execute_each(
        &admin,
        "CREATE TABLE t (a int);
         INSERT INTO t VALUES (1);
         CREATE VIEW v AS SELECT a FROM t;
         CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t;
         CREATE SOURCE counter FROM LOAD GENERATOR COUNTER (TICK INTERVAL '100ms');
         CREATE SECRET s AS 'x';
         CREATE CLUSTER c (SIZE = '25cc');
         CREATE ROLE alice LOGIN;
         GRANT CREATE ON SCHEMA public TO alice",
    )
    .await
    .unwrap();
    let alice = connect_as(&floe, "alice").await;
    // The session's role, as psql and drivers ask for it.
    assert_eq!(
        rows(&alice, "SELECT current_user, session_user").await,
        vec![vec![Some("alice".to_string()), Some("alice".to_string())]]
    );
    let connection = "CREATE CONNECTION pg TO POSTGRES (HOST '127.0.0.1', USER 'u', PASSWORD SECRET s, DATABASE 'd') WITH (VALIDATE = false)";
    let in_cluster = "CREATE MATERIALIZED VIEW mine IN CLUSTER c AS SELECT 1 AS one";
    assert_denied(
        &alice,
        &[
            (
                "SELECT * FROM v",
                "permission denied for VIEW \"materialize.public.v\"",
            ),
            (
                "SELECT n FROM m",
                "permission denied for MATERIALIZED VIEW \"materialize.public.m\"",
            ),
            (
                "SELECT count(*) FROM counter",
                "permission denied for SOURCE \"materialize.public.counter\"",
            ),
            (
                connection,
                "permission denied for SECRET \"materialize.public.s\"",
            ),
            (in_cluster, "permission denied for CLUSTER \"c\""),
        ],
    )
    .await;
    execute_each(
        &admin,
        "GRANT SELECT ON v TO alice;
         GRANT SELECT ON m TO alice;
         GRANT SELECT ON counter TO alice;
         GRANT USAGE ON SECRET s TO alice;
         GRANT CREATE ON CLUSTER c TO alice",
    )
    .await
    .unwrap();
    assert_allowed(
        &alice,
        &[
            "SELECT * FROM v",
            "SELECT n FROM m",
            "SELECT count(*) FROM counter",
            connection,
            in_cluster,
        ],
    )
    .await;
    // The view's table itself stays out of reach.
    assert_denied(&alice, &[("SELECT * FROM t", T)]).await;
}

/// A sink runs with its owner's privileges: created by a role with the grants it
/// needs, it runs; revoking SELECT on its relation from the owner stalls it with
/// the reason; granting it back runs it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_run_with_their_owners_privileges() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let admin = floe.connect().await;
    execute_each(
        &admin,
        "CREATE TABLE t (a int);
         INSERT INTO t VALUES (1);
         CREATE CONNECTION local TO ICEBERG CATALOG (CATALOG TYPE = 'local');
         CREATE ROLE alice LOGIN;
         GRANT CREATE ON SCHEMA public TO alice;
         GRANT CREATE ON CLUSTER quickstart TO alice;
         GRANT SELECT ON t TO alice",
    )
    .await
    .unwrap();
    let alice = connect_as(&floe, "alice").await;
    let sink = "CREATE SINK k FROM t INTO ICEBERG CATALOG CONNECTION local (NAMESPACE = 'ns', TABLE = 'k') MODE APPEND WITH (COMMIT INTERVAL = '1s')";
    assert_denied(
        &alice,
        &[(
            sink,
            "permission denied for CONNECTION \"materialize.public.local\"",
        )],
    )
    .await;
    admin
        .batch_execute("GRANT USAGE ON CONNECTION local TO alice")
        .await
        .unwrap();
    assert_allowed(&alice, &[sink]).await;
    wait_for(&admin, "running").await;
    admin
        .batch_execute("REVOKE SELECT ON t FROM alice")
        .await
        .unwrap();
    let error = wait_for(&admin, "stalled").await;
    assert_eq!(
        error,
        "permission denied for TABLE \"materialize.public.t\": the sink runs with the privileges of its owner 'alice'"
    );
    admin
        .batch_execute("GRANT SELECT ON t TO alice")
        .await
        .unwrap();
    wait_for(&admin, "running").await;
}

/// Waits until sink `k` has status `wanted`; its error.
async fn wait_for(admin: &tokio_postgres::Client, wanted: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = rows(
            admin,
            "SELECT status, coalesce(error, '') FROM mz_internal.mz_sink_statuses WHERE name = 'k'",
        )
        .await;
        if now[0][0].as_deref() == Some(wanted) {
            return now[0][1].clone().unwrap_or_default();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sink k not {wanted}: {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A session is bound to its role when it starts, under every authenticator: a
/// role that loses LOGIN keeps its connected sessions with its own privileges (new
/// logins are refused), a dropped role's sessions fail every statement (42704, as
/// Materialize's concurrently dropped role) and never act as the superuser or as
/// a new role of the same name, and a session may not drop its own role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_a_dropped_role_have_no_privileges() {
    for authenticator in ["none", "password", "sasl"] {
        let dir = tempfile::tempdir().unwrap();
        let args = ["--authenticator", authenticator];
        let env = [("FLOE_SUPERUSER_PASSWORD", SUPERUSER_PASSWORD)];
        let env: &[(&str, &str)] = if authenticator == "none" { &[] } else { &env };
        let floe = Floe::start_with_env(&dir.path().join("data"), &args, env);
        dropped_role_case(&floe, authenticator).await;
    }
}

async fn dropped_role_case(floe: &Floe, authenticator: &str) {
    let admin = connect(floe, "materialize", SUPERUSER_PASSWORD)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{authenticator}: the superuser logs in: {e}; log:\n{}",
                floe.log()
            )
        });
    execute_each(
        &admin,
        &format!(
            "CREATE TABLE t (a int);
             INSERT INTO t VALUES (1);
             CREATE ROLE alice LOGIN PASSWORD '{ALICE_PASSWORD}';
             CREATE ROLE root SUPERUSER LOGIN PASSWORD '{ALICE_PASSWORD}';
             GRANT SELECT ON t TO alice"
        )
        .replace("alice's", "alice''s"),
    )
    .await
    .unwrap_or_else(|e| panic!("{authenticator}: setup: {e}"));
    let alice = connect(floe, "alice", ALICE_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("{authenticator}: alice logs in: {e}"));
    let insert_denied = || async {
        let error = alice
            .batch_execute("INSERT INTO t VALUES (2)")
            .await
            .expect_err("alice has no INSERT");
        assert_eq!(
            sqlstate(&error),
            ("42501".to_string(), T.to_string()),
            "{authenticator}"
        );
    };
    insert_denied().await;

    // NOLOGIN: the connected session keeps alice's privileges, no more, no less.
    admin
        .batch_execute("ALTER ROLE alice NOLOGIN")
        .await
        .unwrap();
    let count = alice.query_one("SELECT count(*) FROM t", &[]).await;
    assert_eq!(
        count.map(|row| row.get::<_, i64>(0)).ok(),
        Some(1),
        "{authenticator}: alice still reads t"
    );
    insert_denied().await;
    let error = alice
        .batch_execute("CREATE ROLE eve")
        .await
        .expect_err("alice is no superuser");
    assert_eq!(sqlstate(&error).0, "42501", "{authenticator}");
    let error = connect(floe, "alice", ALICE_PASSWORD)
        .await
        .err()
        .unwrap_or_else(|| panic!("{authenticator}: a NOLOGIN role logged in"));
    let expected = match authenticator {
        "none" => (
            "28000".to_string(),
            "role \"alice\" is not permitted to log in".to_string(),
        ),
        _ => (
            "28P01".to_string(),
            "password authentication failed for user \"alice\"".to_string(),
        ),
    };
    assert_eq!(sqlstate(&error), expected, "{authenticator}");

    // Dropped: every statement of alice's session fails, even after a new role
    // takes her name.
    let alice_id = rows(&admin, "SELECT id FROM mz_roles WHERE name = 'alice'").await[0][0]
        .clone()
        .unwrap();
    admin.batch_execute("DROP ROLE alice").await.unwrap();
    let dropped = (
        "42704".to_string(),
        format!("role {alice_id} was concurrently dropped"),
    );
    for sql in [
        "SELECT count(*) FROM t",
        "INSERT INTO t VALUES (3)",
        "CREATE ROLE eve",
        "SELECT 1",
    ] {
        let error = alice.simple_query(sql).await.expect_err(sql);
        assert_eq!(sqlstate(&error), dropped, "{authenticator}: {sql}");
        assert_eq!(
            error.as_db_error().unwrap().detail(),
            Some("Please disconnect and re-connect with a valid role."),
        );
    }
    execute_each(
        &admin,
        &format!("CREATE ROLE alice LOGIN PASSWORD '{ALICE_PASSWORD}'")
            .replace("alice's", "alice''s"),
    )
    .await
    .unwrap();
    let error = alice
        .simple_query("SELECT count(*) FROM t")
        .await
        .expect_err("the old session is not the new alice");
    assert_eq!(sqlstate(&error), dropped, "{authenticator}");
    let new_alice = connect(floe, "alice", ALICE_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("{authenticator}: the new alice logs in: {e}"));
    let error = new_alice
        .batch_execute("SELECT count(*) FROM t")
        .await
        .expect_err("the new alice has no grant");
    assert_eq!(
        sqlstate(&error),
        ("42501".to_string(), T.to_string()),
        "{authenticator}"
    );
    let count: i64 = rows(&admin, "SELECT count(*) FROM t").await[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(count, 1, "{authenticator}: nothing was inserted");

    // A superuser session may not drop its own role.
    let root = connect(floe, "root", ALICE_PASSWORD).await.unwrap();
    let error = root
        .batch_execute("DROP ROLE root")
        .await
        .expect_err("dropping the current role");
    assert_eq!(
        sqlstate(&error),
        (
            "55006".to_string(),
            "current role cannot be dropped".to_string()
        ),
        "{authenticator}"
    );
}

/// Queries one boolean (or NULL) as `client`.
async fn ask(client: &tokio_postgres::Client, sql: &str) -> Option<bool> {
    client
        .query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {:?}", e.as_db_error()))
        .get(0)
}

/// The privilege functions tools call answer what the statement checks enforce,
/// for the session's role and for a role named or given by OID; unknown names
/// and privileges are errors, unknown OIDs NULL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privilege_functions_answer_as_the_checks_do() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let admin = floe.connect().await;
    execute_each(
        &admin,
        "CREATE TABLE t (a int);
         CREATE SECRET s AS 'x';
         CREATE CONNECTION local TO ICEBERG CATALOG (CATALOG TYPE = 'local');
         CREATE SCHEMA sales;
         CREATE ROLE alice LOGIN;
         CREATE ROLE readers;
         GRANT readers TO alice;
         GRANT SELECT ON t TO readers;
         GRANT USAGE ON SECRET s TO alice",
    )
    .await
    .unwrap();
    let alice = connect_as(&floe, "alice").await;
    // The session's own role, checked against what it may do.
    for (sql, expected) in [
        ("SELECT has_table_privilege('t', 'SELECT')", true),
        ("SELECT has_table_privilege('public.t', 'select')", true),
        ("SELECT has_table_privilege('t', 'INSERT')", false),
        ("SELECT has_table_privilege('t', 'INSERT, SELECT')", true),
        (
            "SELECT has_table_privilege('t', 'SELECT WITH GRANT OPTION')",
            false,
        ),
        ("SELECT has_table_privilege('mz_tables', 'SELECT')", true),
        ("SELECT has_table_privilege('mz_tables', 'INSERT')", false),
        ("SELECT has_any_column_privilege('t', 'SELECT')", true),
        ("SELECT has_column_privilege('t', 'a', 'UPDATE')", false),
        ("SELECT has_schema_privilege('public', 'USAGE')", true),
        ("SELECT has_schema_privilege('public', 'CREATE')", false),
        ("SELECT has_schema_privilege('sales', 'USAGE')", false),
        ("SELECT has_schema_privilege('pg_catalog', 'USAGE')", true),
        (
            "SELECT has_database_privilege('materialize', 'CONNECT')",
            true,
        ),
        (
            "SELECT has_database_privilege('materialize', 'CREATE')",
            false,
        ),
        ("SELECT has_cluster_privilege('quickstart', 'USAGE')", true),
        (
            "SELECT has_cluster_privilege('quickstart', 'CREATE')",
            false,
        ),
        ("SELECT has_secret_privilege('s', 'USAGE')", true),
        ("SELECT has_connection_privilege('local', 'USAGE')", false),
        ("SELECT pg_has_role('readers', 'MEMBER')", true),
        ("SELECT pg_has_role('materialize', 'USAGE')", false),
    ] {
        assert_eq!(ask(&alice, sql).await, Some(expected), "alice: {sql}");
    }
    let error = alice
        .batch_execute("INSERT INTO t VALUES (1)")
        .await
        .expect_err("no INSERT, as has_table_privilege said");
    assert_eq!(sqlstate(&error).0, "42501");

    // Another role named, by name and by OID; PUBLIC; the superuser.
    for (sql, expected) in [
        (
            "SELECT has_table_privilege('alice', 't', 'SELECT')",
            Some(true),
        ),
        (
            "SELECT has_table_privilege('readers', 'public.t', 'SELECT')",
            Some(true),
        ),
        (
            "SELECT has_table_privilege('public', 't', 'SELECT')",
            Some(false),
        ),
        (
            "SELECT has_schema_privilege('public', 'public', 'USAGE')",
            Some(true),
        ),
        (
            "SELECT has_table_privilege((SELECT oid FROM pg_roles WHERE rolname = 'alice'), 't', 'DELETE')",
            Some(false),
        ),
        (
            "SELECT has_table_privilege('alice', (SELECT oid FROM pg_class WHERE relname = 't'), 'SELECT')",
            Some(true),
        ),
        (
            "SELECT has_schema_privilege('alice', (SELECT oid FROM pg_namespace WHERE nspname = 'sales'), 'CREATE')",
            Some(false),
        ),
        ("SELECT has_table_privilege('t', 'TRUNCATE')", Some(true)),
        ("SELECT has_table_privilege('alice', 99999, 'SELECT')", None),
        (
            "SELECT pg_has_role('alice', 'readers', 'USAGE')",
            Some(true),
        ),
        (
            "SELECT pg_has_role('readers', 'alice', 'MEMBER')",
            Some(false),
        ),
        (
            "SELECT has_schema_privilege('alice', 'sales', 'CREATE')",
            Some(false),
        ),
    ] {
        assert_eq!(ask(&admin, sql).await, expected, "admin: {sql}");
    }
    admin
        .batch_execute("GRANT CREATE ON SCHEMA sales TO readers")
        .await
        .unwrap();
    assert_eq!(
        ask(
            &admin,
            "SELECT has_schema_privilege('alice', 'sales', 'CREATE')"
        )
        .await,
        Some(true)
    );

    // Owners and ACLs in pg_class, pg_namespace and pg_database, roles by name.
    execute_each(
        &admin,
        "ALTER SCHEMA sales OWNER TO alice;
         ALTER TABLE t OWNER TO alice",
    )
    .await
    .unwrap();
    // (One catalog at a time: a join of two ACL columns trips the engine.)
    let table = rows(
        &admin,
        "SELECT pg_get_userbyid(relowner), array_to_string(relacl, ' ') FROM pg_class WHERE relname = 't'",
    )
    .await;
    let schema = rows(
        &admin,
        "SELECT pg_get_userbyid(nspowner), array_to_string(nspacl, ' ') FROM pg_namespace WHERE nspname = 'sales'",
    )
    .await;
    assert_eq!(
        [table, schema].concat(),
        vec![
            vec![
                Some("alice".to_string()),
                Some("alice=arwd/alice readers=r/materialize".to_string()),
            ],
            vec![
                Some("alice".to_string()),
                Some("alice=UC/alice readers=C/materialize".to_string()),
            ],
        ]
    );
    let database = rows(
        &admin,
        "SELECT pg_get_userbyid(datdba), array_to_string(datacl, ' ') FROM pg_database",
    )
    .await;
    assert_eq!(
        database,
        vec![vec![
            Some("materialize".to_string()),
            Some("materialize=UC/materialize =U/materialize".to_string()),
        ]]
    );

    // Unknown names and privileges.
    for (sql, code, message) in [
        (
            "SELECT has_table_privilege('nope', 'SELECT')",
            "42704",
            "unknown catalog item 'nope'",
        ),
        (
            "SELECT has_table_privilege('nobody', 't', 'SELECT')",
            "42704",
            "unknown role 'nobody'",
        ),
        (
            "SELECT has_table_privilege('t', 'FLY')",
            "22023",
            "unrecognized privilege type: \"fly\"",
        ),
        (
            "SELECT has_schema_privilege('nope', 'USAGE')",
            "3F000",
            "unknown schema 'nope'",
        ),
        (
            "SELECT has_cluster_privilege('nope', 'USAGE')",
            "42704",
            "unknown cluster 'nope'",
        ),
    ] {
        let error = alice.simple_query(sql).await.expect_err(sql);
        assert_eq!(
            sqlstate(&error),
            (code.to_string(), message.to_string()),
            "{sql}"
        );
    }
}
