//! Privileges and owners, Materialize's model as far as floe's objects go: an
//! object's owner holds every privilege its kind has, others hold what was
//! granted to them (or to a role they are a member of, or to PUBLIC). Planning
//! resolves `GRANT/REVOKE privilege ON kind name` and `ALTER kind name OWNER TO
//! role`; who may run them is checked in the adapter (`adapter::rbac`).

use std::fmt;

use floe_repr::{ClusterId, GlobalId, RoleId, SqlState};
pub use floe_sql_parser::ast::Privilege;
use floe_sql_parser::ast::{AllObjects, ObjectType, PrivilegeStatement, RoleStatement};

use crate::catalog::{DATABASE, ItemKind, PlanCatalog};
use crate::planner::{PlanNotice, display_name, find_item, name_parts};
use crate::role::resolve_role;
use crate::{Plan, PlanError};

/// An object privileges and owners apply to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectRef {
    Item(GlobalId),
    Cluster(ClusterId),
    Schema(String),
    Database,
}

impl fmt::Display for ObjectRef {
    /// The stored form: `item:u5`, `cluster:u1`, `schema:public`, `database`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectRef::Item(id) => write!(f, "item:{id}"),
            ObjectRef::Cluster(id) => write!(f, "cluster:{id}"),
            ObjectRef::Schema(name) => write!(f, "schema:{name}"),
            ObjectRef::Database => f.write_str("database"),
        }
    }
}

impl std::str::FromStr for ObjectRef {
    type Err = String;

    fn from_str(text: &str) -> Result<ObjectRef, String> {
        let bad = || format!("invalid object reference {text:?}");
        match text.split_once(':') {
            None if text == "database" => Ok(ObjectRef::Database),
            Some(("item", id)) => id.parse().map(ObjectRef::Item).map_err(|_| bad()),
            Some(("cluster", id)) => id.parse().map(ObjectRef::Cluster).map_err(|_| bad()),
            Some(("schema", name)) => Ok(ObjectRef::Schema(name.to_string())),
            _ => Err(bad()),
        }
    }
}

/// Who a grant is for: a role, or every role (`PUBLIC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grantee {
    Public,
    Role(RoleId),
}

impl fmt::Display for Grantee {
    /// Materialize's ids: `p` for PUBLIC.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grantee::Public => f.write_str("p"),
            Grantee::Role(id) => write!(f, "{id}"),
        }
    }
}

impl std::str::FromStr for Grantee {
    type Err = String;

    fn from_str(text: &str) -> Result<Grantee, String> {
        if text == "p" {
            return Ok(Grantee::Public);
        }
        text.parse()
            .map(Grantee::Role)
            .map_err(|_| format!("invalid grantee {text:?}"))
    }
}

/// The privilege letters of PostgreSQL's and Materialize's ACLs.
pub fn acl_char(privilege: Privilege) -> char {
    match privilege {
        Privilege::Select => 'r',
        Privilege::Insert => 'a',
        Privilege::Update => 'w',
        Privilege::Delete => 'd',
        Privilege::Usage => 'U',
        Privilege::Create => 'C',
    }
}

pub fn privilege_of_char(c: char) -> Option<Privilege> {
    Privilege::ALL.into_iter().find(|p| acl_char(*p) == c)
}

/// Privileges granted to a grantee by a grantor on one object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AclItem {
    pub grantee: Grantee,
    pub grantor: RoleId,
    /// In `Privilege` order, without repeats.
    pub privileges: Vec<Privilege>,
}

impl AclItem {
    /// `u2=rw/u1`, `=U/u1` for PUBLIC (Materialize's `mz_aclitem` text).
    pub fn to_text(&self) -> String {
        self.to_text_naming(|id| id.to_string())
    }

    /// The text with roles given by `name`: by name, it is PostgreSQL's
    /// `aclitem` (`alice=r/materialize`).
    pub fn to_text_naming(&self, name: impl Fn(RoleId) -> String) -> String {
        let grantee = match self.grantee {
            Grantee::Public => String::new(),
            Grantee::Role(id) => name(id),
        };
        let letters: String = Privilege::ALL
            .into_iter()
            .filter(|p| self.privileges.contains(p))
            .map(acl_char)
            .collect();
        format!("{grantee}={letters}/{}", name(self.grantor))
    }
}

/// The kind of object privileges are named by in messages (`TABLE`, `SCHEMA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Item(ItemKind),
    Cluster,
    Schema,
    Database,
}

impl ObjectKind {
    /// As Materialize writes it in `permission denied for TABLE "..."`.
    pub fn upper_name(self) -> &'static str {
        match self {
            ObjectKind::Item(ItemKind::Table) => "TABLE",
            ObjectKind::Item(ItemKind::Source) => "SOURCE",
            ObjectKind::Item(ItemKind::View) => "VIEW",
            ObjectKind::Item(ItemKind::MaterializedView) => "MATERIALIZED VIEW",
            ObjectKind::Item(ItemKind::Sink) => "SINK",
            ObjectKind::Item(ItemKind::Connection) => "CONNECTION",
            ObjectKind::Item(ItemKind::Secret) => "SECRET",
            ObjectKind::Item(ItemKind::Index) => "INDEX",
            ObjectKind::Item(ItemKind::Type) => "TYPE",
            ObjectKind::Cluster => "CLUSTER",
            ObjectKind::Schema => "SCHEMA",
            ObjectKind::Database => "DATABASE",
        }
    }

    /// The privileges an object of this kind has (its owner holds them all).
    pub fn privileges(self) -> &'static [Privilege] {
        use Privilege::*;
        match self {
            ObjectKind::Item(ItemKind::Table) => &[Select, Insert, Update, Delete],
            ObjectKind::Item(ItemKind::Source | ItemKind::View | ItemKind::MaterializedView) => {
                &[Select]
            }
            ObjectKind::Item(ItemKind::Sink | ItemKind::Index) => &[],
            ObjectKind::Item(ItemKind::Connection | ItemKind::Secret | ItemKind::Type) => &[Usage],
            ObjectKind::Cluster | ObjectKind::Schema => &[Usage, Create],
            ObjectKind::Database => &[Usage, Create],
        }
    }
}

/// An object resolved for a privilege statement: what it is, its kind and the
/// name messages give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedObject {
    pub object: ObjectRef,
    pub kind: ObjectKind,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PrivilegePlan {
    Grant {
        objects: Vec<NamedObject>,
        privileges: Vec<Privilege>,
        grantees: Vec<Grantee>,
    },
    Revoke {
        objects: Vec<NamedObject>,
        privileges: Vec<Privilege>,
        grantees: Vec<Grantee>,
    },
    AlterOwner {
        object: NamedObject,
        new_owner: RoleId,
    },
}

/// The item, cluster, schema or database a statement names.
pub fn resolve_object(
    catalog: &dyn PlanCatalog,
    object_type: ObjectType,
    name: &sqlparser::ast::ObjectName,
) -> Result<Option<NamedObject>, PlanError> {
    let text = display_name(name);
    let object = match object_type {
        ObjectType::Cluster => catalog.cluster_by_name(&text).map(|cluster| NamedObject {
            object: ObjectRef::Cluster(cluster.id),
            kind: ObjectKind::Cluster,
            name: cluster.name.clone(),
        }),
        ObjectType::Schema => {
            let parts = name_parts(name)?;
            let schema = parts.last().cloned().unwrap_or_default();
            catalog.schema_exists(&schema).then(|| NamedObject {
                object: ObjectRef::Schema(schema.clone()),
                kind: ObjectKind::Schema,
                name: format!("{DATABASE}.{schema}"),
            })
        }
        ObjectType::Database => (text == DATABASE).then(|| NamedObject {
            object: ObjectRef::Database,
            kind: ObjectKind::Database,
            name: DATABASE.to_string(),
        }),
        _ => find_item(catalog, name)?.map(|item| NamedObject {
            object: ObjectRef::Item(item.id),
            kind: ObjectKind::Item(item.definition.kind()),
            name: item.name.to_string(),
        }),
    };
    let Some(object) = object else {
        return Err(match object_type {
            ObjectType::Cluster => PlanError::unknown_cluster(&text),
            ObjectType::Schema => PlanError::new(
                SqlState::INVALID_SCHEMA_NAME,
                format!("unknown schema '{text}'"),
            ),
            ObjectType::Database => PlanError::new(
                SqlState::INVALID_CATALOG_NAME,
                format!("unknown database '{text}'"),
            ),
            _ => PlanError::unknown_item(text),
        });
    };
    if !kind_matches(object_type, object.kind) {
        return Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!(
                "\"{}\" is a {} not a {}",
                object.name,
                object.kind.upper_name().to_lowercase(),
                object_type.name()
            ),
        ));
    }
    Ok(Some(object))
}

/// Whether an object of `kind` is one `ON <object_type>` names. `GRANT ... ON
/// TABLE v` of a view is accepted, as in PostgreSQL, where TABLE covers every
/// relation; other kinds must match.
fn kind_matches(object_type: ObjectType, kind: ObjectKind) -> bool {
    match (object_type, kind) {
        (ObjectType::Table, ObjectKind::Item(kind)) => matches!(
            kind,
            ItemKind::Table | ItemKind::View | ItemKind::MaterializedView | ItemKind::Source
        ),
        (ObjectType::View, ObjectKind::Item(ItemKind::View))
        | (ObjectType::MaterializedView, ObjectKind::Item(ItemKind::MaterializedView))
        | (ObjectType::Source, ObjectKind::Item(ItemKind::Source))
        | (ObjectType::Sink, ObjectKind::Item(ItemKind::Sink))
        | (ObjectType::Secret, ObjectKind::Item(ItemKind::Secret))
        | (ObjectType::Connection, ObjectKind::Item(ItemKind::Connection))
        | (ObjectType::Cluster, ObjectKind::Cluster)
        | (ObjectType::Schema, ObjectKind::Schema)
        | (ObjectType::Database, ObjectKind::Database) => true,
        _ => false,
    }
}

/// The user items `ON ALL <kind>s [IN SCHEMA ... | IN DATABASE ...]` names.
fn all_objects(
    catalog: &dyn PlanCatalog,
    object_type: ObjectType,
    all: &AllObjects,
) -> Result<Vec<NamedObject>, PlanError> {
    let schemas: Vec<String> = match all {
        AllObjects::InSchemas(names) => names
            .iter()
            .map(|name| {
                let parts = name_parts(name)?;
                let schema = parts.last().cloned().unwrap_or_default();
                if catalog.schema_exists(&schema) {
                    Ok(schema)
                } else {
                    Err(PlanError::unknown_schema(&schema))
                }
            })
            .collect::<Result<_, _>>()?,
        AllObjects::InDatabases(names) => {
            if let Some(other) = names.iter().map(display_name).find(|n| n != DATABASE) {
                return Err(PlanError::new(
                    SqlState::INVALID_CATALOG_NAME,
                    format!("unknown database '{other}'"),
                ));
            }
            catalog.schemas_of_database()
        }
        AllObjects::Everywhere => catalog.schemas_of_database(),
    };
    if !matches!(
        object_type,
        ObjectType::Table
            | ObjectType::View
            | ObjectType::MaterializedView
            | ObjectType::Source
            | ObjectType::Secret
            | ObjectType::Connection
    ) {
        return Err(PlanError::unsupported(format!(
            "GRANT/REVOKE ON ALL {} is not supported",
            floe_sql_parser::ast::plural(object_type)
        )));
    }
    let mut objects = Vec::new();
    for schema in schemas {
        for id in catalog.items_in_schema(&schema) {
            let Some(item) = catalog.item(id) else {
                continue;
            };
            let kind = ObjectKind::Item(item.definition.kind());
            if kind_matches(object_type, kind) {
                objects.push(NamedObject {
                    object: ObjectRef::Item(id),
                    kind,
                    name: item.name.to_string(),
                });
            }
        }
    }
    Ok(objects)
}

pub(crate) fn plan_privilege_statement(
    catalog: &dyn PlanCatalog,
    statement: RoleStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let plan = match statement {
        RoleStatement::GrantPrivileges(body) => {
            let (objects, privileges, grantees) = plan_body(catalog, body)?;
            PrivilegePlan::Grant {
                objects,
                privileges,
                grantees,
            }
        }
        RoleStatement::RevokePrivileges(body) => {
            let (objects, privileges, grantees) = plan_body(catalog, body)?;
            PrivilegePlan::Revoke {
                objects,
                privileges,
                grantees,
            }
        }
        RoleStatement::AlterOwner {
            object_type,
            if_exists,
            name,
            new_owner,
        } => {
            let new_owner = resolve_role(catalog, &new_owner)?.id;
            let object = match resolve_object(catalog, object_type, &name) {
                Ok(Some(object)) => object,
                Err(_) | Ok(None) if if_exists => {
                    notices.push(PlanNotice {
                        message: format!(
                            "{} \"{}\" does not exist, skipping",
                            object_type.name(),
                            display_name(&name)
                        ),
                        hint: None,
                    });
                    return Ok(Plan::NoOp {
                        tag: alter_tag(object_type),
                    });
                }
                Err(e) => return Err(e),
                Ok(None) => return Err(PlanError::unknown_item(display_name(&name))),
            };
            PrivilegePlan::AlterOwner { object, new_owner }
        }
        _ => return Err(PlanError::syntax("not a privilege statement")),
    };
    Ok(Plan::Privilege(plan))
}

fn alter_tag(object_type: ObjectType) -> &'static str {
    match object_type {
        ObjectType::Table => "ALTER TABLE",
        ObjectType::View => "ALTER VIEW",
        ObjectType::MaterializedView => "ALTER MATERIALIZED VIEW",
        ObjectType::Source => "ALTER SOURCE",
        ObjectType::Sink => "ALTER SINK",
        ObjectType::Secret => "ALTER SECRET",
        ObjectType::Connection => "ALTER CONNECTION",
        ObjectType::Cluster => "ALTER CLUSTER",
        ObjectType::Schema => "ALTER SCHEMA",
        ObjectType::Database => "ALTER DATABASE",
        _ => "ALTER",
    }
}

type PlannedBody = (Vec<NamedObject>, Vec<Privilege>, Vec<Grantee>);

fn plan_body(
    catalog: &dyn PlanCatalog,
    body: PrivilegeStatement,
) -> Result<PlannedBody, PlanError> {
    let mut objects = match &body.all {
        Some(all) => all_objects(catalog, body.object_type, all)?,
        None => Vec::new(),
    };
    for name in &body.names {
        if let Some(object) = resolve_object(catalog, body.object_type, name)? {
            objects.push(object);
        }
    }
    let mut privileges: Vec<Privilege> = match body.privileges {
        Some(privileges) => privileges,
        None => objects
            .iter()
            .flat_map(|o| o.kind.privileges().iter().copied())
            .collect(),
    };
    privileges.sort();
    privileges.dedup();
    // With ALL, each object gets what of the privileges its kind has (`INSERT
    // ON ALL TABLES` skips views); the privileges must fit the kind named.
    let checked: Vec<ObjectKind> = match body.all {
        Some(_) => vec![match body.object_type {
            ObjectType::View => ObjectKind::Item(ItemKind::View),
            ObjectType::MaterializedView => ObjectKind::Item(ItemKind::MaterializedView),
            ObjectType::Source => ObjectKind::Item(ItemKind::Source),
            ObjectType::Secret => ObjectKind::Item(ItemKind::Secret),
            ObjectType::Connection => ObjectKind::Item(ItemKind::Connection),
            _ => ObjectKind::Item(ItemKind::Table),
        }],
        None => objects.iter().map(|object| object.kind).collect(),
    };
    for kind in checked {
        if let Some(missing) = privileges.iter().find(|p| !kind.privileges().contains(*p)) {
            return Err(PlanError::new(
                SqlState::INVALID_GRANT_OPERATION,
                format!(
                    "invalid privilege types {} for {}",
                    missing.name(),
                    kind.upper_name()
                ),
            ));
        }
    }
    let mut grantees = Vec::new();
    for role in &body.roles {
        if role.quote_style.is_none() && role.value.eq_ignore_ascii_case("public") {
            grantees.push(Grantee::Public);
        } else {
            grantees.push(Grantee::Role(resolve_role(catalog, role)?.id));
        }
    }
    Ok((objects, privileges, grantees))
}
