//! CREATE/ALTER/DROP ROLE, GRANT/REVOKE of role membership and of privileges,
//! ALTER ... OWNER TO. Who may run them was
//! checked with the plan (`crate::rbac`). Passwords are hashed here, before any
//! op is built: the catalog only ever sees SCRAM verifiers.

use floe_catalog::{Op, RoleOp, Verifier};
use floe_sql::catalog::PlanCatalog;
use floe_sql::privilege::{Grantee, NamedObject, Privilege, PrivilegePlan};
use floe_sql::role::{PlainPassword, RolePlan};
use tracing::info;

use super::command;
use crate::auth::ScramVerifier;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::session::Session;

/// What of `privileges` an object's kind has: all of them for a named object
/// (planning checked), some for one of `ON ALL TABLES` (a view takes SELECT).
fn applicable(privileges: &[Privilege], object: &NamedObject) -> Vec<Privilege> {
    privileges
        .iter()
        .copied()
        .filter(|privilege| object.kind.privileges().contains(privilege))
        .collect()
}

/// One op per object and grantee, made by `op` with the `privileges` that apply to the
/// object; none for an object none of them apply to. GRANT and REVOKE expand so.
fn privilege_ops(
    objects: &[NamedObject],
    privileges: &[Privilege],
    grantees: &[Grantee],
    op: impl Fn(&NamedObject, Grantee, Vec<Privilege>) -> RoleOp,
) -> Vec<RoleOp> {
    let mut ops = Vec::new();
    for object in objects {
        let privileges = applicable(privileges, object);
        for grantee in grantees.iter().filter(|_| !privileges.is_empty()) {
            ops.push(op(object, *grantee, privileges.clone()));
        }
    }
    ops
}

fn verifier(password: Option<PlainPassword>) -> Option<Verifier> {
    password.map(|password| Verifier(ScramVerifier::new(&password.0).to_string()))
}

impl Coordinator {
    pub(super) async fn sequence_role(
        &self,
        session: &Session,
        plan: RolePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        // PBKDF2 takes a few milliseconds: done before the catalog lock.
        let (ops, tag) = match plan {
            RolePlan::CreateRole { name, attributes } => {
                info!(role = %name, "creating role");
                let op = RoleOp::Create {
                    name,
                    // Materialize's defaults: NOLOGIN, INHERIT.
                    login: attributes.login.unwrap_or(false),
                    superuser: attributes.superuser.unwrap_or(false),
                    inherit: attributes.inherit.unwrap_or(true),
                    verifier: verifier(attributes.password.flatten()),
                };
                (vec![op], "CREATE ROLE")
            }
            RolePlan::AlterRole {
                id,
                name,
                attributes,
            } => {
                info!(role = %name, "altering role");
                let op = RoleOp::Alter {
                    id,
                    login: attributes.login,
                    superuser: attributes.superuser,
                    inherit: attributes.inherit,
                    verifier: attributes.password.map(verifier),
                };
                (vec![op], "ALTER ROLE")
            }
            RolePlan::DropRoles { ids } => {
                (ids.into_iter().map(RoleOp::Drop).collect(), "DROP ROLE")
            }
            RolePlan::GrantRoles { grants } => {
                let grantor = session.role.unwrap_or(floe_sql::role::SUPERUSER_ROLE_ID);
                let ops = grants
                    .into_iter()
                    .map(|(role, member)| RoleOp::Grant {
                        role,
                        member,
                        grantor,
                    })
                    .collect();
                (ops, "GRANT ROLE")
            }
            RolePlan::RevokeRoles { revokes } => (
                revokes
                    .into_iter()
                    .map(|(role, member)| RoleOp::Revoke { role, member })
                    .collect(),
                "REVOKE ROLE",
            ),
        };
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(&mut catalog, ops.into_iter().map(Op::Role).collect())?;
        command(tag)
    }
}

impl Coordinator {
    /// GRANT/REVOKE of privileges, ALTER ... OWNER TO. A grant is recorded as the
    /// object owner's (Materialize's grantor), whoever ran it.
    pub(super) async fn sequence_privilege(
        &self,
        plan: PrivilegePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let (ops, tag) = match plan {
            PrivilegePlan::Grant {
                objects,
                privileges,
                grantees,
            } => {
                let state = catalog.state();
                let ops = privilege_ops(
                    &objects,
                    &privileges,
                    &grantees,
                    |object, grantee, privileges| RoleOp::GrantPrivileges {
                        object: object.object.clone(),
                        grantee,
                        grantor: state.owner(&object.object),
                        privileges,
                    },
                );
                (ops, "GRANT".to_string())
            }
            PrivilegePlan::Revoke {
                objects,
                privileges,
                grantees,
            } => {
                let ops = privilege_ops(
                    &objects,
                    &privileges,
                    &grantees,
                    |object, grantee, privileges| RoleOp::RevokePrivileges {
                        object: object.object.clone(),
                        grantee,
                        privileges,
                    },
                );
                (ops, "REVOKE".to_string())
            }
            PrivilegePlan::AlterOwner { object, new_owner } => {
                info!(object = %object.name, owner = %new_owner, "changing owner");
                (
                    vec![RoleOp::SetOwner {
                        object: object.object,
                        owner: new_owner,
                    }],
                    format!("ALTER {}", object.kind.upper_name()),
                )
            }
        };
        self.catalog_transact(&mut catalog, ops.into_iter().map(Op::Role).collect())?;
        command(&tag)
    }
}
