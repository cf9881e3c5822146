//! Roles and privileges: `CREATE/ALTER ROLE`, `GRANT/REVOKE` of role membership
//! and of privileges, `ALTER <kind> name OWNER TO role`. (`DROP ROLE` is a
//! [`super::DropObjectsStatement`].)

use std::fmt;

use sqlparser::ast::{Ident, ObjectName};

use super::ObjectType;

/// The statements of roles and privileges.
#[derive(Debug, Clone, PartialEq)]
pub enum RoleStatement {
    /// `CREATE ROLE name [WITH] attribute ...`
    CreateRole {
        name: Ident,
        attributes: Vec<RoleAttribute>,
    },
    /// `ALTER ROLE name [WITH] attribute ...`
    AlterRole {
        name: Ident,
        attributes: Vec<RoleAttribute>,
    },
    /// `GRANT role, ... TO member, ...`
    GrantRole {
        roles: Vec<Ident>,
        members: Vec<Ident>,
    },
    /// `REVOKE role, ... FROM member, ...`
    RevokeRole {
        roles: Vec<Ident>,
        members: Vec<Ident>,
    },
    /// `GRANT privilege, ... ON [kind] name, ... TO role, ...`
    GrantPrivileges(PrivilegeStatement),
    /// `REVOKE privilege, ... ON [kind] name, ... FROM role, ...`
    RevokePrivileges(PrivilegeStatement),
    /// `ALTER kind [IF EXISTS] name OWNER TO role`
    AlterOwner {
        object_type: ObjectType,
        if_exists: bool,
        name: ObjectName,
        new_owner: Ident,
    },
}

/// An attribute of `CREATE ROLE` / `ALTER ROLE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleAttribute {
    Login(bool),
    Superuser(bool),
    Inherit(bool),
    /// `PASSWORD 'p'` (`Some`) or `PASSWORD NULL` (`None`).
    Password(Option<RolePassword>),
    /// Any other word (`CREATEDB`, `REPLICATION`, ...): refused by the planner,
    /// which names it.
    Other(String),
}

/// A password in a statement. Shown as `'********'` once redacted (in every error
/// text and log line): only its SCRAM verifier is ever stored.
#[derive(Clone, PartialEq, Eq)]
pub enum RolePassword {
    Clear(String),
    Redacted,
}

impl fmt::Debug for RolePassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("'********'")
    }
}

impl fmt::Display for RolePassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RolePassword::Clear(text) => write!(f, "'{}'", text.replace('\'', "''")),
            RolePassword::Redacted => f.write_str("'********'"),
        }
    }
}

impl fmt::Display for RoleAttribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = |f: &mut fmt::Formatter<'_>, on: bool, word: &str| {
            write!(f, "{}{word}", if on { "" } else { "NO" })
        };
        match self {
            RoleAttribute::Login(on) => flag(f, *on, "LOGIN"),
            RoleAttribute::Superuser(on) => flag(f, *on, "SUPERUSER"),
            RoleAttribute::Inherit(on) => flag(f, *on, "INHERIT"),
            RoleAttribute::Password(Some(password)) => write!(f, "PASSWORD {password}"),
            RoleAttribute::Password(None) => f.write_str("PASSWORD NULL"),
            RoleAttribute::Other(word) => f.write_str(word),
        }
    }
}

/// A privilege of `GRANT` / `REVOKE`, in the order of PostgreSQL's ACL letters
/// (`arwdUC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Privilege {
    Insert,
    Select,
    Update,
    Delete,
    Usage,
    Create,
}

impl Privilege {
    pub const ALL: [Privilege; 6] = [
        Privilege::Insert,
        Privilege::Select,
        Privilege::Update,
        Privilege::Delete,
        Privilege::Usage,
        Privilege::Create,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
            Privilege::Usage => "USAGE",
            Privilege::Create => "CREATE",
        }
    }

    /// The privilege named by an upper-case word.
    pub fn from_word(word: &str) -> Option<Privilege> {
        Privilege::ALL.into_iter().find(|p| p.name() == word)
    }
}

/// The body of a privilege `GRANT` or `REVOKE`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivilegeStatement {
    /// `None` for `ALL [PRIVILEGES]`.
    pub privileges: Option<Vec<Privilege>>,
    /// The kind written after `ON` (a table when none is).
    pub object_type: ObjectType,
    /// The objects named; empty with `all`.
    pub names: Vec<ObjectName>,
    /// `ON ALL <kind>s [IN SCHEMA s, ... | IN DATABASE d, ...]`.
    pub all: Option<AllObjects>,
    pub roles: Vec<Ident>,
}

/// Where `ON ALL <kind>s` looks.
#[derive(Debug, Clone, PartialEq)]
pub enum AllObjects {
    Everywhere,
    InSchemas(Vec<ObjectName>),
    InDatabases(Vec<ObjectName>),
}

/// The plural of a kind, as `ON ALL TABLES` writes it.
pub fn plural(object_type: ObjectType) -> &'static str {
    match object_type {
        ObjectType::Table => "TABLES",
        ObjectType::View => "VIEWS",
        ObjectType::MaterializedView => "MATERIALIZED VIEWS",
        ObjectType::Source => "SOURCES",
        ObjectType::Sink => "SINKS",
        ObjectType::Secret => "SECRETS",
        ObjectType::Connection => "CONNECTIONS",
        ObjectType::Cluster => "CLUSTERS",
        ObjectType::Schema => "SCHEMAS",
        ObjectType::Database => "DATABASES",
        ObjectType::Type => "TYPES",
        ObjectType::Index => "INDEXES",
        ObjectType::ClusterReplica => "CLUSTER REPLICAS",
        ObjectType::Role => "ROLES",
    }
}

fn comma_separated<T: fmt::Display>(f: &mut fmt::Formatter<'_>, values: &[T]) -> fmt::Result {
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{value}")?;
    }
    Ok(())
}

impl PrivilegeStatement {
    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, verb: &str, to: &str) -> fmt::Result {
        write!(f, "{verb} ")?;
        match &self.privileges {
            None => f.write_str("ALL PRIVILEGES")?,
            Some(privileges) => {
                let names: Vec<&str> = privileges.iter().map(|p| p.name()).collect();
                comma_separated(f, &names)?;
            }
        }
        match &self.all {
            None => {
                write!(f, " ON {} ", self.object_type)?;
                comma_separated(f, &self.names)?;
            }
            Some(all) => {
                write!(f, " ON ALL {}", plural(self.object_type))?;
                match all {
                    AllObjects::Everywhere => {}
                    AllObjects::InSchemas(names) => {
                        f.write_str(" IN SCHEMA ")?;
                        comma_separated(f, names)?;
                    }
                    AllObjects::InDatabases(names) => {
                        f.write_str(" IN DATABASE ")?;
                        comma_separated(f, names)?;
                    }
                }
            }
        }
        write!(f, " {to} ")?;
        comma_separated(f, &self.roles)
    }
}

impl fmt::Display for RoleStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoleStatement::CreateRole { name, attributes }
            | RoleStatement::AlterRole { name, attributes } => {
                let verb = if matches!(self, RoleStatement::CreateRole { .. }) {
                    "CREATE"
                } else {
                    "ALTER"
                };
                write!(f, "{verb} ROLE {name}")?;
                for attribute in attributes {
                    write!(f, " {attribute}")?;
                }
                Ok(())
            }
            RoleStatement::GrantRole { roles, members } => {
                f.write_str("GRANT ")?;
                comma_separated(f, roles)?;
                f.write_str(" TO ")?;
                comma_separated(f, members)
            }
            RoleStatement::RevokeRole { roles, members } => {
                f.write_str("REVOKE ")?;
                comma_separated(f, roles)?;
                f.write_str(" FROM ")?;
                comma_separated(f, members)
            }
            RoleStatement::GrantPrivileges(body) => body.fmt_with(f, "GRANT", "TO"),
            RoleStatement::RevokePrivileges(body) => body.fmt_with(f, "REVOKE", "FROM"),
            RoleStatement::AlterOwner {
                object_type,
                if_exists,
                name,
                new_owner,
            } => write!(
                f,
                "ALTER {object_type} {}{name} OWNER TO {new_owner}",
                if *if_exists { "IF EXISTS " } else { "" }
            ),
        }
    }
}

impl RoleStatement {
    /// The statement with every password replaced by `'********'`: what error
    /// texts and logs may show.
    pub fn redacted(&self) -> RoleStatement {
        let mut statement = self.clone();
        if let RoleStatement::CreateRole { attributes, .. }
        | RoleStatement::AlterRole { attributes, .. } = &mut statement
        {
            for attribute in attributes {
                if let RoleAttribute::Password(Some(password)) = attribute {
                    *password = RolePassword::Redacted;
                }
            }
        }
        statement
    }
}
