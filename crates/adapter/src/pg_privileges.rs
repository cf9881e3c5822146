//! The privilege inquiry functions psql and tools call (`has_table_privilege`,
//! `has_schema_privilege`, `has_database_privilege`, `has_column_privilege`,
//! `has_any_column_privilege`, `pg_has_role`) and Materialize's own
//! (`has_cluster_privilege`, `has_connection_privilege`, `has_secret_privilege`),
//! answered by the rules that check statements (`crate::rbac`).
//!
//! Each takes an optional role (a name, `public`, or an OID; the session's role
//! when left out), an object (a name or an OID) and a list of privileges
//! (`'SELECT, INSERT'`): true when the role holds any of them. As in PostgreSQL,
//! an unknown name is an error, an unknown OID gives NULL, and `... WITH GRANT
//! OPTION` is held by those who may grant (owners and superusers: floe grants
//! carry no grant option).

use datafusion::common::ScalarValue;
use floe_repr::{RoleId, SqlState};
use floe_sql::PlanError;
use floe_sql::catalog::{ItemKind, PlanCatalog};
use floe_sql::privilege::{Grantee, ObjectRef};
use floe_sql::role::{is_member, unknown_role};
use floe_sql_parser::ast::Privilege;

use crate::pg_functions::Lookup;

/// What a privilege word asks of a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Requirement {
    Privilege(Privilege),
    /// A PostgreSQL privilege floe never grants (`TRUNCATE`, `REFERENCES`, ...):
    /// held by the owner alone.
    OwnerOnly,
    /// Held by every role (`CONNECT` and `TEMPORARY` on the database).
    Everyone,
    /// Membership in the role (`pg_has_role`'s `MEMBER`, `USAGE`, `SET`; every
    /// floe role inherits).
    Member,
}

use Requirement::*;

pub(crate) const TABLE: &[(&str, Requirement)] = &[
    ("SELECT", Privilege(Privilege::Select)),
    ("INSERT", Privilege(Privilege::Insert)),
    ("UPDATE", Privilege(Privilege::Update)),
    ("DELETE", Privilege(Privilege::Delete)),
    ("TRUNCATE", OwnerOnly),
    ("REFERENCES", OwnerOnly),
    ("TRIGGER", OwnerOnly),
];
pub(crate) const COLUMN: &[(&str, Requirement)] = &[
    ("SELECT", Privilege(Privilege::Select)),
    ("INSERT", Privilege(Privilege::Insert)),
    ("UPDATE", Privilege(Privilege::Update)),
    ("REFERENCES", OwnerOnly),
];
pub(crate) const USAGE_CREATE: &[(&str, Requirement)] = &[
    ("USAGE", Privilege(Privilege::Usage)),
    ("CREATE", Privilege(Privilege::Create)),
];
pub(crate) const DATABASE: &[(&str, Requirement)] = &[
    ("USAGE", Privilege(Privilege::Usage)),
    ("CREATE", Privilege(Privilege::Create)),
    ("CONNECT", Everyone),
    ("TEMPORARY", Everyone),
    ("TEMP", Everyone),
];
pub(crate) const USAGE: &[(&str, Requirement)] = &[("USAGE", Privilege(Privilege::Usage))];
pub(crate) const ROLE: &[(&str, Requirement)] =
    &[("MEMBER", Member), ("USAGE", Member), ("SET", Member)];

/// The privileges a list names, each with whether it asks for the grant
/// (admin) option. An empty or unknown word is refused as PostgreSQL does.
fn parse_privileges(
    text: &str,
    known: &[(&str, Requirement)],
) -> Result<Vec<(Requirement, bool)>, PlanError> {
    text.split(',')
        .map(|word| {
            let word = word.trim().to_ascii_uppercase();
            let (name, grant_option) = match word
                .strip_suffix(" WITH GRANT OPTION")
                .or_else(|| word.strip_suffix(" WITH ADMIN OPTION"))
            {
                Some(name) => (name.trim_end().to_string(), true),
                None => (word.clone(), false),
            };
            known
                .iter()
                .find(|(known, _)| *known == name)
                .map(|(_, requirement)| (*requirement, grant_option))
                .ok_or_else(|| {
                    PlanError::invalid(format!(
                        "unrecognized privilege type: \"{}\"",
                        word.to_lowercase()
                    ))
                })
        })
        .collect()
}

/// Whose privileges a call asks about.
#[derive(Debug, Clone, Copy)]
enum Who {
    Role(RoleId),
    /// `'public'`: what is granted to everyone.
    Public,
}

/// What a call asks about.
pub(crate) enum Target {
    Object(ObjectRef),
    /// A builtin relation or schema: readable and usable by everyone, changed
    /// by superusers only.
    Builtin,
    /// A role (`pg_has_role`).
    Role(RoleId),
}

fn text_of(value: &ScalarValue) -> Option<String> {
    match value {
        ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => v.clone(),
        _ => None,
    }
}

fn oid_of(value: &ScalarValue) -> Option<u32> {
    match value {
        ScalarValue::UInt32(v) => *v,
        ScalarValue::UInt64(v) => v.and_then(|v| u32::try_from(v).ok()),
        ScalarValue::Int32(v) => v.and_then(|v| u32::try_from(v).ok()),
        ScalarValue::Int64(v) => v.and_then(|v| u32::try_from(v).ok()),
        ScalarValue::Int16(v) => v.and_then(|v| u32::try_from(v).ok()),
        _ => None,
    }
}

/// A name or an OID argument; `None` when SQL NULL.
enum NameOrOid {
    Name(String),
    Oid(u32),
}

fn name_or_oid(value: &ScalarValue) -> Option<NameOrOid> {
    if value.is_null() {
        return None;
    }
    text_of(value)
        .map(NameOrOid::Name)
        .or_else(|| oid_of(value).map(NameOrOid::Oid))
}

impl Lookup {
    /// The role an argument names; `Ok(None)` for an unknown OID.
    fn who(&self, value: &ScalarValue) -> Result<Option<Who>, PlanError> {
        Ok(match name_or_oid(value) {
            None => None,
            Some(NameOrOid::Name(name)) if name == "public" => Some(Who::Public),
            Some(NameOrOid::Name(name)) => Some(Who::Role(
                self.access
                    .role_by_name(&name)
                    .map(|role| role.id)
                    .ok_or_else(|| unknown_role(&name))?,
            )),
            Some(NameOrOid::Oid(oid)) => self
                .access
                .roles()
                .find(|role| role.oid == oid)
                .map(|role| Who::Role(role.id)),
        })
    }

    /// A relation by name (a user relation, else a builtin one) or OID.
    pub(crate) fn relation(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        let is_relation = |kind: ItemKind| {
            matches!(
                kind,
                ItemKind::Table | ItemKind::View | ItemKind::MaterializedView | ItemKind::Source
            )
        };
        let oid = match name_or_oid(value) {
            None => return Ok(None),
            Some(NameOrOid::Oid(oid)) => oid,
            Some(NameOrOid::Name(name)) => match self.item_named(&name, is_relation) {
                Some(item) => return Ok(Some(Target::Object(ObjectRef::Item(item.id)))),
                None => self
                    .relation_oid(&name)
                    .ok_or_else(|| PlanError::unknown_item(&name))?,
            },
        };
        Ok(match self.items.iter().find(|item| item.oid == oid) {
            Some(item) => Some(Target::Object(ObjectRef::Item(item.id))),
            None => self.relation_schema(oid).map(|_| Target::Builtin),
        })
    }

    /// A schema by name or OID.
    pub(crate) fn schema(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        let name = match name_or_oid(value) {
            None => return Ok(None),
            Some(NameOrOid::Name(name)) => name,
            Some(NameOrOid::Oid(oid)) => match self.schemas.iter().find(|(o, _)| *o == oid) {
                Some((_, name)) => name.clone(),
                None => return Ok(None),
            },
        };
        if self.access.schema_exists(&name) {
            Ok(Some(Target::Object(ObjectRef::Schema(name))))
        } else if self.schemas.iter().any(|(_, schema)| *schema == name) {
            Ok(Some(Target::Builtin))
        } else {
            Err(PlanError::unknown_schema(&name))
        }
    }

    pub(crate) fn database(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        match name_or_oid(value) {
            None => Ok(None),
            Some(NameOrOid::Name(name)) if name == floe_sql::catalog::DATABASE => {
                Ok(Some(Target::Object(ObjectRef::Database)))
            }
            Some(NameOrOid::Name(name)) => Err(PlanError::new(
                SqlState::UNDEFINED_OBJECT,
                format!("unknown database '{name}'"),
            )),
            Some(NameOrOid::Oid(oid)) => Ok((oid == crate::pg_catalog::DATABASE_OID)
                .then_some(Target::Object(ObjectRef::Database))),
        }
    }

    pub(crate) fn cluster(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        match name_or_oid(value) {
            None | Some(NameOrOid::Oid(_)) => Ok(None),
            Some(NameOrOid::Name(name)) => self
                .access
                .cluster_by_name(&name)
                .map(|cluster| Some(Target::Object(ObjectRef::Cluster(cluster.id))))
                .ok_or_else(|| PlanError::unknown_cluster(&name)),
        }
    }

    /// A user item of a kind `wanted` accepts, by name (`c` in `public`,
    /// `s.c`, `materialize.s.c`; quotes dropped).
    fn item_named(
        &self,
        name: &str,
        wanted: impl Fn(ItemKind) -> bool,
    ) -> Option<&crate::pg_functions::ItemEntry> {
        let parts: Vec<&str> = name.split('.').map(|part| part.trim_matches('"')).collect();
        let (schema, item_name) = match parts.as_slice() {
            [item] => (floe_sql::catalog::PUBLIC_SCHEMA, *item),
            [schema, item] | [floe_sql::catalog::DATABASE, schema, item] => (*schema, *item),
            _ => return None,
        };
        self.items.iter().find(|item| {
            wanted(item.kind) && item.name.schema == schema && item.name.item == item_name
        })
    }

    /// A connection or secret by name or OID.
    fn item_of_kind(
        &self,
        value: &ScalarValue,
        kind: ItemKind,
    ) -> Result<Option<Target>, PlanError> {
        let found = match name_or_oid(value) {
            None => return Ok(None),
            Some(NameOrOid::Name(name)) => Some(
                self.item_named(&name, |k| k == kind)
                    .ok_or_else(|| PlanError::unknown_item(&name))?,
            ),
            Some(NameOrOid::Oid(oid)) => self
                .items
                .iter()
                .find(|item| item.kind == kind && item.oid == oid),
        };
        Ok(found.map(|item| Target::Object(ObjectRef::Item(item.id))))
    }

    fn is_superuser(&self, role: RoleId) -> bool {
        self.access.role(role).is_some_and(|role| role.superuser)
    }

    /// Whether `who` holds `requirement` (with the grant option if asked) on `target`.
    fn holds(
        &self,
        who: Who,
        target: &Target,
        requirement: Requirement,
        grant_option: bool,
    ) -> bool {
        let role = match who {
            Who::Role(role) if self.is_superuser(role) => return true,
            Who::Role(role) => Some(role),
            Who::Public => None,
        };
        match target {
            Target::Builtin => {
                !grant_option
                    && matches!(
                        requirement,
                        Privilege(Privilege::Select | Privilege::Usage) | Everyone
                    )
            }
            Target::Role(wanted) => {
                !grant_option
                    && role.is_some_and(|role| {
                        role == *wanted || is_member(&self.access, role, *wanted)
                    })
            }
            Target::Object(object) => {
                let owns = role.is_some_and(|role| crate::rbac::owns(&self.access, role, object));
                if grant_option || requirement == OwnerOnly {
                    return owns;
                }
                match (requirement, role) {
                    (Everyone, _) => true,
                    (Privilege(privilege), Some(role)) => {
                        crate::rbac::has_privilege(&self.access, role, object, privilege)
                    }
                    (Privilege(privilege), None) => self.access.grants(object).iter().any(|acl| {
                        acl.grantee == Grantee::Public && acl.privileges.contains(&privilege)
                    }),
                    (Member | OwnerOnly, _) => false,
                }
            }
        }
    }
}

pub(crate) type Resolver = fn(&Lookup, &ScalarValue) -> Result<Option<Target>, PlanError>;

/// One call: `[role,] object, privileges` (`extra` arguments between the object
/// and the privileges are skipped: a column, for the column functions).
pub(crate) fn answer(
    lookup: &Lookup,
    args: &[ScalarValue],
    extra: usize,
    resolve: Resolver,
    known: &[(&str, Requirement)],
) -> Result<ScalarValue, PlanError> {
    let null = Ok(ScalarValue::Boolean(None));
    let (who, rest) = match args.len().checked_sub(2 + extra) {
        Some(0) => match lookup.current_role {
            Some(role) => (Some(Who::Role(role)), args),
            None => return null,
        },
        Some(1) => (lookup.who(&args[0])?, &args[1..]),
        _ => {
            return Err(PlanError::new(
                SqlState::UNDEFINED_FUNCTION,
                "function does not exist for these arguments",
            ));
        }
    };
    let privileges = match rest.last().and_then(text_of) {
        Some(text) => parse_privileges(&text, known)?,
        None => return null,
    };
    let (Some(who), Some(target)) = (who, resolve(lookup, &rest[0])?) else {
        return null;
    };
    Ok(ScalarValue::Boolean(Some(privileges.iter().any(
        |(requirement, grant_option)| lookup.holds(who, &target, *requirement, *grant_option),
    ))))
}

impl Lookup {
    /// `has_connection_privilege`'s object.
    pub(crate) fn connection(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        self.item_of_kind(value, ItemKind::Connection)
    }

    /// `has_secret_privilege`'s object.
    pub(crate) fn secret(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        self.item_of_kind(value, ItemKind::Secret)
    }

    /// `pg_has_role`'s object: a role (`public` is none).
    pub(crate) fn role_target(&self, value: &ScalarValue) -> Result<Option<Target>, PlanError> {
        match self.who(value)? {
            Some(Who::Role(role)) => Ok(Some(Target::Role(role))),
            Some(Who::Public) => Err(unknown_role("public")),
            None => Ok(None),
        }
    }
}
