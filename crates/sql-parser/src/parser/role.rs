//! Parsing of roles and privileges (`crate::ast::RoleStatement`).

use sqlparser::ast::{Ident, ObjectName};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::{
    ParserError, expect_words, expected, parse_if_exists, parse_object_type, parse_words,
    peek_word, peek_words,
};
use crate::ast::*;

/// The role statement that starts here, if one does: `CREATE ROLE`, `ALTER ROLE`,
/// `GRANT`, `REVOKE`, or an `ALTER <kind> ... OWNER TO`.
pub(super) fn parse_role_statement(parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
    let parsed = if peek_words(parser, &["CREATE", "ROLE"]) {
        parse_create_or_alter_role(parser, true)
    } else if peek_words(parser, &["ALTER", "ROLE"]) {
        parse_create_or_alter_role(parser, false)
    } else if peek_words(parser, &["GRANT"]) {
        parse_grant_or_revoke(parser, true)
    } else if peek_words(parser, &["REVOKE"]) {
        parse_grant_or_revoke(parser, false)
    } else if peek_words(parser, &["ALTER"]) && ends_with_owner_to(parser) {
        parse_alter_owner(parser)
    } else {
        return None;
    };
    Some(parsed.map(Statement::Role))
}

/// Whether the statement ahead contains `OWNER TO` (an `ALTER ... OWNER TO`).
fn ends_with_owner_to(parser: &Parser) -> bool {
    let word = |n: usize| match parser.peek_nth_token(n).token {
        Token::Word(word) if word.quote_style.is_none() => Some(word.value.to_uppercase()),
        _ => None,
    };
    let mut n = 1;
    loop {
        match parser.peek_nth_token(n).token {
            Token::SemiColon | Token::EOF => return false,
            _ if word(n).as_deref() == Some("OWNER") && word(n + 1).as_deref() == Some("TO") => {
                return true;
            }
            _ => n += 1,
        }
    }
}

fn parse_create_or_alter_role(
    parser: &mut Parser,
    create: bool,
) -> Result<RoleStatement, ParserError> {
    expect_words(parser, &[if create { "CREATE" } else { "ALTER" }, "ROLE"])?;
    let name = parser.parse_identifier()?;
    parse_words(parser, &["WITH"]);
    let mut attributes = Vec::new();
    while let Some(word) = peek_word(parser, 0) {
        parser.next_token();
        let attribute = match word.as_str() {
            "LOGIN" => RoleAttribute::Login(true),
            "NOLOGIN" => RoleAttribute::Login(false),
            "SUPERUSER" => RoleAttribute::Superuser(true),
            "NOSUPERUSER" => RoleAttribute::Superuser(false),
            "INHERIT" => RoleAttribute::Inherit(true),
            "NOINHERIT" => RoleAttribute::Inherit(false),
            "PASSWORD" => RoleAttribute::Password(parse_password(parser)?),
            other => RoleAttribute::Other(other.to_string()),
        };
        attributes.push(attribute);
    }
    Ok(if create {
        RoleStatement::CreateRole { name, attributes }
    } else {
        RoleStatement::AlterRole { name, attributes }
    })
}

fn parse_password(parser: &mut Parser) -> Result<Option<RolePassword>, ParserError> {
    if parse_words(parser, &["NULL"]) {
        return Ok(None);
    }
    match parser.peek_token().token {
        Token::SingleQuotedString(_) | Token::EscapedStringLiteral(_) => {
            Ok(Some(RolePassword::Clear(parser.parse_literal_string()?)))
        }
        _ => expected(parser, "a password string or NULL"),
    }
}

fn parse_identifiers(parser: &mut Parser) -> Result<Vec<Ident>, ParserError> {
    let mut idents = vec![parser.parse_identifier()?];
    while parser.consume_token(&Token::Comma) {
        idents.push(parser.parse_identifier()?);
    }
    Ok(idents)
}

fn parse_grant_or_revoke(parser: &mut Parser, grant: bool) -> Result<RoleStatement, ParserError> {
    expect_words(parser, &[if grant { "GRANT" } else { "REVOKE" }])?;
    let to = if grant { "TO" } else { "FROM" };
    // `GRANT ALL [PRIVILEGES] ON ...` or a list of privileges then `ON`;
    // otherwise a list of roles (`GRANT r1, r2 TO u`).
    let privileges = if parse_words(parser, &["ALL"]) {
        parse_words(parser, &["PRIVILEGES"]);
        Some(None)
    } else if peek_word(parser, 0)
        .as_deref()
        .and_then(Privilege::from_word)
        .is_some()
    {
        let mut privileges = Vec::new();
        loop {
            let word = peek_word(parser, 0).unwrap_or_default();
            let Some(privilege) = Privilege::from_word(&word) else {
                return expected(
                    parser,
                    "a privilege (SELECT, INSERT, UPDATE, DELETE, USAGE or CREATE)",
                );
            };
            parser.next_token();
            privileges.push(privilege);
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        Some(Some(privileges))
    } else {
        None
    };
    let Some(privileges) = privileges else {
        let roles = parse_identifiers(parser)?;
        expect_words(parser, &[to])?;
        let members = parse_identifiers(parser)?;
        return Ok(if grant {
            RoleStatement::GrantRole { roles, members }
        } else {
            RoleStatement::RevokeRole { roles, members }
        });
    };
    expect_words(parser, &["ON"])?;
    let (object_type, names, all) = match parse_all_objects(parser)? {
        Some((object_type, all)) => (object_type, Vec::new(), Some(all)),
        None => {
            let object_type = parse_target_type(parser);
            (object_type, parse_object_names(parser)?, None)
        }
    };
    expect_words(parser, &[to])?;
    let roles = parse_identifiers(parser)?;
    let body = PrivilegeStatement {
        privileges,
        object_type,
        names,
        all,
        roles,
    };
    Ok(if grant {
        RoleStatement::GrantPrivileges(body)
    } else {
        RoleStatement::RevokePrivileges(body)
    })
}

fn parse_object_names(parser: &mut Parser) -> Result<Vec<ObjectName>, ParserError> {
    let mut names = vec![parser.parse_object_name(false)?];
    while parser.consume_token(&Token::Comma) {
        names.push(parser.parse_object_name(false)?);
    }
    Ok(names)
}

/// `ALL <kind>s [IN SCHEMA s, ... | IN DATABASE d, ...]` after `ON`, if written.
fn parse_all_objects(parser: &mut Parser) -> Result<Option<(ObjectType, AllObjects)>, ParserError> {
    const KINDS: &[ObjectType] = &[
        ObjectType::MaterializedView,
        ObjectType::Table,
        ObjectType::View,
        ObjectType::Source,
        ObjectType::Secret,
        ObjectType::Connection,
        ObjectType::Cluster,
        ObjectType::Schema,
        ObjectType::Database,
        ObjectType::Type,
    ];
    if !peek_words(parser, &["ALL"]) {
        return Ok(None);
    }
    let Some(object_type) = KINDS.iter().copied().find(|kind| {
        let words: Vec<&str> = plural(*kind).split(' ').collect();
        (1..=words.len()).all(|i| peek_word(parser, i).as_deref() == Some(words[i - 1]))
    }) else {
        return Ok(None);
    };
    parse_words(parser, &["ALL"]);
    let words: Vec<&str> = plural(object_type).split(' ').collect();
    parse_words(parser, &words);
    let all = if parse_words(parser, &["IN", "SCHEMA"]) {
        AllObjects::InSchemas(parse_object_names(parser)?)
    } else if parse_words(parser, &["IN", "DATABASE"]) {
        AllObjects::InDatabases(parse_object_names(parser)?)
    } else {
        AllObjects::Everywhere
    };
    Ok(Some((object_type, all)))
}

/// The kind after `ON`; a name alone is a table's (or any relation's).
fn parse_target_type(parser: &mut Parser) -> ObjectType {
    const KINDS: &[(&[&str], ObjectType)] = &[
        (&["MATERIALIZED", "VIEW"], ObjectType::MaterializedView),
        (&["TABLE"], ObjectType::Table),
        (&["VIEW"], ObjectType::View),
        (&["SOURCE"], ObjectType::Source),
        (&["SECRET"], ObjectType::Secret),
        (&["CONNECTION"], ObjectType::Connection),
        (&["CLUSTER"], ObjectType::Cluster),
        (&["SCHEMA"], ObjectType::Schema),
        (&["DATABASE"], ObjectType::Database),
        (&["TYPE"], ObjectType::Type),
    ];
    for (words, kind) in KINDS {
        // The kind word is a kind only when a name follows it (`ON secret TO r`
        // grants on a table named `secret`).
        let followed_by_name = !matches!(
            peek_word(parser, words.len()).as_deref(),
            Some("TO") | Some("FROM")
        );
        if peek_words(parser, words) && followed_by_name {
            parse_words(parser, words);
            return *kind;
        }
    }
    ObjectType::Table
}

fn parse_alter_owner(parser: &mut Parser) -> Result<RoleStatement, ParserError> {
    expect_words(parser, &["ALTER"])?;
    let object_type = parse_object_type(parser)?;
    let if_exists = parse_if_exists(parser);
    let name = parser.parse_object_name(false)?;
    expect_words(parser, &["OWNER", "TO"])?;
    let new_owner = parser.parse_identifier()?;
    Ok(RoleStatement::AlterOwner {
        object_type,
        if_exists,
        name,
        new_owner,
    })
}

#[cfg(test)]
mod tests {
    use crate::ast::*;
    use crate::parse_statement;

    /// Each statement parses, prints as written, and parses back the same.
    #[test]
    fn role_statements_round_trip() {
        for sql in [
            "CREATE ROLE alice",
            "CREATE ROLE alice LOGIN NOSUPERUSER INHERIT PASSWORD 'it''s'",
            "CREATE ROLE alice PASSWORD NULL",
            "ALTER ROLE alice NOLOGIN SUPERUSER",
            "GRANT readers, writers TO alice, bob",
            "REVOKE readers FROM alice",
            "GRANT SELECT, INSERT ON TABLE t TO alice",
            "GRANT ALL PRIVILEGES ON SCHEMA public TO PUBLIC",
            "REVOKE USAGE ON CONNECTION c, d FROM alice",
            "GRANT CREATE ON CLUSTER quickstart TO alice",
            "ALTER TABLE t OWNER TO alice",
            "ALTER MATERIALIZED VIEW IF EXISTS v OWNER TO alice",
            "GRANT SELECT ON ALL TABLES IN SCHEMA public, sales TO alice",
            "REVOKE ALL PRIVILEGES ON ALL SECRETS IN DATABASE materialize FROM alice",
            "GRANT USAGE ON ALL CONNECTIONS TO PUBLIC",
            "GRANT SELECT ON ALL MATERIALIZED VIEWS IN SCHEMA s TO alice",
        ] {
            let parsed = parse_statement(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(matches!(parsed, Statement::Role(_)), "{sql}: {parsed:?}");
            assert_eq!(parsed.to_string(), sql);
            assert_eq!(parse_statement(&parsed.to_string()).unwrap(), parsed);
        }
    }

    #[test]
    fn spellings() {
        // WITH is optional, a name alone after ON is a table, and a kind word
        // followed by TO is a name.
        let with = parse_statement("CREATE ROLE a WITH LOGIN").unwrap();
        assert_eq!(with.to_string(), "CREATE ROLE a LOGIN");
        let bare = parse_statement("GRANT SELECT ON t TO a").unwrap();
        assert_eq!(bare.to_string(), "GRANT SELECT ON TABLE t TO a");
        let named_secret = parse_statement("GRANT SELECT ON secret TO a").unwrap();
        assert_eq!(
            named_secret.to_string(),
            "GRANT SELECT ON TABLE secret TO a"
        );
        let all = parse_statement("GRANT ALL ON SECRET s TO a").unwrap();
        assert_eq!(all.to_string(), "GRANT ALL PRIVILEGES ON SECRET s TO a");
        // A table named `all`.
        let named_all = parse_statement("GRANT SELECT ON all TO a").unwrap();
        assert_eq!(named_all.to_string(), "GRANT SELECT ON TABLE all TO a");
        assert!(parse_statement("GRANT SELECT ON TABLE t").is_err());
        assert!(parse_statement("CREATE ROLE a PASSWORD 5").is_err());
    }
}
