//! Catalog operations: every DDL is a list of [`Op`]s that
//! [`Catalog::transact`] applies in one SQLite transaction, after checking them
//! against the catalog as it is at that moment (a plan made before a slow
//! purification may name objects dropped since), and answers with the
//! [`CatalogDiff`] between the state before and after. The adapter derives every
//! side effect (storage, read holds, generators, sinks, statuses, caches) from
//! that diff, and nothing else.
//!
//! Adding a kind of object: an `Op` variant if no existing one fits (items of a
//! new [`ItemDefinition`] variant need none: `CreateItem`, `UpdateItem` and
//! `DropItem` carry any definition), its arm in [`OpWriter::apply`], and, for
//! objects other than items and clusters, a [`CatalogChange`] variant filled in
//! by [`CatalogDiff::between`].

use std::collections::{BTreeSet, HashMap};

use floe_repr::{ClusterId, GlobalId, ReplicaId};
use floe_sql::PlanError;
use floe_sql::catalog::{
    CatalogItem, Cluster, DATABASE, ItemDefinition, ItemKind, PlanCatalog, QualifiedName, Replica,
    SYSTEM_SCHEMAS, Schema,
};
use rusqlite::{TransactionBehavior, params};

mod roles;

pub(crate) use roles::load_roles;
pub use roles::{RoleOp, Verifier};

use crate::secrets::SecretsKey;
use crate::state::CatalogState;
use crate::{Catalog, CatalogError, FIRST_USER_OID, allocate, durable, write_secret};

/// A secret value on its way to the encrypted store; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(pub String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("'********'")
    }
}

/// An item to create. Its id comes from [`Catalog::reserve_item_ids`], so that
/// items created together can name each other (a subsource its source).
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    pub id: GlobalId,
    pub name: QualifiedName,
    pub definition: ItemDefinition,
    pub create_sql: String,
    /// Secret values owned by the item, by slot (`value`, `credential`, ...).
    pub secrets: Vec<(String, SecretValue)>,
}

/// A cluster replica to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewReplica {
    pub name: String,
    pub size: String,
}

/// One change to the catalog.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    CreateItem(NewItem),
    /// A new definition and statement for an existing item (ALTER SINK).
    UpdateItem {
        id: GlobalId,
        definition: ItemDefinition,
        create_sql: String,
    },
    /// A new value for an existing item's secret slot (ALTER SECRET).
    WriteSecret {
        id: GlobalId,
        slot: String,
        value: SecretValue,
    },
    /// Drops an item with its secrets and sink progress.
    DropItem(GlobalId),
    /// A managed cluster (`Some((size, replication factor))`, replicas `r1..rN`)
    /// or an unmanaged one with `replicas`.
    CreateCluster {
        name: String,
        managed: Option<(String, u32)>,
        replicas: Vec<NewReplica>,
    },
    /// A managed cluster's new size or replication factor: its replicas become
    /// `r1..rN` of the size (those whose name and size stay are kept).
    AlterCluster {
        id: ClusterId,
        size: String,
        replication_factor: u32,
    },
    CreateReplica {
        cluster: ClusterId,
        replica: NewReplica,
    },
    DropReplica {
        cluster: ClusterId,
        replica: ReplicaId,
    },
    /// Drops a cluster and its replicas (its items are dropped by their own ops).
    DropCluster(ClusterId),
    /// `CREATE SCHEMA`: a schema of the `materialize` database.
    CreateSchema {
        name: String,
    },
    /// `DROP SCHEMA`: the schema must be empty once the transaction's other
    /// ops (its items' drops) are applied.
    DropSchema {
        name: String,
    },
    /// `COMMENT ON`: sets (`Some`) or removes (`None`) the comment of an item
    /// or of its column at `column` (1-based).
    Comment {
        id: GlobalId,
        column: Option<usize>,
        comment: Option<String>,
    },
    /// Roles, role membership, owners and grants.
    Role(RoleOp),
}

/// What a transaction changed. Start-up sees the diff from an empty catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogDiff {
    pub changes: Vec<CatalogChange>,
}

/// One entry of a [`CatalogDiff`].
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogChange {
    ItemAdded(CatalogItem),
    /// Boxed: an update carries two items.
    ItemUpdated {
        old: Box<CatalogItem>,
        new: Box<CatalogItem>,
    },
    ItemDropped(CatalogItem),
    /// A secret value of an item that existed before was written: invisible in
    /// the definitions, visible to whatever reads the secret (sinks).
    SecretRotated(GlobalId),
    ClusterAdded(Cluster),
    /// Size, replication factor or replicas changed.
    ClusterUpdated {
        old: Cluster,
        new: Cluster,
    },
    ClusterDropped(Cluster),
    SchemaAdded(Schema),
    SchemaDropped(Schema),
    /// Roles, memberships, owners or grants changed: what a sink's owner may do
    /// (and so whether the sink may run) may have changed.
    AccessChanged,
}

impl CatalogDiff {
    /// The changes from `old` to `new`: drops first, then additions, then
    /// updates, each in id order.
    pub fn between(old: &CatalogState, new: &CatalogState) -> CatalogDiff {
        let mut changes = Vec::new();
        for (id, item) in &old.items {
            if !new.items.contains_key(id) {
                changes.push(CatalogChange::ItemDropped(item.clone()));
            }
        }
        for (id, cluster) in &old.clusters {
            if !new.clusters.contains_key(id) {
                changes.push(CatalogChange::ClusterDropped(cluster.clone()));
            }
        }
        for (id, cluster) in &new.clusters {
            match old.clusters.get(id) {
                None => changes.push(CatalogChange::ClusterAdded(cluster.clone())),
                Some(before) if before != cluster => changes.push(CatalogChange::ClusterUpdated {
                    old: before.clone(),
                    new: cluster.clone(),
                }),
                Some(_) => {}
            }
        }
        for (name, schema) in &old.schemas {
            if !new.schemas.contains_key(name) {
                changes.push(CatalogChange::SchemaDropped(schema.clone()));
            }
        }
        for (name, schema) in &new.schemas {
            if !old.schemas.contains_key(name) {
                changes.push(CatalogChange::SchemaAdded(schema.clone()));
            }
        }
        for (id, item) in &new.items {
            match old.items.get(id) {
                None => changes.push(CatalogChange::ItemAdded(item.clone())),
                Some(before) if before != item => changes.push(CatalogChange::ItemUpdated {
                    old: Box::new(before.clone()),
                    new: Box::new(item.clone()),
                }),
                Some(_) => {}
            }
        }
        // Owners recorded for objects this transaction created or dropped change
        // nobody's access.
        let exists = |state: &CatalogState, object: &floe_sql::privilege::ObjectRef| match object {
            floe_sql::privilege::ObjectRef::Item(id) => state.items.contains_key(id),
            floe_sql::privilege::ObjectRef::Cluster(id) => state.clusters.contains_key(id),
            _ => true,
        };
        let owner_changed = old.owners.keys().chain(new.owners.keys()).any(|object| {
            exists(old, object)
                && exists(new, object)
                && old.owners.get(object) != new.owners.get(object)
        });
        if old.roles != new.roles
            || old.role_memberships != new.role_memberships
            || owner_changed
            || old.grants != new.grants
        {
            changes.push(CatalogChange::AccessChanged);
        }
        CatalogDiff { changes }
    }

    /// Every item and cluster of `state` as new: what start-up applies.
    pub fn from_empty(state: &CatalogState) -> CatalogDiff {
        let mut diff = CatalogDiff::between(&CatalogState::default(), state);
        // Starting a sink checks its owner's privileges already.
        diff.changes
            .retain(|change| *change != CatalogChange::AccessChanged);
        diff
    }
}

/// The names of objects dropped since the catalog was opened, so that a plan
/// that names one (made before the drop) fails naming it as the user wrote it.
#[derive(Debug, Default)]
pub(crate) struct Tombstones {
    items: HashMap<GlobalId, (ItemKind, QualifiedName)>,
    clusters: HashMap<ClusterId, String>,
}

impl Tombstones {
    fn record(&mut self, diff: &CatalogDiff) {
        for change in &diff.changes {
            match change {
                CatalogChange::ItemDropped(item) => {
                    self.items
                        .insert(item.id, (item.definition.kind(), item.name.clone()));
                }
                CatalogChange::ClusterDropped(cluster) => {
                    self.clusters.insert(cluster.id, cluster.name.clone());
                }
                _ => {}
            }
        }
    }

    /// How a missing item is named in an error: its last name, else its id.
    fn item_name(&self, old: &CatalogState, id: GlobalId) -> String {
        old.item(id)
            .map(|item| item.name.item.clone())
            .or_else(|| self.items.get(&id).map(|(_, name)| name.item.clone()))
            .unwrap_or_else(|| id.to_string())
    }

    fn cluster_name(&self, old: &CatalogState, id: ClusterId) -> String {
        old.cluster(id)
            .map(|cluster| cluster.name.clone())
            .or_else(|| self.clusters.get(&id).cloned())
            .unwrap_or_else(|| id.to_string())
    }
}

impl Catalog {
    /// The ids the next transaction's new items take, in order. They become
    /// durable with the transaction that creates the items, so a DDL that fails
    /// leaves no gap; reserve and transact under the same catalog lock.
    pub fn reserve_item_ids(&self, count: usize) -> Result<Vec<GlobalId>, CatalogError> {
        let next = next_item_id(&self.connection)?;
        Ok((0..count as u64)
            .map(|offset| GlobalId::User(next + offset))
            .collect())
    }

    /// Applies `ops` in one SQLite transaction: all of them or, on any error,
    /// none. Before committing, checks the net effect against the catalog as it
    /// is now: whatever a created or updated item uses exists, and nothing left
    /// uses a dropped item or runs on a dropped cluster. Returns the diff.
    pub fn transact(&mut self, ops: Vec<Op>) -> Result<CatalogDiff, CatalogError> {
        let mut next = self.state.clone();
        let mut rotated = BTreeSet::new();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let first_free_item_id = next_item_id(&transaction)?;
        let mut writer = OpWriter {
            transaction: &transaction,
            first_free_item_id,
            secrets_key: &self.secrets_key,
            tombstones: &self.tombstones,
            old: &self.state,
            state: &mut next,
            rotated: &mut rotated,
        };
        for op in ops {
            writer.apply(op)?;
        }
        validate(&self.state, &next, &self.tombstones)?;
        transaction.commit()?;
        let mut diff = CatalogDiff::between(&self.state, &next);
        diff.changes
            .extend(rotated.into_iter().map(CatalogChange::SecretRotated));
        self.tombstones.record(&diff);
        self.state = next;
        self.revision += 1;
        Ok(diff)
    }
}

/// Applies ops to the open transaction and to the next state.
struct OpWriter<'a> {
    transaction: &'a rusqlite::Transaction<'a>,
    secrets_key: &'a SecretsKey,
    tombstones: &'a Tombstones,
    /// The committed state, for names in errors and for telling rotations.
    old: &'a CatalogState,
    /// The item id allocator when the transaction began.
    first_free_item_id: u64,
    state: &'a mut CatalogState,
    rotated: &'a mut BTreeSet<GlobalId>,
}

impl OpWriter<'_> {
    fn apply(&mut self, op: Op) -> Result<(), CatalogError> {
        match op {
            Op::CreateItem(item) => self.create_item(item),
            Op::UpdateItem {
                id,
                definition,
                create_sql,
            } => self.update_item(id, definition, create_sql),
            Op::WriteSecret { id, slot, value } => {
                self.existing_item(id)?;
                write_secret(self.transaction, self.secrets_key, id, &slot, &value.0)?;
                if self.old.item(id).is_some() {
                    self.rotated.insert(id);
                }
                Ok(())
            }
            Op::DropItem(id) => self.drop_item(id),
            Op::CreateCluster {
                name,
                managed,
                replicas,
            } => self.create_cluster(name, managed, replicas),
            Op::AlterCluster {
                id,
                size,
                replication_factor,
            } => self.alter_cluster(id, size, replication_factor),
            Op::CreateReplica { cluster, replica } => {
                self.existing_cluster(cluster)?;
                let replica = self.insert_replica(cluster, replica)?;
                self.cluster_mut(cluster)?.replicas.push(replica);
                sort_replicas(self.cluster_mut(cluster)?);
                Ok(())
            }
            Op::DropReplica { cluster, replica } => {
                self.transaction.execute(
                    "DELETE FROM cluster_replicas WHERE id = ?1",
                    params![replica.to_string()],
                )?;
                if let Some(cluster) = self.state.clusters.get_mut(&cluster) {
                    cluster.replicas.retain(|r| r.id != replica);
                }
                Ok(())
            }
            Op::CreateSchema { name } => self.create_schema(name),
            Op::DropSchema { name } => {
                if self.state.schemas.remove(&name).is_none() {
                    return Err(CatalogError::Rejected(PlanError::unknown_schema(&name)));
                }
                self.transaction.execute(
                    "DELETE FROM schemas WHERE database_name = ?1 AND name = ?2",
                    params![DATABASE, name],
                )?;
                self.forget_access(floe_sql::privilege::ObjectRef::Schema(name))
            }
            Op::Comment {
                id,
                column,
                comment,
            } => self.comment(id, column, comment),
            Op::DropCluster(id) => {
                self.existing_cluster(id)?;
                for statement in [
                    "DELETE FROM cluster_replicas WHERE cluster_id = ?1",
                    "DELETE FROM clusters WHERE id = ?1",
                ] {
                    self.transaction
                        .execute(statement, params![id.to_string()])?;
                }
                self.state.clusters.remove(&id);
                self.forget_access(floe_sql::privilege::ObjectRef::Cluster(id))
            }
            Op::Role(op) => self.apply_role(op),
        }
    }

    fn existing_item(&self, id: GlobalId) -> Result<&CatalogItem, CatalogError> {
        self.state.item(id).ok_or_else(|| {
            CatalogError::Rejected(PlanError::unknown_item(
                self.tombstones.item_name(self.old, id),
            ))
        })
    }

    fn existing_cluster(&self, id: ClusterId) -> Result<&Cluster, CatalogError> {
        self.state.cluster(id).ok_or_else(|| {
            CatalogError::Rejected(PlanError::unknown_cluster(
                &self.tombstones.cluster_name(self.old, id),
            ))
        })
    }

    fn cluster_mut(&mut self, id: ClusterId) -> Result<&mut Cluster, CatalogError> {
        self.state
            .clusters
            .get_mut(&id)
            .ok_or_else(|| CatalogError::Rejected(PlanError::unknown_cluster(&id.to_string())))
    }

    fn create_item(&mut self, item: NewItem) -> Result<(), CatalogError> {
        if let Some(existing) = self.state.item_by_name(&item.name) {
            return Err(CatalogError::Rejected(PlanError::already_exists(
                existing.definition.kind().human_name(),
                &item.name,
            )));
        }
        // Ids are reserved from the allocator as it stood when the transaction
        // began; one below it was handed out before (ids are never reused).
        let number = match item.id {
            GlobalId::User(number) if number >= self.first_free_item_id => number,
            other => {
                return Err(CatalogError::internal(format!(
                    "item id {other} was not reserved for this transaction"
                )));
            }
        };
        if self.state.item(item.id).is_some() {
            return Err(CatalogError::internal(format!(
                "item id {} is reserved twice",
                item.id
            )));
        }
        self.transaction.execute(
            "UPDATE id_allocators SET next_id = max(next_id, ?1) WHERE name = 'item'",
            params![i64::try_from(number + 1).unwrap_or(i64::MAX)],
        )?;
        let oid = u32::try_from(allocate(self.transaction, "oid")?)
            .map_err(|_| CatalogError::Corrupt("object ids exhausted".into()))?
            .max(FIRST_USER_OID);
        self.transaction.execute(
            "INSERT INTO items (id, oid, database_name, schema_name, name, definition_format,
                 definition, create_sql)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                item.id.to_string(),
                oid,
                item.name.database,
                item.name.schema,
                item.name.item,
                durable::FORMAT,
                durable::encode_definition(&item.definition)?,
                item.create_sql
            ],
        )?;
        for (slot, value) in &item.secrets {
            write_secret(self.transaction, self.secrets_key, item.id, slot, &value.0)?;
        }
        self.state.insert_item(CatalogItem {
            id: item.id,
            oid,
            name: item.name,
            definition: item.definition,
            create_sql: item.create_sql,
        });
        Ok(())
    }

    fn update_item(
        &mut self,
        id: GlobalId,
        definition: ItemDefinition,
        create_sql: String,
    ) -> Result<(), CatalogError> {
        self.existing_item(id)?;
        self.transaction.execute(
            "UPDATE items SET definition_format = ?2, definition = ?3, create_sql = ?4 WHERE id = ?1",
            params![
                id.to_string(),
                durable::FORMAT,
                durable::encode_definition(&definition)?,
                create_sql
            ],
        )?;
        if let Some(item) = self.state.items.get_mut(&id) {
            item.definition = definition;
            item.create_sql = create_sql;
        }
        Ok(())
    }

    fn create_schema(&mut self, name: String) -> Result<(), CatalogError> {
        if self.state.schema_exists(&name) || SYSTEM_SCHEMAS.contains(&name.as_str()) {
            return Err(CatalogError::Rejected(PlanError::schema_already_exists(
                &name,
            )));
        }
        let id = allocate(self.transaction, "schema")?;
        let oid = u32::try_from(allocate(self.transaction, "oid")?)
            .map_err(|_| CatalogError::Corrupt("object ids exhausted".into()))?
            .max(FIRST_USER_OID);
        self.transaction.execute(
            "INSERT INTO schemas (id, oid, database_name, name) VALUES (?1, ?2, ?3, ?4)",
            params![id, oid, DATABASE, name],
        )?;
        self.state
            .schemas
            .insert(name.clone(), Schema { id, oid, name });
        Ok(())
    }

    fn comment(
        &mut self,
        id: GlobalId,
        column: Option<usize>,
        comment: Option<String>,
    ) -> Result<(), CatalogError> {
        self.existing_item(id)?;
        let position = column.unwrap_or(0);
        match comment {
            Some(comment) => {
                self.transaction.execute(
                    "INSERT INTO comments (object_id, column_position, comment) VALUES (?1, ?2, ?3)
                     ON CONFLICT (object_id, column_position) DO UPDATE SET comment = excluded.comment",
                    params![id.to_string(), position, comment],
                )?;
                self.state.comments.insert((id, column), comment);
            }
            None => {
                self.transaction.execute(
                    "DELETE FROM comments WHERE object_id = ?1 AND column_position = ?2",
                    params![id.to_string(), position],
                )?;
                self.state.comments.remove(&(id, column));
            }
        }
        Ok(())
    }

    fn drop_item(&mut self, id: GlobalId) -> Result<(), CatalogError> {
        self.existing_item(id)?;
        for statement in [
            "DELETE FROM items WHERE id = ?1",
            "DELETE FROM comments WHERE object_id = ?1",
            "DELETE FROM sink_progress WHERE sink_id = ?1",
            "DELETE FROM secrets WHERE owner_id = ?1",
        ] {
            self.transaction
                .execute(statement, params![id.to_string()])?;
        }
        self.state.remove_item(id);
        self.forget_access(floe_sql::privilege::ObjectRef::Item(id))
    }

    fn create_cluster(
        &mut self,
        name: String,
        managed: Option<(String, u32)>,
        replicas: Vec<NewReplica>,
    ) -> Result<(), CatalogError> {
        if self.state.cluster_by_name(&name).is_some() {
            return Err(CatalogError::Rejected(PlanError::cluster_already_exists(
                &name,
            )));
        }
        let id = ClusterId::User(allocate(self.transaction, "cluster")?);
        let replicas = match &managed {
            Some((size, factor)) => managed_replicas(size, *factor),
            None => replicas,
        };
        self.transaction.execute(
            "INSERT INTO clusters VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                id.to_string(),
                name,
                managed.is_some(),
                managed.as_ref().map(|(size, _)| size.clone()),
                managed.as_ref().map(|(_, factor)| *factor)
            ],
        )?;
        let mut cluster = Cluster {
            id,
            name,
            managed: managed.is_some(),
            size: managed.as_ref().map(|(size, _)| size.clone()),
            replication_factor: managed.as_ref().map(|(_, factor)| *factor),
            replicas: Vec::new(),
        };
        for replica in replicas {
            cluster.replicas.push(self.insert_replica(id, replica)?);
        }
        sort_replicas(&mut cluster);
        self.state.clusters.insert(id, cluster);
        Ok(())
    }

    fn alter_cluster(
        &mut self,
        id: ClusterId,
        size: String,
        replication_factor: u32,
    ) -> Result<(), CatalogError> {
        let existing = self.existing_cluster(id)?.replicas.clone();
        let wanted = managed_replicas(&size, replication_factor);
        self.transaction.execute(
            "UPDATE clusters SET size = ?2, replication_factor = ?3 WHERE id = ?1",
            params![id.to_string(), size, replication_factor],
        )?;
        let mut replicas = Vec::new();
        for replica in existing {
            if wanted
                .iter()
                .any(|w| w.name == replica.name && w.size == replica.size)
            {
                replicas.push(replica);
            } else {
                self.transaction.execute(
                    "DELETE FROM cluster_replicas WHERE id = ?1",
                    params![replica.id.to_string()],
                )?;
            }
        }
        for replica in wanted {
            if !replicas.iter().any(|r| r.name == replica.name) {
                replicas.push(self.insert_replica(id, replica)?);
            }
        }
        let cluster = self.cluster_mut(id)?;
        cluster.size = Some(size);
        cluster.replication_factor = Some(replication_factor);
        cluster.replicas = replicas;
        sort_replicas(cluster);
        Ok(())
    }

    fn insert_replica(
        &mut self,
        cluster: ClusterId,
        replica: NewReplica,
    ) -> Result<Replica, CatalogError> {
        let id = ReplicaId::User(allocate(self.transaction, "replica")?);
        self.transaction.execute(
            "INSERT INTO cluster_replicas VALUES (?1, ?2, ?3, ?4)",
            params![
                id.to_string(),
                cluster.to_string(),
                replica.name,
                replica.size
            ],
        )?;
        Ok(Replica {
            id,
            name: replica.name,
            size: replica.size,
        })
    }
}

/// The number of the next user item id.
fn next_item_id(connection: &rusqlite::Connection) -> Result<u64, CatalogError> {
    let next: i64 = connection.query_row(
        "SELECT next_id FROM id_allocators WHERE name = 'item'",
        [],
        |row| row.get(0),
    )?;
    u64::try_from(next)
        .map_err(|_| CatalogError::Corrupt("the item id allocator is negative".into()))
}

fn sort_replicas(cluster: &mut Cluster) {
    cluster.replicas.sort_by(|a, b| a.name.cmp(&b.name));
}

/// The replicas of a managed cluster: `r1..rN` of its size.
pub(crate) fn managed_replicas(size: &str, factor: u32) -> Vec<NewReplica> {
    (1..=factor)
        .map(|n| NewReplica {
            name: format!("r{n}"),
            size: size.to_string(),
        })
        .collect()
}

/// The checks of a transaction's net effect. Only what the transaction
/// touches is checked, so that one item left inconsistent by an older floe
/// blocks nothing (and can be dropped).
fn validate(
    old: &CatalogState,
    new: &CatalogState,
    tombstones: &Tombstones,
) -> Result<(), CatalogError> {
    for item in new.items() {
        if old.items.get(&item.id) == Some(item) {
            continue;
        }
        if let Some(missing) = item
            .definition
            .uses()
            .into_iter()
            .find(|used| new.item(*used).is_none())
        {
            return Err(CatalogError::Rejected(PlanError::unknown_item(
                tombstones.item_name(old, missing),
            )));
        }
        if !new.schema_exists(&item.name.schema) {
            return Err(CatalogError::Rejected(PlanError::unknown_schema(
                &item.name.schema,
            )));
        }
        if let Some(cluster) = item.definition.cluster()
            && new.cluster(cluster).is_none()
        {
            return Err(CatalogError::Rejected(PlanError::unknown_cluster(
                &tombstones.cluster_name(old, cluster),
            )));
        }
    }
    for dropped in old.items().filter(|i| new.item(i.id).is_none()) {
        if let Some(dependent) = new
            .dependents(dropped.id)
            .first()
            .and_then(|d| new.item(*d))
        {
            return Err(CatalogError::Rejected(PlanError::still_depended_upon(
                dropped.definition.kind().human_name(),
                &dropped.name.item,
                dependent.definition.kind().human_name(),
                &dependent.name.item,
            )));
        }
    }
    for dropped in old.schemas().filter(|s| new.user_schema(&s.name).is_none()) {
        if !new.items_in_schema(&dropped.name).is_empty() {
            return Err(CatalogError::Rejected(PlanError::schema_not_empty(
                &format!("{DATABASE}.{}", dropped.name),
            )));
        }
    }
    for dropped in old.clusters().filter(|c| new.cluster(c.id).is_none()) {
        if let Some(user) = new
            .items_in_cluster(dropped.id)
            .first()
            .and_then(|id| new.item(*id))
        {
            return Err(CatalogError::Rejected(PlanError::still_depended_upon(
                "cluster",
                &dropped.name,
                user.definition.kind().human_name(),
                &user.name.item,
            )));
        }
    }
    Ok(())
}
