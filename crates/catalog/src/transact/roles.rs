//! Role ops: roles (`roles`, with their SCRAM verifier), role membership
//! (`role_members`), owners (`object_owners`; an object without a row is the
//! superuser's, as everything made before roles existed) and grants
//! (`object_privileges`), applied like every other op in the DDL's transaction.

use floe_repr::RoleId;
use floe_sql::PlanError;
use floe_sql::catalog::PlanCatalog;
use floe_sql::privilege::{AclItem, Grantee, ObjectRef, Privilege, privilege_of_char};
use floe_sql::role::{Role, RoleMembership, unknown_role};
use rusqlite::params;

use super::OpWriter;
use crate::{CatalogError, allocate};

/// A SCRAM-SHA-256 verifier in PostgreSQL's text form; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier(pub String);

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("'********'")
    }
}

/// One change to roles.
#[derive(Debug, Clone, PartialEq)]
pub enum RoleOp {
    Create {
        name: String,
        login: bool,
        superuser: bool,
        inherit: bool,
        verifier: Option<Verifier>,
    },
    /// `None` leaves an attribute as it is; `verifier: Some(None)` removes the password.
    Alter {
        id: RoleId,
        login: Option<bool>,
        superuser: Option<bool>,
        inherit: Option<bool>,
        verifier: Option<Option<Verifier>>,
    },
    /// Drops a role and its memberships (both ways).
    Drop(RoleId),
    Grant {
        role: RoleId,
        member: RoleId,
        grantor: RoleId,
    },
    Revoke {
        role: RoleId,
        member: RoleId,
    },
    /// Every item, cluster and schema the transaction created so far is owned by `owner`
    /// (the session's role); appended to a DDL's ops by the adapter.
    OwnCreated {
        owner: RoleId,
    },
    SetOwner {
        object: ObjectRef,
        owner: RoleId,
    },
    GrantPrivileges {
        object: ObjectRef,
        grantee: Grantee,
        grantor: RoleId,
        privileges: Vec<Privilege>,
    },
    /// Takes the privileges back from the grantee, whoever granted them.
    RevokePrivileges {
        object: ObjectRef,
        grantee: Grantee,
        privileges: Vec<Privilege>,
    },
}

impl OpWriter<'_> {
    pub(super) fn apply_role(&mut self, op: RoleOp) -> Result<(), CatalogError> {
        match op {
            RoleOp::Create {
                name,
                login,
                superuser,
                inherit,
                verifier,
            } => self.create_role(name, login, superuser, inherit, verifier),
            RoleOp::Alter {
                id,
                login,
                superuser,
                inherit,
                verifier,
            } => {
                let mut role = self.existing_role(id)?.clone();
                role.login = login.unwrap_or(role.login);
                role.superuser = superuser.unwrap_or(role.superuser);
                role.inherit = inherit.unwrap_or(role.inherit);
                self.transaction.execute(
                    "UPDATE roles SET login = ?2, superuser = ?3, inherit = ?4 WHERE id = ?1",
                    params![id.to_string(), role.login, role.superuser, role.inherit],
                )?;
                if let Some(verifier) = verifier {
                    role.has_password = verifier.is_some();
                    self.transaction.execute(
                        "UPDATE roles SET password = ?2 WHERE id = ?1",
                        params![id.to_string(), verifier.map(|v| v.0)],
                    )?;
                }
                self.state.roles.insert(id, role);
                Ok(())
            }
            RoleOp::Drop(id) => {
                self.existing_role(id)?;
                for statement in [
                    "DELETE FROM role_members WHERE role_id = ?1 OR member_id = ?1",
                    "DELETE FROM object_privileges WHERE grantee_id = ?1",
                    "DELETE FROM roles WHERE id = ?1",
                ] {
                    self.transaction
                        .execute(statement, params![id.to_string()])?;
                }
                self.state.roles.remove(&id);
                self.state
                    .role_memberships
                    .retain(|m| m.role != id && m.member != id);
                for acl in self.state.grants.values_mut() {
                    acl.retain(|item| item.grantee != Grantee::Role(id));
                }
                Ok(())
            }
            RoleOp::Grant {
                role,
                member,
                grantor,
            } => {
                self.existing_role(role)?;
                self.existing_role(member)?;
                self.transaction.execute(
                    "INSERT OR IGNORE INTO role_members (role_id, member_id, grantor_id)
                     VALUES (?1, ?2, ?3)",
                    params![role.to_string(), member.to_string(), grantor.to_string()],
                )?;
                let memberships = &mut self.state.role_memberships;
                if !memberships
                    .iter()
                    .any(|m| m.role == role && m.member == member)
                {
                    memberships.push(RoleMembership {
                        role,
                        member,
                        grantor,
                    });
                    memberships.sort();
                }
                Ok(())
            }
            RoleOp::Revoke { role, member } => {
                self.transaction.execute(
                    "DELETE FROM role_members WHERE role_id = ?1 AND member_id = ?2",
                    params![role.to_string(), member.to_string()],
                )?;
                self.state
                    .role_memberships
                    .retain(|m| !(m.role == role && m.member == member));
                Ok(())
            }
            RoleOp::OwnCreated { owner } => {
                let created: Vec<ObjectRef> = self
                    .state
                    .items
                    .keys()
                    .filter(|id| !self.old.items.contains_key(id))
                    .map(|id| ObjectRef::Item(*id))
                    .chain(
                        self.state
                            .clusters
                            .keys()
                            .filter(|id| !self.old.clusters.contains_key(id))
                            .map(|id| ObjectRef::Cluster(*id)),
                    )
                    .chain(
                        self.state
                            .schemas
                            .keys()
                            .filter(|name| !self.old.schemas.contains_key(*name))
                            .map(|name| ObjectRef::Schema(name.clone())),
                    )
                    .collect();
                for object in created {
                    self.set_owner(object, owner)?;
                }
                Ok(())
            }
            RoleOp::SetOwner { object, owner } => {
                self.existing_role(owner)?;
                self.set_owner(object, owner)
            }
            RoleOp::GrantPrivileges {
                object,
                grantee,
                grantor,
                privileges,
            } => {
                let acl = self.state.grants.entry(object.clone()).or_default();
                if !acl
                    .iter()
                    .any(|i| i.grantee == grantee && i.grantor == grantor)
                {
                    acl.push(AclItem {
                        grantee,
                        grantor,
                        privileges: Vec::new(),
                    });
                    acl.sort();
                }
                let item = acl
                    .iter_mut()
                    .find(|i| i.grantee == grantee && i.grantor == grantor)
                    .ok_or_else(|| CatalogError::internal("an ACL item vanished"))?;
                item.privileges.extend(privileges);
                item.privileges.sort();
                item.privileges.dedup();
                let letters = acl_letters(&item.privileges);
                self.transaction.execute(
                    "INSERT INTO object_privileges (object, grantee_id, grantor_id, privileges)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (object, grantee_id, grantor_id)
                     DO UPDATE SET privileges = excluded.privileges",
                    params![
                        object.to_string(),
                        grantee.to_string(),
                        grantor.to_string(),
                        letters
                    ],
                )?;
                Ok(())
            }
            RoleOp::RevokePrivileges {
                object,
                grantee,
                privileges,
            } => {
                let Some(acl) = self.state.grants.get_mut(&object) else {
                    return Ok(());
                };
                for item in acl.iter_mut().filter(|i| i.grantee == grantee) {
                    item.privileges.retain(|p| !privileges.contains(p));
                    let letters = acl_letters(&item.privileges);
                    self.transaction.execute(
                        "UPDATE object_privileges SET privileges = ?4
                         WHERE object = ?1 AND grantee_id = ?2 AND grantor_id = ?3",
                        params![
                            object.to_string(),
                            grantee.to_string(),
                            item.grantor.to_string(),
                            letters
                        ],
                    )?;
                }
                acl.retain(|i| !i.privileges.is_empty());
                self.transaction.execute(
                    "DELETE FROM object_privileges WHERE object = ?1 AND privileges = ''",
                    params![object.to_string()],
                )?;
                Ok(())
            }
        }
    }

    fn set_owner(&mut self, object: ObjectRef, owner: RoleId) -> Result<(), CatalogError> {
        self.transaction.execute(
            "INSERT INTO object_owners (object, owner_id) VALUES (?1, ?2)
             ON CONFLICT (object) DO UPDATE SET owner_id = excluded.owner_id",
            params![object.to_string(), owner.to_string()],
        )?;
        self.state.owners.insert(object, owner);
        Ok(())
    }

    /// Forgets the owner and grants of a dropped item, cluster or schema.
    pub(super) fn forget_access(&mut self, object: ObjectRef) -> Result<(), CatalogError> {
        for statement in [
            "DELETE FROM object_owners WHERE object = ?1",
            "DELETE FROM object_privileges WHERE object = ?1",
        ] {
            self.transaction
                .execute(statement, params![object.to_string()])?;
        }
        self.state.owners.remove(&object);
        self.state.grants.remove(&object);
        Ok(())
    }

    fn existing_role(&self, id: RoleId) -> Result<&Role, CatalogError> {
        let name = self
            .old
            .role(id)
            .map(|role| role.name.clone())
            .unwrap_or_else(|| id.to_string());
        self.state
            .roles
            .get(&id)
            .ok_or_else(|| CatalogError::Rejected(unknown_role(&name)))
    }

    fn create_role(
        &mut self,
        name: String,
        login: bool,
        superuser: bool,
        inherit: bool,
        verifier: Option<Verifier>,
    ) -> Result<(), CatalogError> {
        if self.state.role_by_name(&name).is_some() {
            return Err(CatalogError::Rejected(PlanError::new(
                floe_repr::SqlState::DUPLICATE_OBJECT,
                format!("role '{name}' already exists"),
            )));
        }
        let id = RoleId::User(allocate(self.transaction, "role")?);
        let oid = u32::try_from(allocate(self.transaction, "oid")?)
            .map_err(|_| CatalogError::Corrupt("object ids exhausted".into()))?;
        self.transaction.execute(
            "INSERT INTO roles (id, oid, name, login, superuser, inherit, password)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id.to_string(),
                oid,
                name,
                login,
                superuser,
                inherit,
                verifier.as_ref().map(|v| v.0.clone())
            ],
        )?;
        let role = role_row(id, oid, name, login, superuser, inherit, verifier.is_some());
        self.state.roles.insert(id, role);
        Ok(())
    }
}

/// The in-memory role for one row of the `roles` table (`has_password`: its
/// `password` column is set). Creating a role and loading the catalog both build
/// it here, so the two cannot disagree on the mapping.
fn role_row(
    id: RoleId,
    oid: u32,
    name: String,
    login: bool,
    superuser: bool,
    inherit: bool,
    has_password: bool,
) -> Role {
    Role {
        id,
        oid,
        name,
        login,
        superuser,
        inherit,
        has_password,
    }
}

/// Loads roles and memberships into the state.
pub(crate) fn load_roles(
    connection: &rusqlite::Connection,
    state: &mut crate::CatalogState,
) -> Result<(), CatalogError> {
    crate::for_each_row(
        connection,
        "SELECT id, oid, name, login, superuser, inherit, password IS NOT NULL FROM roles",
        |row: (String, u32, String, bool, bool, bool, bool)| {
            let (id, oid, name, login, superuser, inherit, has_password) = row;
            let id: RoleId = crate::stored_id(&id, "role id")?;
            let role = role_row(id, oid, name, login, superuser, inherit, has_password);
            state.roles.insert(id, role);
            Ok(())
        },
    )?;
    crate::for_each_row(
        connection,
        "SELECT role_id, member_id, grantor_id FROM role_members",
        |row: (String, String, String)| {
            let (role, member, grantor) = row;
            state.role_memberships.push(RoleMembership {
                role: crate::stored_id(&role, "role id")?,
                member: crate::stored_id(&member, "role id")?,
                grantor: crate::stored_id(&grantor, "role id")?,
            });
            Ok(())
        },
    )?;
    state.role_memberships.sort();
    load_access(connection, state)
}

fn acl_letters(privileges: &[Privilege]) -> String {
    privileges
        .iter()
        .map(|p| floe_sql::privilege::acl_char(*p))
        .collect()
}

/// Loads owners and grants.
fn load_access(
    connection: &rusqlite::Connection,
    state: &mut crate::CatalogState,
) -> Result<(), CatalogError> {
    let corrupt = |e: String| CatalogError::Corrupt(e);
    crate::for_each_row(
        connection,
        "SELECT object, owner_id FROM object_owners",
        |row: (String, String)| {
            let (object, owner) = row;
            let object: ObjectRef = object.parse().map_err(corrupt)?;
            state
                .owners
                .insert(object, crate::stored_id(&owner, "role id")?);
            Ok(())
        },
    )?;
    crate::for_each_row(
        connection,
        "SELECT object, grantee_id, grantor_id, privileges FROM object_privileges",
        |row: (String, String, String, String)| {
            let (object, grantee, grantor, letters) = row;
            let object: ObjectRef = object.parse().map_err(corrupt)?;
            let privileges = letters
                .chars()
                .map(|c| {
                    privilege_of_char(c)
                        .ok_or_else(|| CatalogError::Corrupt(format!("unknown privilege {c:?}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let acl = state.grants.entry(object).or_default();
            acl.push(AclItem {
                grantee: grantee.parse().map_err(corrupt)?,
                grantor: crate::stored_id(&grantor, "role id")?,
                privileges,
            });
            acl.sort();
            Ok(())
        },
    )?;
    Ok(())
}

impl crate::Catalog {
    /// The SCRAM verifier of a role that may log in with a password; `None` for
    /// an unknown role, a role without LOGIN, or one without a password.
    pub fn login_verifier(&self, name: &str) -> Result<Option<String>, CatalogError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .connection
            .query_row(
                "SELECT password FROM roles WHERE name = ?1 AND login = 1",
                params![name],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
    }
}

#[cfg(test)]
mod tests {
    use floe_repr::RoleId;
    use floe_sql::catalog::PlanCatalog;
    use floe_sql::privilege::{Grantee, ObjectRef, Privilege};
    use floe_sql::role::SUPERUSER_ROLE_ID;

    use super::{RoleOp, Verifier};
    use crate::{Catalog, Op};

    fn create(name: &str, verifier: Option<&str>) -> Op {
        Op::Role(RoleOp::Create {
            name: name.into(),
            login: true,
            superuser: false,
            inherit: true,
            verifier: verifier.map(|v| Verifier(v.into())),
        })
    }

    /// Roles, memberships, owners and grants are durable; only the verifier is
    /// stored; dropping a role takes its memberships and grants with it.
    #[test]
    fn roles_and_grants_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let quickstart;
        {
            let mut catalog = Catalog::open(dir.path(), None).unwrap();
            quickstart = catalog.state().cluster_by_name("quickstart").unwrap().id;
            // The superuser exists from the start; PUBLIC uses the defaults.
            assert!(catalog.state().role(SUPERUSER_ROLE_ID).unwrap().superuser);
            assert_eq!(
                catalog.state().grants(&ObjectRef::Cluster(quickstart))[0].to_text(),
                "=U/u1"
            );
            catalog
                .transact(vec![
                    create("alice", Some("SCRAM-SHA-256$4096:c2FsdA==$a:b")),
                    create("readers", None),
                ])
                .unwrap();
            let alice = catalog.state().role_by_name("alice").unwrap().id;
            let readers = catalog.state().role_by_name("readers").unwrap().id;
            assert_eq!((alice, readers), (RoleId::User(2), RoleId::User(3)));
            catalog
                .transact(vec![
                    Op::Role(RoleOp::Grant {
                        role: readers,
                        member: alice,
                        grantor: SUPERUSER_ROLE_ID,
                    }),
                    Op::Role(RoleOp::SetOwner {
                        object: ObjectRef::Cluster(quickstart),
                        owner: alice,
                    }),
                    Op::Role(RoleOp::GrantPrivileges {
                        object: ObjectRef::Database,
                        grantee: Grantee::Role(readers),
                        grantor: SUPERUSER_ROLE_ID,
                        privileges: vec![Privilege::Create, Privilege::Usage],
                    }),
                ])
                .unwrap();
        }
        let mut catalog = Catalog::open(dir.path(), None).unwrap();
        let state = catalog.state().clone();
        let alice = state.role_by_name("alice").unwrap();
        assert!(alice.has_password && alice.login && !alice.superuser);
        assert_eq!(
            catalog.login_verifier("alice").unwrap().as_deref(),
            Some("SCRAM-SHA-256$4096:c2FsdA==$a:b")
        );
        assert_eq!(catalog.login_verifier("readers").unwrap(), None);
        assert_eq!(state.role_memberships().len(), 1);
        assert_eq!(state.owner(&ObjectRef::Cluster(quickstart)), alice.id);
        let database: Vec<String> = state
            .grants(&ObjectRef::Database)
            .iter()
            .map(|item| item.to_text())
            .collect();
        assert_eq!(database, ["=U/u1", "u3=UC/u1"]);
        assert_eq!(state.owned_by(alice.id), ["cluster quickstart"]);

        let readers = state.role_by_name("readers").unwrap().id;
        catalog
            .transact(vec![
                Op::Role(RoleOp::RevokePrivileges {
                    object: ObjectRef::Database,
                    grantee: Grantee::Role(readers),
                    privileges: vec![Privilege::Create],
                }),
                Op::Role(RoleOp::Drop(alice.id)),
            ])
            .unwrap();
        drop(catalog);
        let catalog = Catalog::open(dir.path(), None).unwrap();
        let state = catalog.state();
        assert!(state.role_by_name("alice").is_none());
        assert!(state.role_memberships().is_empty());
        let database: Vec<String> = state
            .grants(&ObjectRef::Database)
            .iter()
            .map(|item| item.to_text())
            .collect();
        assert_eq!(database, ["=U/u1", "u3=U/u1"]);
    }
}
