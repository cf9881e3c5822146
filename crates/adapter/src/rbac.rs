//! Who may run a plan: the session's role against the plan's requirements,
//! checked under the catalog lock right after planning (as Materialize's
//! `rbac` does), so a statement is refused before it has any effect.
//!
//! A session is bound to the role named by its user when it starts, by id
//! ([`session_role`]). With `--authenticator none` a user name that is no role
//! acts as the superuser, as every session did before roles existed (the server
//! is then open to whoever reaches the port anyway); with a password
//! authenticator only roles can log in. A role dropped while its sessions are
//! connected makes their statements fail ([`actor`]); a role that loses LOGIN
//! keeps its connected sessions, with its own privileges, as in PostgreSQL.
//!
//! A superuser may do anything. Another role holds a privilege on an object when
//! it owns the object, or the privilege was granted to it, to PUBLIC, or to a
//! role it is a member of (every role inherits). Role DDL and new clusters take
//! a superuser (Materialize's CREATEROLE and CREATECLUSTER system privileges,
//! which floe does not grant separately).

use floe_catalog::CatalogState;
use floe_repr::{GlobalId, RoleId, SqlState};
use floe_sql::catalog::{ItemDefinition, PlanCatalog, QualifiedName};
use floe_sql::privilege::{Grantee, ObjectKind, ObjectRef, PrivilegePlan};
use floe_sql::role::{RolePlan, SUPERUSER_ROLE_ID, is_member};
use floe_sql::{Plan, PlanError};
use floe_sql_parser::ast::Privilege;

/// The role a session acts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Superuser(RoleId),
    Role(RoleId),
}

impl Actor {
    pub fn role_id(self) -> RoleId {
        match self {
            Actor::Superuser(id) | Actor::Role(id) => id,
        }
    }
}

/// The role a session that logs in as `user` is bound to for its life: the role
/// of that name. A name that is no role is the superuser only when clients are
/// not authenticated (`authenticated` false; any client could then name the
/// superuser anyway); with a password authenticator such a login is refused
/// (`None`: the role was dropped between the password check and now).
pub fn session_role(state: &CatalogState, user: &str, authenticated: bool) -> Option<RoleId> {
    match state.role_by_name(user) {
        Some(role) => Some(role.id),
        None if authenticated => None,
        None => Some(SUPERUSER_ROLE_ID),
    }
}

/// What a session bound to `role` acts as now. A role dropped while the session
/// was connected leaves the session without privileges: every statement fails
/// until it reconnects, as in Materialize (a session never falls back to
/// another role or to the superuser).
pub fn actor(state: &CatalogState, role: RoleId) -> Result<Actor, PlanError> {
    match state.role(role) {
        Some(found) if found.superuser => Ok(Actor::Superuser(role)),
        Some(_) => Ok(Actor::Role(role)),
        None => Err(PlanError::new(
            SqlState::UNDEFINED_OBJECT,
            format!("role {role} was concurrently dropped"),
        )
        .with_detail("Please disconnect and re-connect with a valid role.")),
    }
}

/// `permission denied for SYSTEM`, as Materialize words a missing system privilege.
fn system_denied(user: &str, privilege: &str) -> PlanError {
    PlanError::new(
        SqlState::INSUFFICIENT_PRIVILEGE,
        "permission denied for SYSTEM",
    )
    .with_detail(format!(
        "The '{user}' role needs {privilege} privileges on SYSTEM"
    ))
}

/// An object's kind and the name messages give it.
fn describe(state: &CatalogState, object: &ObjectRef) -> (ObjectKind, String) {
    match object {
        ObjectRef::Item(id) => match state.item(*id) {
            Some(item) => (
                ObjectKind::Item(item.definition.kind()),
                item.name.to_string(),
            ),
            None => (ObjectKind::Database, id.to_string()),
        },
        ObjectRef::Cluster(id) => (
            ObjectKind::Cluster,
            state
                .cluster(*id)
                .map(|c| c.name.clone())
                .unwrap_or_else(|| id.to_string()),
        ),
        ObjectRef::Schema(name) => (
            ObjectKind::Schema,
            format!("{}.{name}", floe_sql::catalog::DATABASE),
        ),
        ObjectRef::Database => (ObjectKind::Database, floe_sql::catalog::DATABASE.into()),
    }
}

/// Whether `role` owns `object` (directly or as a member of its owner).
pub fn owns(state: &CatalogState, role: RoleId, object: &ObjectRef) -> bool {
    let owner = state.owner(object);
    owner == role || is_member(state, role, owner)
}

/// Whether `role` holds `privilege` on `object`.
pub fn has_privilege(
    state: &CatalogState,
    role: RoleId,
    object: &ObjectRef,
    privilege: Privilege,
) -> bool {
    if state.role(role).is_some_and(|r| r.superuser) || owns(state, role, object) {
        return true;
    }
    state.grants(object).iter().any(|item| {
        item.privileges.contains(&privilege)
            && match item.grantee {
                Grantee::Public => true,
                Grantee::Role(grantee) => grantee == role || is_member(state, role, grantee),
            }
    })
}

/// The checks of one plan for one role.
struct Checker<'a> {
    state: &'a CatalogState,
    user: &'a str,
    role: RoleId,
}

impl Checker<'_> {
    /// USAGE on the schema of an item a statement names (as Materialize checks
    /// it for every item a statement uses; builtin schemas need none).
    fn require_schema_usage(&self, object: &ObjectRef) -> Result<(), PlanError> {
        let ObjectRef::Item(id) = object else {
            return Ok(());
        };
        match self.state.item(*id) {
            Some(item) if self.state.schema_exists(&item.name.schema) => self.require_privilege(
                ObjectRef::Schema(item.name.schema.clone()),
                Privilege::Usage,
            ),
            _ => Ok(()),
        }
    }

    fn require(&self, object: ObjectRef, privilege: Privilege) -> Result<(), PlanError> {
        self.require_schema_usage(&object)?;
        self.require_privilege(object, privilege)
    }

    fn require_privilege(&self, object: ObjectRef, privilege: Privilege) -> Result<(), PlanError> {
        if has_privilege(self.state, self.role, &object, privilege) {
            return Ok(());
        }
        let (kind, name) = describe(self.state, &object);
        Err(PlanError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("permission denied for {} \"{name}\"", kind.upper_name()),
        )
        .with_detail(format!(
            "The '{}' role needs {} privileges on {} \"{name}\"",
            self.user,
            privilege.name(),
            kind.upper_name()
        )))
    }

    fn require_owner(&self, object: ObjectRef) -> Result<(), PlanError> {
        self.require_schema_usage(&object)?;
        if owns(self.state, self.role, &object) {
            return Ok(());
        }
        let (kind, name) = describe(self.state, &object);
        Err(PlanError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("must be owner of {} {name}", kind.upper_name()),
        ))
    }

    /// CREATE on the schema a new item goes into.
    fn require_create_in(&self, name: &QualifiedName) -> Result<(), PlanError> {
        self.require(ObjectRef::Schema(name.schema.clone()), Privilege::Create)
    }

    /// USAGE on what a new item's definition names (secrets, connections), SELECT
    /// on relations it reads, CREATE on the cluster it runs on.
    fn require_uses(&self, definition: &ItemDefinition) -> Result<(), PlanError> {
        for used in definition.uses() {
            let Some(item) = self.state.item(used) else {
                continue;
            };
            let privilege = match ObjectKind::Item(item.definition.kind()).privileges() {
                [Privilege::Usage] => Privilege::Usage,
                _ => Privilege::Select,
            };
            self.require(ObjectRef::Item(used), privilege)?;
        }
        if let Some(cluster) = definition.cluster() {
            self.require(ObjectRef::Cluster(cluster), Privilege::Create)?;
        }
        Ok(())
    }

    /// `privilege` on each of `items`.
    fn require_all(&self, items: &[GlobalId], privilege: Privilege) -> Result<(), PlanError> {
        for id in items {
            self.require(ObjectRef::Item(*id), privilege)?;
        }
        Ok(())
    }

    /// SELECT on every user relation a query names.
    fn require_select(&self, query: &sqlparser::ast::Statement) -> Result<(), PlanError> {
        for id in relations_read(self.state, query) {
            self.require(ObjectRef::Item(id), Privilege::Select)?;
        }
        Ok(())
    }

    fn check(&self, plan: &Plan) -> Result<(), PlanError> {
        let item = |id: &GlobalId| ObjectRef::Item(*id);
        match plan {
            Plan::Select(select) => self.require_all(&select.reads, Privilege::Select),
            Plan::CopyTo(copy) => self.require_select(&copy.query),
            Plan::Subscribe(subscribe) => match &subscribe.from {
                floe_sql::subscribe::SubscribeFrom::Relation { id, .. } => {
                    self.require(item(id), Privilege::Select)
                }
                floe_sql::subscribe::SubscribeFrom::Query { reads, .. } => {
                    self.require_all(reads, Privilege::Select)
                }
            },
            Plan::AlterTableAddColumn(plan) => self.require_owner(item(&plan.id)),
            Plan::DropConstraint(plan) => self.require_owner(item(&plan.table)),
            Plan::Insert(insert) => {
                self.require(item(&insert.table), Privilege::Insert)?;
                self.require_select(&insert.source)
            }
            Plan::Update(update) => {
                self.require(item(&update.table), Privilege::Update)?;
                self.require_select(&update.query)
            }
            Plan::Delete(delete) => {
                self.require(item(&delete.table), Privilege::Delete)?;
                self.require_select(&delete.query)
            }
            Plan::CopyFrom(copy) => self.require(item(&copy.table), Privilege::Insert),
            Plan::CreateSecret(plan) => self.require_create_in(&plan.name),
            Plan::CreateType(plan) => self.require_create_in(&plan.name),
            Plan::CreateConnection(plan) => {
                self.require_create_in(&plan.name)?;
                self.require_uses(&ItemDefinition::Connection(plan.definition.clone()))
            }
            Plan::CreateTable(plan) => self.require_create_in(&plan.name),
            // SELECT on what the view reads (a view reads as its owner), CREATE on
            // the cluster of a materialized one, and the replaced view's ownership.
            Plan::CreateView(plan) => {
                self.require_create_in(&plan.name)?;
                for used in &plan.uses {
                    self.require(item(used), Privilege::Select)?;
                }
                if let Some(cluster) = plan.cluster {
                    self.require(ObjectRef::Cluster(cluster), Privilege::Create)?;
                }
                match &plan.replaces {
                    Some(replaced) => self.require_owner(item(replaced)),
                    None => Ok(()),
                }
            }
            // As PostgreSQL: only the relation's owner indexes it; as Materialize:
            // CREATE on the cluster that keeps it.
            Plan::CreateIndex(plan) => {
                self.require_create_in(&plan.name)?;
                self.require_owner(item(&plan.definition.on))?;
                self.require(
                    ObjectRef::Cluster(plan.definition.cluster),
                    Privilege::Create,
                )
            }
            Plan::CreateSink(plan) => {
                self.require_create_in(&plan.name)?;
                self.require_uses(&ItemDefinition::Sink(plan.definition.clone()))
            }
            Plan::CreateSource(plan) => {
                self.require_create_in(&plan.name)?;
                self.require_uses(&ItemDefinition::Source(plan.definition.clone()))
            }
            Plan::CreatePostgresSource(plan) => {
                self.require_create_in(&plan.name)?;
                self.require(ObjectRef::Item(plan.connection), Privilege::Usage)?;
                self.require(ObjectRef::Cluster(plan.cluster), Privilege::Create)
            }
            Plan::AlterConnection(plan) => {
                self.require_owner(item(&plan.id))?;
                self.require_uses(&ItemDefinition::Connection(plan.definition.clone()))
            }
            Plan::CreateSchema(_) => self.require(ObjectRef::Database, Privilege::Create),
            Plan::Comment(plan) => self.require_owner(item(&plan.id)),
            Plan::ValidateConnection(plan) => self.require(item(&plan.id), Privilege::Usage),
            Plan::AlterSecret(plan) => self.require_owner(item(&plan.id)),
            Plan::AlterSink(plan) => self.require_owner(item(&plan.id)),
            Plan::AlterSource(floe_sql::postgres::AlterSourcePlan::AddSubsources {
                source,
                ..
            })
            | Plan::AlterSource(floe_sql::postgres::AlterSourcePlan::DropSubsources {
                source,
                ..
            }) => self.require_owner(item(source)),
            Plan::CreateCluster(_) => Err(system_denied(self.user, "CREATECLUSTER")),
            Plan::AlterCluster(plan) => self.require_owner(ObjectRef::Cluster(plan.id)),
            Plan::CreateClusterReplica(plan) => {
                self.require_owner(ObjectRef::Cluster(plan.cluster))
            }
            Plan::DropObjects(plan) => {
                for id in &plan.items {
                    self.require_owner(item(id))?;
                }
                for id in plan
                    .clusters
                    .iter()
                    .chain(plan.replicas.iter().map(|(cluster, _)| cluster))
                {
                    self.require_owner(ObjectRef::Cluster(*id))?;
                }
                for schema in &plan.schemas {
                    self.require_owner(ObjectRef::Schema(schema.clone()))?;
                }
                Ok(())
            }
            // A role may change its own password, and nothing else about itself.
            Plan::Role(RolePlan::AlterRole { id, attributes, .. })
                if *id == self.role
                    && attributes.login.is_none()
                    && attributes.superuser.is_none()
                    && attributes.inherit.is_none() =>
            {
                Ok(())
            }
            Plan::Role(_) => Err(system_denied(self.user, "CREATEROLE")),
            Plan::Privilege(PrivilegePlan::Grant { objects, .. })
            | Plan::Privilege(PrivilegePlan::Revoke { objects, .. }) => {
                for object in objects {
                    self.require_owner(object.object.clone())?;
                }
                Ok(())
            }
            Plan::Privilege(PrivilegePlan::AlterOwner { object, new_owner }) => {
                self.require_owner(object.object.clone())?;
                if *new_owner == self.role || is_member(self.state, self.role, *new_owner) {
                    Ok(())
                } else {
                    let name = self
                        .state
                        .role(*new_owner)
                        .map(|r| r.name.clone())
                        .unwrap_or_default();
                    Err(PlanError::new(
                        SqlState::INSUFFICIENT_PRIVILEGE,
                        format!("must be a member of role \"{name}\""),
                    ))
                }
            }
            Plan::ShowVariable(_)
            | Plan::SetVariable(_)
            | Plan::Transaction(_)
            | Plan::NoOp { .. } => Ok(()),
        }
    }
}

/// Refuses a plan the session's role (`role`, logged in as `user`) may not run.
pub fn check_plan(
    state: &CatalogState,
    user: &str,
    role: RoleId,
    plan: &Plan,
) -> Result<(), PlanError> {
    let actor = actor(state, role)?;
    if let Plan::Role(RolePlan::DropRoles { ids }) = plan
        && ids.contains(&role)
    {
        return Err(PlanError::new(
            SqlState::OBJECT_IN_USE,
            "current role cannot be dropped",
        ));
    }
    match actor {
        Actor::Superuser(_) => Ok(()),
        Actor::Role(role) => Checker { state, user, role }.check(plan),
    }
}

/// The user items a query reads, by the names it gives (`t`, `public.t`,
/// `materialize.public.t`); builtin relations need no privilege.
fn relations_read(state: &CatalogState, query: &sqlparser::ast::Statement) -> Vec<GlobalId> {
    let mut ids = Vec::new();
    let _ = sqlparser::ast::visit_relations(query, |relation| {
        let parts = floe_sql::planner::identifier_parts(relation);
        let name = match parts.as_slice() {
            [item] => Some(QualifiedName::public(item.clone())),
            _ => floe_sql::planner::fully_qualified(&parts),
        };
        if let Some(item) = name.and_then(|name| state.item_by_name(&name))
            && !ids.contains(&item.id)
        {
            ids.push(item.id);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    ids
}

tokio::task_local! {
    /// The role the statement being sequenced runs as: the owner of what it creates.
    pub static ACTOR: RoleId;
}

/// How the error of a sink stopped for its owner's privileges begins.
pub const SINK_DENIED_PREFIX: &str = "permission denied for ";

/// Why a sink may not run with its owner's privileges (SELECT on its relation,
/// USAGE on its connection), if it may not: a sink runs as its owner, so a grant
/// revoked from the owner stops it (`stalled` with this error) and a grant given
/// back starts it again.
pub fn sink_denied(
    state: &CatalogState,
    sink: GlobalId,
    definition: &floe_sql::catalog::SinkDefinition,
) -> Option<String> {
    let owner = state.owner(&ObjectRef::Item(sink));
    [
        (definition.from, Privilege::Select),
        (definition.connection, Privilege::Usage),
    ]
    .into_iter()
    .find(|(id, privilege)| !has_privilege(state, owner, &ObjectRef::Item(*id), *privilege))
    .map(|(id, _)| {
        let (kind, name) = describe(state, &ObjectRef::Item(id));
        let owner = state
            .role(owner)
            .map(|role| role.name.clone())
            .unwrap_or_else(|| owner.to_string());
        format!(
            "{SINK_DENIED_PREFIX}{} \"{name}\": the sink runs with the privileges of its owner '{owner}'",
            kind.upper_name()
        )
    })
}
