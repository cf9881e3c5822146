use floe_sql::catalog::{ItemDefinition, PlanCatalog, QualifiedName};

use super::*;

/// Creates an item as a DDL does: one reserved id, one transaction.
fn create_item(
    catalog: &mut Catalog,
    name: QualifiedName,
    definition: ItemDefinition,
    create_sql: String,
    secrets: &[(String, String)],
) -> Result<GlobalId, CatalogError> {
    let id = catalog.reserve_item_ids(1)?[0];
    catalog.transact(vec![Op::CreateItem(NewItem {
        id,
        name,
        definition,
        create_sql,
        secrets: secrets
            .iter()
            .map(|(slot, value)| (slot.clone(), SecretValue(value.clone())))
            .collect(),
    })])?;
    Ok(id)
}

fn create_cluster(
    catalog: &mut Catalog,
    name: &str,
    managed: Option<(String, u32)>,
    replicas: Vec<NewReplica>,
) -> Result<ClusterId, CatalogError> {
    catalog.transact(vec![Op::CreateCluster {
        name: name.to_string(),
        managed,
        replicas,
    }])?;
    Ok(catalog.state().cluster_by_name(name).map(|c| c.id).unwrap())
}

fn alter_cluster(
    catalog: &mut Catalog,
    id: ClusterId,
    size: &str,
    replication_factor: u32,
) -> Result<CatalogDiff, CatalogError> {
    catalog.transact(vec![Op::AlterCluster {
        id,
        size: size.to_string(),
        replication_factor,
    }])
}

fn drop_items(catalog: &mut Catalog, ids: &[GlobalId]) -> Result<CatalogDiff, CatalogError> {
    catalog.transact(ids.iter().map(|id| Op::DropItem(*id)).collect())
}

#[test]
fn items_and_clusters_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, environment_id) = {
        let mut catalog = Catalog::open(dir.path(), None).unwrap();
        let secret = create_item(
            &mut catalog,
            QualifiedName::public("s"),
            ItemDefinition::Secret,
            "CREATE SECRET s AS '********'".into(),
            &[("value".into(), "hunter2-very-secret".into())],
        )
        .unwrap();
        create_cluster(&mut catalog, "c", Some(("50cc".into(), 2)), vec![]).unwrap();
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
    create_item(
        &mut catalog,
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
    let id = create_item(
        &mut catalog,
        QualifiedName::public("s"),
        ItemDefinition::Secret,
        "x".into(),
        &[("value".into(), "v".into())],
    )
    .unwrap();
    drop_items(&mut catalog, &[id]).unwrap();
    assert!(catalog.state().item(id).is_none());
    assert!(catalog.secret(id, "value").is_err());
    // The name is free again, and ids are never reused.
    let again = create_item(
        &mut catalog,
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
    create_item(
        &mut catalog,
        QualifiedName::public("s"),
        ItemDefinition::Secret,
        "x".into(),
        &[],
    )
    .unwrap();
    let error = create_item(
        &mut catalog,
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
    let id = create_cluster(&mut catalog, "c", Some(("25cc".into(), 1)), vec![]).unwrap();
    let r1 = catalog.state().cluster(id).unwrap().replicas[0].id;
    alter_cluster(&mut catalog, id, "25cc", 0).unwrap();
    assert!(catalog.state().cluster(id).unwrap().replicas.is_empty());
    alter_cluster(&mut catalog, id, "25cc", 2).unwrap();
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
        status: if n.is_multiple_of(2) {
            ObjectStatus::Running
        } else {
            ObjectStatus::Stalled
        },
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

#[test]
fn a_status_change_the_latest_status_does_not_allow_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let event = |status| SinkStatusEvent {
        occurred_at: 1,
        sink_id: GlobalId::User(1),
        status,
        error: None,
        details: None,
        replica_id: None,
    };
    for status in [
        ObjectStatus::Created,
        ObjectStatus::Starting,
        ObjectStatus::Running,
        ObjectStatus::Stalled,
        ObjectStatus::Paused,
        ObjectStatus::Running,
    ] {
        catalog.record_sink_status(&event(status)).unwrap();
    }
    let error = catalog
        .record_sink_status(&event(ObjectStatus::Created))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "internal catalog error: sink u1 cannot go from running to created"
    );
    catalog
        .record_sink_status(&event(ObjectStatus::Dropped))
        .unwrap();
    let error = catalog
        .record_sink_status(&event(ObjectStatus::Running))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "internal catalog error: sink u1 cannot go from dropped to running"
    );
    let statuses: Vec<&str> = catalog
        .sink_status_history()
        .unwrap()
        .iter()
        .map(|e| e.status.as_str())
        .collect();
    assert_eq!(
        statuses,
        [
            "created", "starting", "running", "stalled", "paused", "running", "dropped"
        ]
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

#[test]
fn definitions_are_stored_with_their_format() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let id = create_item(
        &mut catalog,
        QualifiedName::public("s"),
        ItemDefinition::Secret,
        "x".into(),
        &[],
    )
    .unwrap();
    let format: u32 = catalog
        .connection
        .query_row(
            "SELECT definition_format FROM items WHERE id = ?1",
            params![id.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(format, durable::FORMAT);
    // A format this floe does not read is refused with the way out, never misread.
    catalog
        .connection
        .execute("UPDATE items SET definition_format = 2", [])
        .unwrap();
    drop(catalog);
    let error = Catalog::open(dir.path(), None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "catalog is corrupt: the definition of u1 is in format 2, which this floe does not read (it reads format 1); use a newer floe"
    );
}

// ---------------------------------------------------------------------------
// Transactions of ops

use floe_repr::{ColumnType, RelationDesc, SqlScalarType, SqlState};
use floe_sql::catalog::{
    ConnectionDefinition, DeleteMode, IcebergCatalogConnection, IcebergCatalogType, SinkDefinition,
    SinkEnvelope, TableDefinition,
};

fn table() -> ItemDefinition {
    ItemDefinition::Table(TableDefinition {
        desc: RelationDesc {
            columns: vec![(
                "id".into(),
                ColumnType {
                    scalar_type: SqlScalarType::Int32,
                    nullable: false,
                },
            )],
            unique_keys: vec![vec![0]],
        },
        defaults: vec![None],
        version: 0,
        types: vec![],
    })
}

fn local_connection() -> ItemDefinition {
    ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(
        IcebergCatalogConnection {
            catalog_type: IcebergCatalogType::Local,
            url: None,
            warehouse: None,
            credential: None,
            scope: None,
            oauth2_server_url: None,
            vended_credentials: false,
            aws_connection: None,
        },
    ))
}

fn sink(catalog: &Catalog, from: GlobalId, connection: GlobalId) -> ItemDefinition {
    ItemDefinition::Sink(SinkDefinition {
        from,
        connection,
        cluster: catalog.state().cluster_by_name("quickstart").unwrap().id,
        namespace: "ns".into(),
        table: "t".into(),
        envelope: SinkEnvelope::Append,
        key: None,
        key_not_enforced: false,
        commit_interval_ms: 1_000,
        version: 0,
        takes_over: None,
        from_version: 0,
        delete_mode: DeleteMode::Equality,
        snapshot_retention: None,
        target_file_size: None,
        partition_by: None,
    })
}

/// A table `t`, a connection `c` and a sink `s` from `t` into `c`.
fn table_connection_sink(catalog: &mut Catalog) -> (GlobalId, GlobalId, GlobalId) {
    let t = create_item(
        catalog,
        QualifiedName::public("t"),
        table(),
        "t".into(),
        &[],
    )
    .unwrap();
    let c = create_item(
        catalog,
        QualifiedName::public("c"),
        local_connection(),
        "c".into(),
        &[],
    )
    .unwrap();
    let definition = sink(catalog, t, c);
    let s = create_item(
        catalog,
        QualifiedName::public("s"),
        definition,
        "s".into(),
        &[],
    )
    .unwrap();
    (t, c, s)
}

fn rejected(error: CatalogError) -> PlanError {
    match error {
        CatalogError::Rejected(error) => error,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn a_transaction_applies_all_its_ops_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    create_item(
        &mut catalog,
        QualifiedName::public("taken"),
        ItemDefinition::Secret,
        "x".into(),
        &[],
    )
    .unwrap();
    let before = catalog.state().clone();
    let ids = catalog.reserve_item_ids(2).unwrap();
    let new_secret = |id: GlobalId, name: &str| {
        Op::CreateItem(NewItem {
            id,
            name: QualifiedName::public(name),
            definition: ItemDefinition::Secret,
            create_sql: "x".into(),
            secrets: vec![("value".into(), SecretValue("v".into()))],
        })
    };
    let error = catalog
        .transact(vec![
            new_secret(ids[0], "fresh"),
            new_secret(ids[1], "taken"),
        ])
        .unwrap_err();
    let error = rejected(error);
    assert_eq!(error.code, SqlState::DUPLICATE_OBJECT);
    assert_eq!(
        error.message,
        "secret \"materialize.public.taken\" already exists"
    );
    // Nothing of it is visible, in memory or on disk, and no id was used up.
    assert_eq!(catalog.state(), &before);
    assert_eq!(catalog.reserve_item_ids(2).unwrap(), ids);
    assert!(catalog.secret(ids[0], "value").is_err());
    drop(catalog);
    let catalog = Catalog::open(dir.path(), None).unwrap();
    assert!(
        catalog
            .state()
            .item_by_name(&QualifiedName::public("fresh"))
            .is_none()
    );
}

#[test]
fn an_item_whose_dependency_was_dropped_since_planning_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let t = create_item(
        &mut catalog,
        QualifiedName::public("t"),
        table(),
        "t".into(),
        &[],
    )
    .unwrap();
    let c = create_item(
        &mut catalog,
        QualifiedName::public("c"),
        local_connection(),
        "c".into(),
        &[],
    )
    .unwrap();
    // The sink was planned while `t` existed; `t` is dropped before it commits.
    let definition = sink(&catalog, t, c);
    drop_items(&mut catalog, &[t]).unwrap();
    let error = rejected(
        create_item(
            &mut catalog,
            QualifiedName::public("s"),
            definition,
            "s".into(),
            &[],
        )
        .unwrap_err(),
    );
    assert_eq!(error.code, SqlState::UNDEFINED_OBJECT);
    assert_eq!(error.message, "unknown catalog item 't'");
    assert!(
        catalog
            .state()
            .item_by_name(&QualifiedName::public("s"))
            .is_none()
    );
}

#[test]
fn a_drop_planned_before_a_dependent_was_created_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let (t, _, s) = table_connection_sink(&mut catalog);
    // `DROP TABLE t CASCADE` planned before `s` existed drops only `t`.
    let error = rejected(drop_items(&mut catalog, &[t]).unwrap_err());
    assert_eq!(error.code, SqlState::DEPENDENT_OBJECTS_STILL_EXIST);
    assert_eq!(
        error.message,
        "cannot drop table \"t\": still depended upon by sink \"s\""
    );
    assert!(catalog.state().item(t).is_some());
    // Dropping both, in any order, is fine.
    drop_items(&mut catalog, &[t, s]).unwrap();
    assert!(catalog.state().item(t).is_none() && catalog.state().item(s).is_none());
}

#[test]
fn a_cluster_cannot_be_dropped_from_under_its_sinks() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    table_connection_sink(&mut catalog);
    let quickstart = catalog.state().cluster_by_name("quickstart").unwrap().id;
    let error = rejected(
        catalog
            .transact(vec![Op::DropCluster(quickstart)])
            .unwrap_err(),
    );
    assert_eq!(
        error.message,
        "cannot drop cluster \"quickstart\": still depended upon by sink \"s\""
    );
}

#[test]
fn the_diff_lists_what_each_transaction_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    let secret = create_item(
        &mut catalog,
        QualifiedName::public("k"),
        ItemDefinition::Secret,
        "k".into(),
        &[("value".into(), "v1".into())],
    )
    .unwrap();
    let (t, _, s) = table_connection_sink(&mut catalog);

    let diff = catalog
        .transact(vec![Op::WriteSecret {
            id: secret,
            slot: "value".into(),
            value: SecretValue("v2".into()),
        }])
        .unwrap();
    assert_eq!(diff.changes, [CatalogChange::SecretRotated(secret)]);
    assert_eq!(catalog.secret(secret, "value").unwrap(), "v2");

    let old = catalog.state().item(s).unwrap().clone();
    let ItemDefinition::Sink(mut definition) = old.definition.clone() else {
        unreachable!()
    };
    definition.version += 1;
    let diff = catalog
        .transact(vec![Op::UpdateItem {
            id: s,
            definition: ItemDefinition::Sink(definition),
            create_sql: "s2".into(),
        }])
        .unwrap();
    let new = catalog.state().item(s).unwrap().clone();
    assert_eq!(
        diff.changes,
        [CatalogChange::ItemUpdated {
            old: Box::new(old),
            new: Box::new(new)
        }]
    );

    let quickstart = catalog
        .state()
        .cluster_by_name("quickstart")
        .unwrap()
        .clone();
    let diff = alter_cluster(&mut catalog, quickstart.id, "25cc", 0).unwrap();
    assert_eq!(
        diff.changes,
        [CatalogChange::ClusterUpdated {
            old: quickstart.clone(),
            new: catalog.state().cluster(quickstart.id).unwrap().clone()
        }]
    );

    let dropped: Vec<GlobalId> = drop_items(&mut catalog, &[s, t])
        .unwrap()
        .changes
        .iter()
        .map(|change| match change {
            CatalogChange::ItemDropped(item) => item.id,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(dropped, [t, s]);

    // Start-up sees every item and cluster as added.
    let from_empty = CatalogDiff::from_empty(catalog.state());
    assert_eq!(from_empty.changes.len(), 3, "{from_empty:?}");
    assert!(from_empty.changes.iter().all(|change| matches!(
        change,
        CatalogChange::ItemAdded(_) | CatalogChange::ClusterAdded(_)
    )));
}

#[test]
fn an_item_left_inconsistent_on_disk_blocks_nothing_and_can_be_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let s = {
        let mut catalog = Catalog::open(dir.path(), None).unwrap();
        let (t, _, s) = table_connection_sink(&mut catalog);
        // What the CREATE SINK vs DROP TABLE race of floe 0.1.0 left behind: a
        // sink whose relation is gone.
        catalog
            .connection
            .execute("DELETE FROM items WHERE id = ?1", params![t.to_string()])
            .unwrap();
        s
    };
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    assert!(catalog.state().item(s).is_some());
    create_item(
        &mut catalog,
        QualifiedName::public("other"),
        ItemDefinition::Secret,
        "x".into(),
        &[],
    )
    .unwrap();
    drop_items(&mut catalog, &[s]).unwrap();
    assert!(catalog.state().item(s).is_none());
}

#[test]
fn schemas_and_comments_survive_reopening_and_go_with_their_objects() {
    let dir = tempfile::tempdir().unwrap();
    let in_sales = |item: &str| QualifiedName {
        database: "materialize".into(),
        schema: "sales".into(),
        item: item.into(),
    };
    let secret = {
        let mut catalog = Catalog::open(dir.path(), None).unwrap();
        // No item may be created in a schema that does not exist.
        let refused = create_item(
            &mut catalog,
            in_sales("early"),
            ItemDefinition::Secret,
            String::new(),
            &[],
        )
        .unwrap_err();
        assert_eq!(refused.to_string(), "unknown schema 'sales'");
        let diff = catalog
            .transact(vec![Op::CreateSchema {
                name: "sales".into(),
            }])
            .unwrap();
        assert!(matches!(
            diff.changes.as_slice(),
            [CatalogChange::SchemaAdded(schema)] if schema.name == "sales" && schema.id == 4
        ));
        let taken = catalog
            .transact(vec![Op::CreateSchema {
                name: "sales".into(),
            }])
            .unwrap_err();
        assert_eq!(taken.to_string(), "schema 'sales' already exists");
        let secret = create_item(
            &mut catalog,
            in_sales("s"),
            ItemDefinition::Secret,
            String::new(),
            &[],
        )
        .unwrap();
        catalog
            .transact(vec![Op::Comment {
                id: secret,
                column: None,
                comment: Some("the key".into()),
            }])
            .unwrap();
        secret
    };
    let mut catalog = Catalog::open(dir.path(), None).unwrap();
    assert_eq!(
        catalog.state().user_schema("sales").map(|s| s.id_text()),
        Some("u4".to_string())
    );
    assert_eq!(
        catalog.state().comments().collect::<Vec<_>>(),
        vec![(secret, None, "the key")]
    );
    // A schema with objects left cannot go; with them, it can, and the
    // dropped object's comment goes too.
    let refused = catalog
        .transact(vec![Op::DropSchema {
            name: "sales".into(),
        }])
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "schema 'materialize.sales' cannot be dropped without CASCADE while it contains objects"
    );
    catalog
        .transact(vec![
            Op::DropItem(secret),
            Op::DropSchema {
                name: "sales".into(),
            },
        ])
        .unwrap();
    assert!(catalog.state().user_schema("sales").is_none());
    assert_eq!(catalog.state().comments().count(), 0);
    drop(catalog);
    let catalog = Catalog::open(dir.path(), None).unwrap();
    assert!(catalog.state().schemas().next().is_none());
    assert_eq!(catalog.state().comments().count(), 0);
}

/// A data directory at every older catalog version opens on today's: the
/// previous release's (version 3), those of builds in between, and one a build
/// with schemas but before roles wrote (version 6, with a schema of its own);
/// each gets the superuser as the owner of everything and PUBLIC's default
/// privileges.
#[test]
fn every_older_catalog_version_upgrades() {
    use floe_sql::privilege::{Grantee, ObjectRef};
    use floe_sql::role::SUPERUSER_ROLE_ID;
    for version in 3..=6 {
        let dir = previous_release_data_dir();
        {
            let mut connection = Connection::open(dir.path().join("catalog.db")).unwrap();
            let stored: usize = connection
                .query_row("PRAGMA user_version", [], |row| row.get(0))
                .unwrap();
            assert_eq!(stored, 3, "the fixture is the previous release's");
            let transaction = connection.transaction().unwrap();
            for migration in &MIGRATIONS[stored..version] {
                transaction.execute_batch(migration).unwrap();
            }
            if version == 6 {
                transaction
                    .execute(
                        "INSERT INTO schemas VALUES (4, 30000, 'materialize', 'sales')",
                        [],
                    )
                    .unwrap();
            }
            transaction
                .pragma_update(None, "user_version", version)
                .unwrap();
            transaction.commit().unwrap();
        }
        let catalog = Catalog::open(dir.path(), None).unwrap();
        let state = catalog.state();
        let superuser = state.role(SUPERUSER_ROLE_ID).expect("the superuser exists");
        assert_eq!(
            (superuser.name.as_str(), superuser.superuser),
            ("materialize", true)
        );
        assert_eq!(state.roles().count(), 1, "version {version}");
        assert_eq!(
            state.schema_exists("sales"),
            version == 6,
            "version {version}"
        );
        let table = state
            .item_by_name(&QualifiedName::public("orders"))
            .or_else(|| {
                state
                    .items()
                    .find(|item| item.definition.kind().name() == "table")
            })
            .expect("the fixture has a table");
        for object in [ObjectRef::Item(table.id), ObjectRef::Schema("sales".into())] {
            assert_eq!(state.owner(&object), SUPERUSER_ROLE_ID, "version {version}");
        }
        let public_grants = |object: ObjectRef| {
            state
                .grants(&object)
                .iter()
                .filter(|acl| acl.grantee == Grantee::Public)
                .flat_map(|acl| acl.privileges.clone())
                .map(|privilege| privilege.name())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            public_grants(ObjectRef::Database),
            ["USAGE"],
            "version {version}"
        );
        assert_eq!(
            public_grants(ObjectRef::Schema("public".into())),
            ["USAGE"],
            "version {version}"
        );
        let quickstart = state
            .cluster_by_name("quickstart")
            .expect("the default cluster");
        assert_eq!(
            public_grants(ObjectRef::Cluster(quickstart.id)),
            ["USAGE"],
            "version {version}"
        );
    }
}
