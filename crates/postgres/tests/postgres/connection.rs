//! Connections: validation, authentication, TLS modes, slot removal.

use floe_postgres::{
    ErrorKind, PgConnectionConfig, SslMode, TableSelection, drop_replication_slot,
    validate_connection,
};
use floe_repr::SqlState;
use floe_testkit::{Postgres, TestCa, free_port, postgres_shared};

use crate::support::{Floe, Upstream, config_for, wait_until};

#[tokio::test]
async fn validation_accepts_a_replication_role_and_refuses_one_without_it() {
    let upstream = Upstream::new("validate").await;
    validate_connection(&upstream.config)
        .await
        .expect("superuser validates");
    let user = floe_testkit::unique_name("plain");
    upstream
        .execute(&format!("CREATE ROLE {user} LOGIN PASSWORD 'pw'"))
        .await;
    let mut config = upstream.config.clone();
    config.user = user.clone();
    config.password = Some("pw".into());
    let error = validate_connection(&config).await.unwrap_err();
    assert_eq!(
        error.message,
        format!("role \"{user}\" does not have the REPLICATION attribute")
    );
    assert_eq!(error.code, SqlState::INSUFFICIENT_PRIVILEGE);
    assert!(error.hint.unwrap().contains("WITH REPLICATION"));
    upstream
        .execute(&format!("ALTER ROLE {user} WITH REPLICATION"))
        .await;
    validate_connection(&config)
        .await
        .expect("a REPLICATION role validates");
}

#[tokio::test]
async fn validation_refuses_a_server_without_logical_replication() {
    let pg = Postgres::builder().setting("wal_level", "replica").start();
    let config = config_for(&pg, "postgres");
    let error = validate_connection(&config).await.unwrap_err();
    assert_eq!(
        error.message,
        "logical replication is not enabled on the server: wal_level is replica"
    );
    assert_eq!(error.kind, ErrorKind::WalLevel);
    assert!(error.hint.unwrap().contains("wal_level = logical"));
}

#[tokio::test]
async fn wrong_passwords_and_unreachable_servers_are_clear_errors_without_secrets() {
    let pg = postgres_shared();
    let mut config = config_for(pg, "postgres");
    config.password = Some("not-the-password".into());
    let error = validate_connection(&config).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Authentication, "{error:?}");
    assert_eq!(error.code, SqlState::INVALID_PASSWORD);
    assert!(!format!("{error:?}").contains("not-the-password"));
    assert!(!format!("{config:?}").contains("not-the-password"));
    let mut unreachable = config_for(pg, "postgres");
    unreachable.port = free_port();
    let error = validate_connection(&unreachable).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Connection, "{error:?}");
    assert!(error.retryable);
    let mut missing = config_for(pg, "no_such_database");
    missing.database = "no_such_database".into();
    let error = validate_connection(&missing).await.unwrap_err();
    assert!(error.message.contains("no_such_database"), "{error:?}");
}

fn tls_config(pg: &Postgres, host: &str, mode: SslMode, ca: Option<&TestCa>) -> PgConnectionConfig {
    let mut config = config_for(pg, "postgres");
    config.host = host.to_string();
    config.ssl_mode = mode;
    config.ssl_root_certificate =
        ca.map(|ca| std::fs::read_to_string(ca.ca_bundle_path()).expect("CA file"));
    config
}

#[tokio::test]
async fn ssl_modes_verify_what_libpq_verifies() {
    let ca = TestCa::generate();
    let other_ca = TestCa::generate();
    // 127.0.0.2 is loopback too, but not a name the server certificate holds.
    let pg = Postgres::builder()
        .tls(&ca)
        .setting("listen_addresses", "127.0.0.1,127.0.0.2")
        .start();
    let ok = |config: PgConnectionConfig| async move {
        validate_connection(&config)
            .await
            .unwrap_or_else(|e| panic!("{:?} to {} failed: {e:?}", config.ssl_mode, config.host))
    };
    ok(tls_config(&pg, "127.0.0.1", SslMode::Require, None)).await;
    ok(tls_config(
        &pg,
        "127.0.0.1",
        SslMode::Require,
        Some(&other_ca),
    ))
    .await;
    ok(tls_config(&pg, "127.0.0.1", SslMode::VerifyCa, Some(&ca))).await;
    ok(tls_config(&pg, "127.0.0.2", SslMode::VerifyCa, Some(&ca))).await;
    ok(tls_config(&pg, "127.0.0.1", SslMode::VerifyFull, Some(&ca))).await;
    ok(tls_config(&pg, "localhost", SslMode::VerifyFull, Some(&ca))).await;
    for (host, mode, trusted) in [
        ("127.0.0.1", SslMode::VerifyCa, &other_ca),
        ("127.0.0.1", SslMode::VerifyFull, &other_ca),
        ("127.0.0.2", SslMode::VerifyFull, &ca),
    ] {
        let error = validate_connection(&tls_config(&pg, host, mode, Some(trusted)))
            .await
            .expect_err("the certificate must be refused");
        assert_eq!(
            error.kind,
            ErrorKind::Connection,
            "{mode:?} {host}: {error:?}"
        );
        assert!(
            error.message.to_lowercase().contains("certificate"),
            "{mode:?} {host}: {}",
            error.message
        );
    }
    let mut garbage = tls_config(&pg, "127.0.0.1", SslMode::VerifyCa, None);
    garbage.ssl_root_certificate = Some("not a certificate".into());
    let error = validate_connection(&garbage).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidConfig);
    assert_eq!(
        error.message,
        "invalid SSL CERTIFICATE AUTHORITY: expected certificates in PEM format"
    );
}

#[tokio::test]
async fn a_source_replicates_over_tls() {
    let ca = TestCa::generate();
    let pg = Postgres::builder().tls(&ca).start();
    let mut upstream = Upstream::on(&pg, "tls").await;
    upstream.config.ssl_mode = SslMode::VerifyFull;
    upstream.config.ssl_root_certificate =
        Some(std::fs::read_to_string(ca.ca_bundle_path()).unwrap());
    upstream
        .execute(
            "CREATE TABLE t (id int PRIMARY KEY, v text);
             ALTER TABLE t REPLICA IDENTITY FULL;
             INSERT INTO t VALUES (1, 'a');
             CREATE PUBLICATION p FOR ALL TABLES;",
        )
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let _source = floe.spawn();
    let t = floe.id("t");
    floe.wait_equal(&upstream, t, "SELECT id, v FROM t").await;
    upstream
        .execute("INSERT INTO t VALUES (2, 'b'); UPDATE t SET v = 'c' WHERE id = 1")
        .await;
    floe.wait_equal(&upstream, t, "SELECT id, v FROM t").await;
    // Both connections of the source (queries and replication) use TLS.
    let plain: i64 = upstream
        .client
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name LIKE 'floe%' AND NOT s.ssl",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(plain, 0);
}

#[tokio::test]
async fn dropping_the_slot_removes_it_even_while_read_and_tolerates_a_missing_one() {
    let upstream = Upstream::new("dropslot").await;
    upstream
        .execute(
            "CREATE TABLE t (id int); ALTER TABLE t REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR TABLE t;",
        )
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let source = floe.spawn();
    let slot = floe.spec.slot_name.clone();
    wait_until(std::time::Duration::from_secs(60), || {
        floe.progress()
            .map(|_| ())
            .ok_or_else(|| "no snapshot yet".to_string())
    })
    .await;
    assert!(upstream.confirmed_flush(&slot).await.is_some());
    // The source's reader may still hold the slot: it is ended first.
    drop(source);
    drop_replication_slot(&upstream.config, &slot)
        .await
        .unwrap();
    assert_eq!(upstream.confirmed_flush(&slot).await, None);
    drop_replication_slot(&upstream.config, &slot)
        .await
        .expect("a missing slot is not an error");
    let mut unreachable = upstream.config.clone();
    unreachable.port = free_port();
    let error = drop_replication_slot(&unreachable, &slot)
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Connection);
    assert!(error.hint.unwrap().contains(&slot));
}
