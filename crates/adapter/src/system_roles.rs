//! The builtin relations of roles: `mz_roles`, `mz_role_members` (Materialize's
//! columns) and PostgreSQL's `pg_roles` and `pg_auth_members` rows. A password
//! never appears: `rolpassword` shows `********` when one is set.

use floe_repr::{Datum, PgType};
use floe_sql::catalog::PlanCatalog;
use floe_sql::privilege::{AclItem, Grantee, ObjectKind, ObjectRef};
use floe_sql::role::Role;

use crate::system::{BuiltinRelation, SystemContext};

use PgType::*;

fn roles<'a>(context: &'a SystemContext) -> impl Iterator<Item = &'a Role> {
    context.catalog.roles()
}

fn role_oid(context: &SystemContext, id: floe_repr::RoleId) -> Datum {
    context
        .catalog
        .role(id)
        .map(|role| Datum::Oid(role.oid))
        .unwrap_or(Datum::Null)
}

/// The rows of PostgreSQL's `pg_roles`.
pub(crate) fn pg_roles_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    roles(context)
        .map(|role| {
            vec![
                Datum::Oid(role.oid),
                Datum::Text(role.name.clone()),
                Datum::Bool(role.superuser),
                Datum::Bool(role.inherit),
                // Creating roles and databases takes the superuser.
                Datum::Bool(role.superuser),
                Datum::Bool(role.superuser),
                Datum::Bool(role.login),
                Datum::Bool(false),
                Datum::Int32(-1),
                // Never the password or its verifier.
                if role.has_password {
                    Datum::Text("********".into())
                } else {
                    Datum::Null
                },
                Datum::Null,
                Datum::Bool(false),
                Datum::Null,
            ]
        })
        .collect()
}

/// The rows of PostgreSQL's `pg_auth_members`.
pub(crate) fn pg_auth_members_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    membership_rows(context, |id| role_oid(context, id), &[Datum::Bool(false)])
}

/// One row per role membership: its role, member and grantor as `role` shows them, then
/// the `extra` columns. `mz_role_members` and `pg_auth_members` differ only so.
fn membership_rows(
    context: &SystemContext,
    role: impl Fn(floe_repr::RoleId) -> Datum,
    extra: &[Datum],
) -> Vec<Vec<Datum>> {
    context
        .catalog
        .role_memberships()
        .iter()
        .map(|membership| {
            let roles = [membership.role, membership.member, membership.grantor];
            roles
                .into_iter()
                .map(&role)
                .chain(extra.iter().cloned())
                .collect()
        })
        .collect()
}

pub static ROLE_BUILTINS: &[BuiltinRelation] = &[
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_roles",
        columns: &[
            ("id", Text, false),
            ("oid", Oid, false),
            ("name", Text, false),
            ("inherit", Bool, false),
            ("rolcanlogin", Bool, false),
            ("rolsuper", Bool, false),
        ],
        rows: |context| {
            roles(context)
                .map(|role| {
                    vec![
                        Datum::Text(role.id.to_string()),
                        Datum::Oid(role.oid),
                        Datum::Text(role.name.clone()),
                        Datum::Bool(role.inherit),
                        Datum::Bool(role.login),
                        Datum::Bool(role.superuser),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_role_members",
        columns: &[
            ("role_id", Text, false),
            ("member", Text, false),
            ("grantor", Text, false),
        ],
        rows: |context| membership_rows(context, |id| Datum::Text(id.to_string()), &[]),
    },
];

/// An object's ACL items as text (`u1=arwd/u1`): the owner's privileges first
/// (every privilege of the object's kind), then the grants.
pub(crate) fn acl(context: &SystemContext, object: &ObjectRef) -> Vec<String> {
    acl_items(context, object)
        .iter()
        .map(AclItem::to_text)
        .collect()
}

/// An object's ACL in PostgreSQL's `aclitem` text (roles by name), for
/// `relacl`, `nspacl` and `datacl`.
pub(crate) fn pg_acl(context: &SystemContext, object: &ObjectRef) -> Datum {
    let name = |id: floe_repr::RoleId| {
        context
            .catalog
            .role(id)
            .map(|role| role.name.clone())
            .unwrap_or_else(|| id.to_string())
    };
    Datum::TextArray(
        acl_items(context, object)
            .iter()
            .map(|item| Some(item.to_text_naming(name)))
            .collect(),
    )
}

/// The OID of an object's owner (`relowner`, `nspowner`, `datdba`).
pub(crate) fn owner_oid(context: &SystemContext, object: &ObjectRef) -> Datum {
    role_oid(context, context.catalog.owner(object))
}

/// The owner's privileges, then what was granted.
fn acl_items(context: &SystemContext, object: &ObjectRef) -> Vec<AclItem> {
    let kind = match object {
        ObjectRef::Item(id) => match context.catalog.item(*id) {
            Some(item) => ObjectKind::Item(item.definition.kind()),
            None => return Vec::new(),
        },
        ObjectRef::Cluster(_) => ObjectKind::Cluster,
        ObjectRef::Schema(_) => ObjectKind::Schema,
        ObjectRef::Database => ObjectKind::Database,
    };
    let owner = context.catalog.owner(object);
    let owner_item = AclItem {
        grantee: Grantee::Role(owner),
        grantor: owner,
        privileges: kind.privileges().to_vec(),
    };
    std::iter::once(owner_item)
        .chain(context.catalog.grants(object).iter().cloned())
        .collect()
}
