use floe_sql::catalog::{ItemDefinition, PlanCatalog, QualifiedName};

use super::*;

#[test]
fn items_and_clusters_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, environment_id) = {
        let mut catalog = Catalog::open(dir.path(), None).unwrap();
        let secret = catalog
            .create_item(
                QualifiedName::public("s"),
                ItemDefinition::Secret,
                "CREATE SECRET s AS '********'".into(),
                &[("value".into(), "hunter2-very-secret".into())],
            )
            .unwrap();
        catalog
            .create_cluster("c", Some(("50cc".into(), 2)), vec![])
            .unwrap();
        (secret, catalog.environment_id().to_string())
    };
    let catalog = Catalog::open(dir.path(), None).unwrap();
    assert_eq!(catalog.environment_id(), environment_id);
    let item = catalog.state().item(secret).unwrap();
    assert_eq!(item.name, QualifiedName::public("s"));
    assert_eq!(
        catalog.secret(secret, "value").unwrap(),
        "hunter2-very-secret"
    );
    let cluster = catalog.state().cluster_by_name("c").unwrap();
    let replicas: Vec<_> = cluster.replicas.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(replicas, ["r1", "r2"]);
    assert!(catalog.state().cluster_by_name("quickstart").is_some());
}

#[test]
fn secret_values_are_not_stored_in_clear_text() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    catalog
        .create_item(
            QualifiedName::public("s"),
            ItemDefinition::Secret,
            "CREATE SECRET s AS '********'".into(),
            &[("value".into(), "plaintext-needle-1234".into())],
        )
        .unwrap();
    drop(catalog);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let needle = b"plaintext-needle-1234";
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "a catalog file holds the secret in clear text"
        );
    }
    let mode = std::fs::metadata(dir.path().join("secrets.key"))
        .unwrap()
        .permissions();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.mode() & 0o777, 0o600);
}

#[test]
fn a_ciphertext_cannot_be_read_as_another_secret() {
    let dir = tempfile::tempdir().unwrap();
    let key = SecretsKey::load_or_create(dir.path()).unwrap();
    let (nonce, ciphertext) = key.encrypt("u1.value", "x").unwrap();
    assert_eq!(key.decrypt("u1.value", &nonce, &ciphertext).unwrap(), "x");
    assert!(key.decrypt("u2.value", &nonce, &ciphertext).is_err());
}

#[test]
fn drops_remove_items_and_their_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let id = catalog
        .create_item(
            QualifiedName::public("s"),
            ItemDefinition::Secret,
            "x".into(),
            &[("value".into(), "v".into())],
        )
        .unwrap();
    catalog.drop_objects(&[id], &[], &[]).unwrap();
    assert!(catalog.state().item(id).is_none());
    assert!(catalog.secret(id, "value").is_err());
    // The name is free again, and ids are never reused.
    let again = catalog
        .create_item(
            QualifiedName::public("s"),
            ItemDefinition::Secret,
            "x".into(),
            &[],
        )
        .unwrap();
    assert_ne!(again, id);
    drop(catalog);
    let catalog = Catalog::open(dir.path(), None).unwrap();
    assert!(catalog.state().item(id).is_none());
    assert!(catalog.state().item(again).is_some());
}

#[test]
fn the_environment_id_cannot_change() {
    let dir = tempfile::tempdir().unwrap();
    Catalog::open(dir.path(), Some("11111111-1111-1111-1111-111111111111")).unwrap();
    let error =
        Catalog::open(dir.path(), Some("22222222-2222-2222-2222-222222222222")).unwrap_err();
    assert!(error.to_string().contains("cannot be changed"), "{error}");
}

#[test]
fn duplicate_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    catalog
        .create_item(
            QualifiedName::public("s"),
            ItemDefinition::Secret,
            "x".into(),
            &[],
        )
        .unwrap();
    let error = catalog
        .create_item(
            QualifiedName::public("s"),
            ItemDefinition::Secret,
            "x".into(),
            &[],
        )
        .unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
}

#[test]
fn managed_clusters_resize_their_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let id = catalog
        .create_cluster("c", Some(("25cc".into(), 1)), vec![])
        .unwrap();
    let r1 = catalog.state().cluster(id).unwrap().replicas[0].id;
    catalog.alter_cluster(id, "25cc", 0).unwrap();
    assert!(catalog.state().cluster(id).unwrap().replicas.is_empty());
    catalog.alter_cluster(id, "25cc", 2).unwrap();
    let cluster = catalog.state().cluster(id).unwrap();
    assert_eq!(cluster.replicas.len(), 2);
    assert!(
        cluster.replicas.iter().all(|r| r.id != r1),
        "replicas restart with new ids"
    );
}

#[test]
fn sink_status_history_keeps_the_newest_changes_per_sink() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let event = |sink: u64, n: usize| SinkStatusEvent {
        occurred_at: n as u64,
        sink_id: GlobalId::User(sink),
        status: if n % 2 == 0 { "running" } else { "stalled" }.into(),
        error: Some(format!("cause {n}")),
        details: None,
        replica_id: None,
    };
    let flapping = SINK_STATUS_HISTORY_PER_SINK + 25;
    for n in 0..flapping {
        catalog.record_sink_status(&event(1, n)).unwrap();
    }
    catalog.record_sink_status(&event(2, 0)).unwrap();
    let history = catalog.sink_status_history().unwrap();
    let first: Vec<&SinkStatusEvent> = history
        .iter()
        .filter(|e| e.sink_id == GlobalId::User(1))
        .collect();
    assert_eq!(first.len(), SINK_STATUS_HISTORY_PER_SINK);
    // The oldest were forgotten, the newest kept in order.
    assert_eq!(first[0].occurred_at, 25);
    assert_eq!(first.last().unwrap().occurred_at, (flapping - 1) as u64);
    // Another sink's history is its own.
    assert_eq!(
        history
            .iter()
            .filter(|e| e.sink_id == GlobalId::User(2))
            .count(),
        1
    );
}

/// A copy of the data directory floe 0.1.0 wrote (the server's upgrade fixture).
fn previous_release_data_dir() -> tempfile::TempDir {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../server/tests/fixtures/data-dir-0.1.0/data");
    let dir = tempfile::tempdir().unwrap();
    for file in ["catalog.db", "secrets.key"] {
        std::fs::copy(fixture.join(file), dir.path().join(file)).unwrap();
    }
    dir
}

#[test]
fn the_previous_release_s_secrets_decrypt_after_the_upgrade() {
    let dir = previous_release_data_dir();
    let catalog = Catalog::open(dir.path(), None).unwrap();
    let id = |name: &str| {
        catalog
            .state()
            .item_by_name(&QualifiedName::public(name))
            .unwrap_or_else(|| panic!("{name} is in the catalog"))
            .id
    };
    let expected = [
        (
            "oauth_credential",
            "value",
            "fixture-client:fixture-secret-v2",
        ),
        ("aws_key_id", "value", "AKIAFIXTUREKEYID"),
        ("aws_secret_key", "value", "fixture-aws-secret-access-key"),
        ("aws_keys", "session_token", "fixture-inline-session-token"),
        (
            "rest_inline",
            "credential",
            "inline-client:fixture-inline-secret",
        ),
    ];
    for (name, slot, value) in expected {
        assert_eq!(
            catalog.secret(id(name), slot).unwrap(),
            value,
            "{name}.{slot}"
        );
    }
    assert_eq!(
        catalog.environment_id(),
        "00000000-0000-4000-8000-000000000000"
    );
}
