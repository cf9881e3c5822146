//! Roles: their catalog form and the planning of `CREATE/ALTER/DROP ROLE` and
//! `GRANT/REVOKE` of role membership. Who may run them is the adapter's check
//! (`adapter::rbac`), as every privilege check is: planning only resolves names
//! and applies the statement's own rules.

use floe_repr::{RoleId, SqlState};
use floe_sql_parser::ast::{DropObjectsStatement, RoleAttribute, RolePassword, RoleStatement};
use sqlparser::ast::Ident;

use crate::catalog::PlanCatalog;
use crate::planner::{PlanNotice, normalize_ident};
use crate::{Plan, PlanError};

/// The superuser every data directory has (`u1`), as in Materialize.
pub const SUPERUSER_ROLE: &str = "materialize";
pub const SUPERUSER_ROLE_ID: RoleId = RoleId::User(1);

/// A role as the catalog holds it. Its password is not here: only the durable
/// catalog keeps the SCRAM verifier, for the authenticator to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub id: RoleId,
    pub oid: u32,
    pub name: String,
    pub login: bool,
    pub superuser: bool,
    pub inherit: bool,
    /// Whether a password is set (`rolpassword` shows `********`, never it).
    pub has_password: bool,
}

/// `member` is a member of `role` since `grantor` granted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RoleMembership {
    pub role: RoleId,
    pub member: RoleId,
    pub grantor: RoleId,
}

/// A password on its way to being hashed; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainPassword(pub String);

impl std::fmt::Debug for PlainPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("'********'")
    }
}

/// The attributes a statement sets (`None`: left as they are, or the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleAttributes {
    pub login: Option<bool>,
    pub superuser: Option<bool>,
    pub inherit: Option<bool>,
    /// `Some(None)`: `PASSWORD NULL`.
    pub password: Option<Option<PlainPassword>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RolePlan {
    CreateRole {
        name: String,
        attributes: RoleAttributes,
    },
    AlterRole {
        id: RoleId,
        name: String,
        attributes: RoleAttributes,
    },
    DropRoles {
        ids: Vec<RoleId>,
    },
    /// Memberships to add; those that exist already were left out with a notice.
    GrantRoles {
        grants: Vec<(RoleId, RoleId)>,
    },
    /// Memberships to remove; those that do not exist were left out with a notice.
    RevokeRoles {
        revokes: Vec<(RoleId, RoleId)>,
    },
}

/// The role named `ident`, or `unknown role 'x'` (42704).
pub fn resolve_role<'a>(
    catalog: &'a dyn PlanCatalog,
    ident: &Ident,
) -> Result<&'a Role, PlanError> {
    let name = normalize_ident(ident);
    catalog
        .role_by_name(&name)
        .ok_or_else(|| unknown_role(&name))
}

pub fn unknown_role(name: &str) -> PlanError {
    PlanError::new(SqlState::UNDEFINED_OBJECT, format!("unknown role '{name}'"))
}

pub(crate) fn plan_role_statement(
    catalog: &dyn PlanCatalog,
    statement: RoleStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let plan = match statement {
        RoleStatement::CreateRole { name, attributes } => {
            let name = normalize_ident(&name);
            check_role_name(&name)?;
            if catalog.role_by_name(&name).is_some() {
                return Err(PlanError::new(
                    SqlState::DUPLICATE_OBJECT,
                    format!("role '{name}' already exists"),
                ));
            }
            RolePlan::CreateRole {
                name,
                attributes: plan_attributes(attributes)?,
            }
        }
        RoleStatement::AlterRole { name, attributes } => {
            let role = resolve_role(catalog, &name)?;
            RolePlan::AlterRole {
                id: role.id,
                name: role.name.clone(),
                attributes: plan_attributes(attributes)?,
            }
        }
        RoleStatement::GrantRole { roles, members } => {
            let mut grants = Vec::new();
            for (role, member) in role_pairs(catalog, &roles, &members)? {
                if is_member(catalog, member.id, role.id) {
                    notices.push(notice(format!(
                        "role \"{}\" is already a member of role \"{}\"",
                        member.name, role.name
                    )));
                } else if member.id == role.id || is_member(catalog, role.id, member.id) {
                    return Err(PlanError::new(
                        SqlState::INVALID_GRANT_OPERATION,
                        format!(
                            "role \"{}\" is a member of role \"{}\"",
                            role.name, member.name
                        ),
                    ));
                } else {
                    grants.push((role.id, member.id));
                }
            }
            RolePlan::GrantRoles { grants }
        }
        RoleStatement::RevokeRole { roles, members } => {
            let mut revokes = Vec::new();
            for (role, member) in role_pairs(catalog, &roles, &members)? {
                let direct = catalog
                    .role_memberships()
                    .iter()
                    .any(|m| m.role == role.id && m.member == member.id);
                if direct {
                    revokes.push((role.id, member.id));
                } else {
                    notices.push(notice(format!(
                        "role \"{}\" is not a member of role \"{}\"",
                        member.name, role.name
                    )));
                }
            }
            RolePlan::RevokeRoles { revokes }
        }
        RoleStatement::GrantPrivileges(_)
        | RoleStatement::RevokePrivileges(_)
        | RoleStatement::AlterOwner { .. } => {
            return crate::privilege::plan_privilege_statement(catalog, statement, notices);
        }
    };
    Ok(Plan::Role(plan))
}

fn notice(message: String) -> PlanNotice {
    PlanNotice {
        message,
        hint: None,
    }
}

/// Every (role, member) pair the statement names, resolved.
fn role_pairs<'a>(
    catalog: &'a dyn PlanCatalog,
    roles: &[Ident],
    members: &[Ident],
) -> Result<Vec<(&'a Role, &'a Role)>, PlanError> {
    let mut pairs = Vec::new();
    for role in roles {
        let role = resolve_role(catalog, role)?;
        for member in members {
            pairs.push((role, resolve_role(catalog, member)?));
        }
    }
    Ok(pairs)
}

/// Whether `member` is a member of `role`, directly or through other roles.
pub fn is_member(catalog: &dyn PlanCatalog, member: RoleId, role: RoleId) -> bool {
    let memberships = catalog.role_memberships();
    let mut pending = vec![member];
    let mut seen = Vec::new();
    while let Some(next) = pending.pop() {
        for granted in memberships.iter().filter(|m| m.member == next) {
            if granted.role == role {
                return true;
            }
            if !seen.contains(&granted.role) {
                seen.push(granted.role);
                pending.push(granted.role);
            }
        }
    }
    false
}

/// Role names Materialize and PostgreSQL keep for themselves.
fn check_role_name(name: &str) -> Result<(), PlanError> {
    if name.starts_with("mz_") || name.starts_with("pg_") || name == "public" {
        return Err(PlanError::new(
            SqlState::RESERVED_NAME,
            format!("role name \"{name}\" is reserved"),
        ));
    }
    Ok(())
}

fn plan_attributes(attributes: Vec<RoleAttribute>) -> Result<RoleAttributes, PlanError> {
    let mut planned = RoleAttributes::default();
    fn set<T>(slot: &mut Option<T>, value: T) -> Result<(), PlanError> {
        if slot.is_some() {
            return Err(PlanError::syntax("conflicting or redundant options"));
        }
        *slot = Some(value);
        Ok(())
    }
    for attribute in attributes {
        match attribute {
            RoleAttribute::Login(on) => set(&mut planned.login, on)?,
            RoleAttribute::Superuser(on) => set(&mut planned.superuser, on)?,
            RoleAttribute::Inherit(true) => set(&mut planned.inherit, true)?,
            RoleAttribute::Inherit(false) => {
                return Err(PlanError::unsupported(
                    "non inherit roles are not supported",
                ));
            }
            RoleAttribute::Password(password) => {
                let password = match password {
                    Some(RolePassword::Clear(text)) => Some(PlainPassword(text)),
                    Some(RolePassword::Redacted) => {
                        return Err(PlanError::syntax("a redacted password cannot be set"));
                    }
                    None => None,
                };
                set(&mut planned.password, password)?;
            }
            RoleAttribute::Other(word) => {
                return Err(PlanError::unsupported(format!(
                    "{word} attribute is not supported"
                )));
            }
        }
    }
    Ok(planned)
}

/// `DROP ROLE [IF EXISTS] r, ...`.
pub(crate) fn plan_drop_roles(
    catalog: &dyn PlanCatalog,
    statement: &DropObjectsStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let mut ids = Vec::new();
    for name in &statement.names {
        let name = crate::planner::name_parts(name)?.join(".");
        let Some(role) = catalog.role_by_name(&name) else {
            if statement.if_exists {
                notices.push(notice(format!("role \"{name}\" does not exist, skipping")));
                continue;
            }
            return Err(unknown_role(&name));
        };
        if role.id == SUPERUSER_ROLE_ID {
            return Err(PlanError::new(
                SqlState::INSUFFICIENT_PRIVILEGE,
                format!("cannot drop role \"{name}\": it is the superuser"),
            ));
        }
        if let Some(owned) = catalog.owned_by(role.id).first() {
            return Err(PlanError::new(
                SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("role \"{name}\" cannot be dropped because some objects depend on it"),
            )
            .with_detail(format!("owner of {owned}"))
            .with_hint("Drop the objects or give them to another role with ALTER ... OWNER TO."));
        }
        if !ids.contains(&role.id) {
            ids.push(role.id);
        }
    }
    Ok(Plan::Role(RolePlan::DropRoles { ids }))
}

#[cfg(test)]
mod tests {
    use floe_repr::{ClusterId, GlobalId};
    use floe_sql_parser::parse_statement;

    use super::*;
    use crate::catalog::{CatalogItem, Cluster, QualifiedName};
    use crate::{SessionContext, plan};

    /// Roles `materialize` (u1, superuser), `alice` (u2) and `readers` (u3), alice
    /// a member of readers.
    struct Roles {
        roles: Vec<Role>,
        memberships: Vec<RoleMembership>,
    }

    fn role(id: u64, name: &str, superuser: bool) -> Role {
        Role {
            id: RoleId::User(id),
            oid: 20_000 + id as u32,
            name: name.into(),
            login: true,
            superuser,
            inherit: true,
            has_password: false,
        }
    }

    impl PlanCatalog for Roles {
        fn item_by_name(&self, _: &QualifiedName) -> Option<&CatalogItem> {
            None
        }
        fn item(&self, _: GlobalId) -> Option<&CatalogItem> {
            None
        }
        fn dependents(&self, _: GlobalId) -> Vec<GlobalId> {
            Vec::new()
        }
        fn cluster_by_name(&self, _: &str) -> Option<&Cluster> {
            None
        }
        fn cluster(&self, _: ClusterId) -> Option<&Cluster> {
            None
        }
        fn items_in_cluster(&self, _: ClusterId) -> Vec<GlobalId> {
            Vec::new()
        }
        fn is_system_relation(&self, _: &str, _: &str) -> bool {
            false
        }
        fn role_by_name(&self, name: &str) -> Option<&Role> {
            self.roles.iter().find(|r| r.name == name)
        }
        fn role(&self, id: RoleId) -> Option<&Role> {
            self.roles.iter().find(|r| r.id == id)
        }
        fn role_memberships(&self) -> &[RoleMembership] {
            &self.memberships
        }
    }

    fn run(sql: &str) -> (Result<Plan, PlanError>, Vec<PlanNotice>) {
        let catalog = Roles {
            roles: vec![
                role(1, "materialize", true),
                role(2, "alice", false),
                role(3, "readers", false),
            ],
            memberships: vec![RoleMembership {
                role: RoleId::User(3),
                member: RoleId::User(2),
                grantor: RoleId::User(1),
            }],
        };
        let statement = parse_statement(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let session = SessionContext::new("quickstart".into(), "public");
        let mut notices = Vec::new();
        (plan(&catalog, &session, statement, &mut notices), notices)
    }

    #[test]
    fn role_statements_plan() {
        let (plan, _) = run("CREATE ROLE bob WITH LOGIN PASSWORD 'pw' SUPERUSER");
        assert_eq!(
            plan.unwrap(),
            Plan::Role(RolePlan::CreateRole {
                name: "bob".into(),
                attributes: RoleAttributes {
                    login: Some(true),
                    superuser: Some(true),
                    inherit: None,
                    password: Some(Some(PlainPassword("pw".into()))),
                },
            })
        );
        let (plan, _) = run("ALTER ROLE alice PASSWORD NULL NOLOGIN");
        assert_eq!(
            plan.unwrap(),
            Plan::Role(RolePlan::AlterRole {
                id: RoleId::User(2),
                name: "alice".into(),
                attributes: RoleAttributes {
                    login: Some(false),
                    password: Some(None),
                    ..Default::default()
                },
            })
        );
        let (plan, notices) = run("GRANT readers, alice TO materialize, alice");
        // alice is already in readers (a notice); alice into alice is a cycle.
        assert_eq!(
            plan.unwrap_err().message,
            "role \"alice\" is a member of role \"alice\""
        );
        assert_eq!(
            notices[0].message,
            "role \"alice\" is already a member of role \"readers\""
        );
        let (plan, notices) = run("REVOKE readers FROM alice, materialize");
        assert_eq!(
            plan.unwrap(),
            Plan::Role(RolePlan::RevokeRoles {
                revokes: vec![(RoleId::User(3), RoleId::User(2))]
            })
        );
        assert_eq!(
            notices[0].message,
            "role \"materialize\" is not a member of role \"readers\""
        );
        let (plan, notices) = run("DROP ROLE IF EXISTS nobody, alice");
        assert_eq!(
            plan.unwrap(),
            Plan::Role(RolePlan::DropRoles {
                ids: vec![RoleId::User(2)]
            })
        );
        assert_eq!(
            notices[0].message,
            "role \"nobody\" does not exist, skipping"
        );
    }

    #[test]
    fn role_statement_errors() {
        for (sql, code, message) in [
            ("CREATE ROLE alice", "42710", "role 'alice' already exists"),
            (
                "CREATE ROLE pg_x",
                "42939",
                "role name \"pg_x\" is reserved",
            ),
            (
                "CREATE ROLE public",
                "42939",
                "role name \"public\" is reserved",
            ),
            (
                "CREATE ROLE x NOINHERIT",
                "0A000",
                "non inherit roles are not supported",
            ),
            (
                "CREATE ROLE x CREATEDB",
                "0A000",
                "CREATEDB attribute is not supported",
            ),
            (
                "CREATE ROLE x LOGIN NOLOGIN",
                "42601",
                "conflicting or redundant options",
            ),
            ("ALTER ROLE nobody LOGIN", "42704", "unknown role 'nobody'"),
            ("GRANT readers TO nobody", "42704", "unknown role 'nobody'"),
            (
                "GRANT alice TO readers",
                "0LP01",
                "role \"alice\" is a member of role \"readers\"",
            ),
            ("DROP ROLE nobody", "42704", "unknown role 'nobody'"),
            (
                "DROP ROLE materialize",
                "42501",
                "cannot drop role \"materialize\": it is the superuser",
            ),
        ] {
            let error = run(sql).0.expect_err(sql);
            assert_eq!(
                (error.code.code(), error.message.as_str()),
                (code, message),
                "{sql}"
            );
        }
    }

    #[test]
    fn passwords_never_print() {
        let statement = parse_statement("CREATE ROLE bob LOGIN PASSWORD 'hunter2'").unwrap();
        let floe_sql_parser::ast::Statement::Role(role) = statement else {
            panic!("not a role statement");
        };
        assert_eq!(
            role.redacted().to_string(),
            "CREATE ROLE bob LOGIN PASSWORD '********'"
        );
        assert!(!format!("{role:?}").contains("hunter2"));
        let (plan, _) = run("CREATE ROLE bob PASSWORD 'hunter2'");
        assert!(!format!("{plan:?}").contains("hunter2"));
    }
}
