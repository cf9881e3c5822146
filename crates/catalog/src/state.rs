//! The in-memory mirror of the durable catalog, which planning reads and
//! transactions diff.

use std::collections::BTreeMap;

use floe_repr::{ClusterId, GlobalId, RoleId};
use floe_sql::catalog::{CatalogItem, Cluster, PlanCatalog, QualifiedName, SYSTEM_SCHEMAS, Schema};
use floe_sql::privilege::{AclItem, ObjectRef};
use floe_sql::role::{Role, RoleMembership, SUPERUSER_ROLE_ID};

/// Items and clusters as committed. A transaction changes a copy and swaps it
/// in after SQLite committed, so readers never see half a DDL.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogState {
    pub(crate) items: BTreeMap<GlobalId, CatalogItem>,
    pub(crate) by_name: BTreeMap<QualifiedName, GlobalId>,
    pub(crate) clusters: BTreeMap<ClusterId, Cluster>,
    /// Schemas users created, by name (`public` always exists and is not here).
    pub(crate) schemas: BTreeMap<String, Schema>,
    /// `COMMENT ON` texts by object and column position (1-based; `None` for
    /// the object itself).
    pub(crate) comments: BTreeMap<(GlobalId, Option<usize>), String>,
    /// `(schema, name)` of every builtin relation, for name resolution.
    system_relations: Vec<(String, String)>,
    pub(crate) roles: BTreeMap<RoleId, Role>,
    /// Sorted.
    pub(crate) role_memberships: Vec<RoleMembership>,
    /// Owners other than the superuser (an object without an entry is the
    /// superuser's).
    pub(crate) owners: BTreeMap<ObjectRef, RoleId>,
    /// Grants besides owners' privileges, sorted per object.
    pub(crate) grants: BTreeMap<ObjectRef, Vec<AclItem>>,
}

impl CatalogState {
    pub fn items(&self) -> impl Iterator<Item = &CatalogItem> {
        self.items.values()
    }

    pub fn clusters(&self) -> impl Iterator<Item = &Cluster> {
        self.clusters.values()
    }

    /// The schemas users created, by name.
    pub fn schemas(&self) -> impl Iterator<Item = &Schema> {
        self.schemas.values()
    }

    /// Every comment: object, column position (1-based, `None` for the
    /// object itself) and text.
    pub fn comments(&self) -> impl Iterator<Item = (GlobalId, Option<usize>, &str)> {
        self.comments
            .iter()
            .map(|((id, position), comment)| (*id, *position, comment.as_str()))
    }

    pub fn roles(&self) -> impl Iterator<Item = &Role> {
        self.roles.values()
    }

    /// A copy of who holds what (roles, memberships, owners, grants, schemas
    /// and clusters) without the items: enough to answer privilege questions
    /// away from the catalog lock (the privilege functions of queries).
    pub fn access_view(&self) -> CatalogState {
        CatalogState {
            roles: self.roles.clone(),
            role_memberships: self.role_memberships.clone(),
            owners: self.owners.clone(),
            grants: self.grants.clone(),
            schemas: self.schemas.clone(),
            clusters: self.clusters.clone(),
            ..CatalogState::default()
        }
    }

    /// Registers the builtin relations the query engine serves.
    pub fn set_system_relations(&mut self, relations: Vec<(String, String)>) {
        self.system_relations = relations;
    }

    pub(crate) fn insert_item(&mut self, item: CatalogItem) {
        self.by_name.insert(item.name.clone(), item.id);
        self.items.insert(item.id, item);
    }

    pub(crate) fn remove_item(&mut self, id: GlobalId) -> Option<CatalogItem> {
        let item = self.items.remove(&id)?;
        self.by_name.remove(&item.name);
        self.comments.retain(|(commented, _), _| *commented != id);
        Some(item)
    }

    /// The items (directly or through other items) that use `id`, e.g. the
    /// sinks of a secret through its connections.
    pub fn transitive_dependents(&self, id: GlobalId) -> Vec<GlobalId> {
        let mut found: Vec<GlobalId> = Vec::new();
        let mut pending = vec![id];
        while let Some(next) = pending.pop() {
            for dependent in self.dependents(next) {
                if dependent != id && !found.contains(&dependent) {
                    found.push(dependent);
                    pending.push(dependent);
                }
            }
        }
        found.sort();
        found
    }
}

impl PlanCatalog for CatalogState {
    fn item_by_name(&self, name: &QualifiedName) -> Option<&CatalogItem> {
        self.by_name.get(name).and_then(|id| self.items.get(id))
    }

    fn item(&self, id: GlobalId) -> Option<&CatalogItem> {
        self.items.get(&id)
    }

    fn dependents(&self, id: GlobalId) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.definition.uses().contains(&id))
            .map(|item| item.id)
            .collect()
    }

    fn cluster_by_name(&self, name: &str) -> Option<&Cluster> {
        self.clusters.values().find(|c| c.name == name)
    }

    fn cluster(&self, id: ClusterId) -> Option<&Cluster> {
        self.clusters.get(&id)
    }

    fn items_in_cluster(&self, id: ClusterId) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.definition.cluster() == Some(id))
            .map(|item| item.id)
            .collect()
    }

    fn user_schema(&self, name: &str) -> Option<&Schema> {
        self.schemas.get(name)
    }

    fn schemas_of_database(&self) -> Vec<String> {
        std::iter::once(floe_sql::catalog::PUBLIC_SCHEMA.to_string())
            .chain(self.schemas.keys().cloned())
            .collect()
    }

    fn items_in_schema(&self, schema: &str) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.name.schema == schema)
            .map(|item| item.id)
            .collect()
    }

    fn role_by_name(&self, name: &str) -> Option<&Role> {
        self.roles.values().find(|role| role.name == name)
    }

    fn role(&self, id: RoleId) -> Option<&Role> {
        self.roles.get(&id)
    }

    fn role_memberships(&self) -> &[RoleMembership] {
        &self.role_memberships
    }

    fn owner(&self, object: &ObjectRef) -> RoleId {
        self.owners
            .get(object)
            .copied()
            .unwrap_or(SUPERUSER_ROLE_ID)
    }

    fn grants(&self, object: &ObjectRef) -> &[AclItem] {
        self.grants.get(object).map(Vec::as_slice).unwrap_or(&[])
    }

    fn owned_by(&self, role: RoleId) -> Vec<String> {
        self.owners
            .iter()
            .filter(|(_, owner)| **owner == role)
            .map(|(object, _)| match object {
                ObjectRef::Item(id) => match self.items.get(id) {
                    Some(item) => format!("{} {}", item.definition.kind().human_name(), item.name),
                    None => object.to_string(),
                },
                ObjectRef::Cluster(id) => match self.clusters.get(id) {
                    Some(cluster) => format!("cluster {}", cluster.name),
                    None => object.to_string(),
                },
                ObjectRef::Schema(name) => format!("schema {name}"),
                ObjectRef::Database => "database materialize".to_string(),
            })
            .collect()
    }

    fn is_system_relation(&self, schema: &str, name: &str) -> bool {
        SYSTEM_SCHEMAS.contains(&schema)
            && self
                .system_relations
                .iter()
                .any(|(s, n)| s == schema && n == name)
    }
}
