//! The statement loop: floe's own statements are recognised by their leading
//! words and parsed here with sqlparser's public `Parser` methods; everything
//! else goes to sqlparser's `parse_statement`.

use crate::dialect::FloeDialect;
use sqlparser::ast::{Ident, ObjectName};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError as SqlParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Word};

use crate::ast::*;
use crate::options::*;

mod role;

/// Why a statement could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParserError {
    pub message: String,
    pub kind: ParserErrorKind,
}

/// Whether the text is malformed or names something floe does not support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParserErrorKind {
    /// SQLSTATE 42601.
    Syntax,
    /// SQLSTATE 0A000.
    Unsupported,
}

impl ParserError {
    fn syntax(message: impl Into<String>) -> ParserError {
        ParserError {
            message: message.into(),
            kind: ParserErrorKind::Syntax,
        }
    }

    fn unsupported(message: impl Into<String>) -> ParserError {
        ParserError {
            message: message.into(),
            kind: ParserErrorKind::Unsupported,
        }
    }
}

impl From<SqlParserError> for ParserError {
    fn from(error: SqlParserError) -> ParserError {
        let message = match error {
            SqlParserError::TokenizerError(m) | SqlParserError::ParserError(m) => m,
            SqlParserError::RecursionLimitExceeded => "statement is too deeply nested".to_string(),
        };
        ParserError::syntax(lowercase_first(&message))
    }
}

fn lowercase_first(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Statement leaders floe recognises but does not implement. They are refused
/// with SQLSTATE 0A000 naming the statement, rather than a syntax error.
const UNSUPPORTED_LEADERS: &[&[&str]] = &[
    &["CREATE", "ROLE"],
    &["CREATE", "DATABASE"],
    &["CREATE", "NETWORK", "POLICY"],
    &["CREATE", "FUNCTION"],
    &["ALTER", "ROLE"],
    &["ALTER", "SCHEMA"],
    &["ALTER", "DATABASE"],
    &["ALTER", "DEFAULT", "PRIVILEGES"],
    &["ALTER", "MATERIALIZED", "VIEW"],
    &["ALTER", "VIEW"],
    &["ALTER", "SYSTEM"],
    &["GRANT"],
    &["REVOKE"],
    &["EXPLAIN"],
    &["REASSIGN", "OWNED"],
    &["PREPARE"],
    &["EXECUTE"],
    &["TRUNCATE"],
];

/// How deep the parser recurses into a statement before refusing it as too deeply
/// nested. sqlparser's default, 50, counts every level of an expression's operator
/// chain, and refused the WHERE clauses of the SQL logic test corpus's index suites
/// (28 levels of parentheses) that PostgreSQL answers. Deeper statements reach the
/// engine's planner and optimizer, which recurse as deep; the server's runtime
/// threads have the stack for them (`adapter::RUNTIME_STACK`, and DataFusion grows its
/// own where it recurses), which `e2e` checks at this limit.
pub const RECURSION_LIMIT: usize = 200;

/// Parses a string of zero or more `;`-separated statements.
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>, ParserError> {
    let dialect = FloeDialect::default();
    let mut parser = Parser::new(&dialect).with_recursion_limit(RECURSION_LIMIT);
    let join_aliases = sql.len() > 5 && sql.to_ascii_lowercase().contains("using");
    let table_queries = crate::table_query::may_have_table_query(sql);
    parser = if join_aliases || table_queries {
        // As `try_with_sql` reads them (escapes unescaped).
        let mut tokens = sqlparser::tokenizer::Tokenizer::new(&dialect, sql)
            .tokenize_with_location()
            .map_err(SqlParserError::from)?;
        if join_aliases {
            tokens = crate::join_alias::move_join_aliases(tokens);
        }
        if table_queries {
            tokens = crate::table_query::expand_table_queries(tokens);
        }
        parser.with_tokens_with_locations(tokens)
    } else {
        parser.try_with_sql(sql)?
    };
    let mut statements = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        let statement = parse_one(&mut parser)?;
        statements.push(statement);
        let next = parser.peek_token();
        match next.token {
            Token::SemiColon | Token::EOF => {}
            _ => {
                return Err(ParserError::syntax(format!(
                    "expected end of statement, found {}",
                    describe_token(&next)
                )));
            }
        }
    }
    Ok(statements)
}

/// Parses exactly one statement.
pub fn parse_statement(sql: &str) -> Result<Statement, ParserError> {
    let mut statements = parse_statements(sql)?;
    match statements.len() {
        1 => Ok(statements.remove(0)),
        0 => Err(ParserError::syntax(
            "expected a statement, found end of input",
        )),
        _ => Err(ParserError::syntax("expected one statement, found several")),
    }
}

fn describe_token(token: &TokenWithSpan) -> String {
    let location = token.span.start;
    if token.token == Token::EOF {
        "end of input".to_string()
    } else {
        format!(
            "\"{}\" at line {}, column {}",
            token.token, location.line, location.column
        )
    }
}

/// The upper-cased word at `n` tokens ahead, if that token is an unquoted word.
fn peek_word(parser: &Parser, n: usize) -> Option<String> {
    match parser.peek_nth_token(n).token {
        Token::Word(Word {
            value,
            quote_style: None,
            ..
        }) => Some(value.to_uppercase()),
        _ => None,
    }
}

fn peek_words(parser: &Parser, words: &[&str]) -> bool {
    words
        .iter()
        .enumerate()
        .all(|(i, w)| peek_word(parser, i).as_deref() == Some(*w))
}

/// Consumes `words` if they come next (case-insensitive, unquoted).
fn parse_words(parser: &mut Parser, words: &[&str]) -> bool {
    if peek_words(parser, words) {
        for _ in words {
            parser.next_token();
        }
        true
    } else {
        false
    }
}

fn expect_words(parser: &mut Parser, words: &[&str]) -> Result<(), ParserError> {
    if parse_words(parser, words) {
        Ok(())
    } else {
        let found = parser.peek_token();
        Err(ParserError::syntax(format!(
            "expected {}, found {}",
            words.join(" "),
            describe_token(&found)
        )))
    }
}

fn expected<T>(parser: &Parser, what: &str) -> Result<T, ParserError> {
    let found = parser.peek_token();
    Err(ParserError::syntax(format!(
        "expected {what}, found {}",
        describe_token(&found)
    )))
}

fn expect_token(parser: &mut Parser, token: Token) -> Result<(), ParserError> {
    if parser.consume_token(&token) {
        Ok(())
    } else {
        expected(parser, &format!("\"{token}\""))
    }
}

/// Skips to the end of the current statement, for statements that are refused
/// without being parsed.
fn skip_statement(parser: &mut Parser) {
    loop {
        match parser.peek_token().token {
            Token::SemiColon | Token::EOF => return,
            _ => {
                parser.next_token();
            }
        }
    }
}

fn parse_one(parser: &mut Parser) -> Result<Statement, ParserError> {
    if peek_word(parser, 0).as_deref() == Some("COPY")
        && parser.peek_nth_token(1).token == Token::LParen
        && peek_word(parser, 2).as_deref() == Some("SUBSCRIBE")
    {
        return parse_copy_subscribe(parser);
    }
    if let Some(statement) = parse_subscription_statement(parser) {
        return statement;
    }
    if let Some(statement) = role::parse_role_statement(parser) {
        return statement;
    }
    for leader in UNSUPPORTED_LEADERS {
        if peek_words(parser, leader) {
            skip_statement(parser);
            let name = match leader {
                [_, "OR", "REPLACE", rest @ ..] => format!("CREATE OR REPLACE {}", rest.join(" ")),
                words => words.join(" "),
            };
            return Err(ParserError::unsupported(format!("{name} is not supported")));
        }
    }
    let first = peek_word(parser, 0);
    let second = peek_word(parser, 1);
    match (first.as_deref(), second.as_deref()) {
        (Some("CREATE"), Some("SECRET")) => parse_create_secret(parser),
        (Some("CREATE"), Some("TYPE")) => parse_create_type(parser),
        (Some("ALTER"), Some("SECRET")) => parse_alter_secret(parser),
        (Some("CREATE"), Some("CONNECTION")) => parse_create_connection(parser),
        (Some("ALTER"), Some("CONNECTION")) => parse_alter_connection(parser),
        (Some("VALIDATE"), Some("CONNECTION")) => {
            parser.next_token();
            parser.next_token();
            Ok(Statement::ValidateConnection(ValidateConnectionStatement {
                name: parser.parse_object_name(false)?,
            }))
        }
        (Some("CREATE"), Some("TABLE")) => parse_create_table(parser),
        (Some("CREATE"), Some("SINK")) => parse_create_sink(parser),
        (Some("CREATE"), Some("VIEW" | "MATERIALIZED" | "OR")) => parse_create_view(parser),
        (Some("CREATE"), Some("INDEX" | "UNIQUE" | "DEFAULT")) => parse_create_index(parser),
        (Some("ALTER"), Some("SINK")) => parse_alter_sink(parser),
        (Some("CREATE"), Some("SOURCE")) => parse_create_source(parser),
        (Some("ALTER"), Some("SOURCE")) => parse_alter_source(parser),
        (Some("CREATE"), Some("CLUSTER")) => {
            if peek_word(parser, 2).as_deref() == Some("REPLICA") {
                parse_create_cluster_replica(parser)
            } else {
                parse_create_cluster(parser)
            }
        }
        (Some("ALTER"), Some("CLUSTER")) => parse_alter_cluster(parser),
        (Some("DROP"), _) => parse_drop(parser),
        (Some("COMMENT"), Some("ON")) => parse_comment(parser),
        (Some("SHOW"), _) => parse_show(parser),
        (Some("SET"), _) if !peek_words(parser, &["SET", "TRANSACTION"]) => parse_set(parser),
        (Some("RESET"), _) => {
            parser.next_token();
            Ok(Statement::ResetVariable(ResetVariableStatement {
                name: parse_variable_name(parser)?,
            }))
        }
        (Some("DISCARD"), _) => {
            parser.next_token();
            let what = peek_word(parser, 0).unwrap_or_default();
            if matches!(
                what.as_str(),
                "ALL" | "PLANS" | "SEQUENCES" | "TEMP" | "TEMPORARY"
            ) {
                parser.next_token();
                // DISCARD is accepted and has nothing to discard: floe keeps
                // no plans, sequences or temporary objects per session.
                Ok(Statement::ResetVariable(ResetVariableStatement {
                    name: "ALL".to_string(),
                }))
            } else {
                expected(parser, "ALL, PLANS, SEQUENCES or TEMP")
            }
        }
        _ => {
            let statement = parser.parse_statement()?;
            Ok(Statement::Standard(Box::new(statement)))
        }
    }
}

fn parse_if_not_exists(parser: &mut Parser) -> bool {
    parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS])
}

fn parse_if_exists(parser: &mut Parser) -> bool {
    parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS])
}

fn parse_secret_value(parser: &mut Parser) -> Result<OptionValue, ParserError> {
    match parser.peek_token().token {
        Token::SingleQuotedString(_) | Token::EscapedStringLiteral(_) => {
            Ok(OptionValue::String(parser.parse_literal_string()?))
        }
        _ => expected(parser, "a string literal"),
    }
}

fn parse_create_secret(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "SECRET"])?;
    let if_not_exists = parse_if_not_exists(parser);
    let name = parser.parse_object_name(false)?;
    expect_words(parser, &["AS"])?;
    let value = parse_secret_value(parser)?;
    Ok(Statement::CreateSecret(CreateSecretStatement {
        name,
        if_not_exists,
        value,
    }))
}

/// `CREATE TYPE name AS (...)`, `AS LIST (...)`, `AS MAP (...)`.
fn parse_create_type(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "TYPE"])?;
    let name = parser.parse_object_name(false)?;
    expect_words(parser, &["AS"])?;
    let definition = if parse_words(parser, &["LIST"]) {
        expect_token(parser, Token::LParen)?;
        let element = parse_type_option(parser, &["ELEMENT", "TYPE"])?;
        expect_token(parser, Token::RParen)?;
        TypeDefinition::List { element }
    } else if parse_words(parser, &["MAP"]) {
        expect_token(parser, Token::LParen)?;
        let key = parse_type_option(parser, &["KEY", "TYPE"])?;
        expect_token(parser, Token::Comma)?;
        let value = parse_type_option(parser, &["VALUE", "TYPE"])?;
        expect_token(parser, Token::RParen)?;
        TypeDefinition::Map { key, value }
    } else if parser.peek_token().token != Token::LParen
        && let Some(kind) = peek_word(parser, 0)
    {
        skip_statement(parser);
        return Err(ParserError::unsupported(format!(
            "CREATE TYPE ... AS {kind} is not supported"
        )));
    } else {
        expect_token(parser, Token::LParen)?;
        let mut fields = Vec::new();
        loop {
            let field = parser.parse_identifier()?;
            fields.push((field, parse_column_type(parser)?));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        expect_token(parser, Token::RParen)?;
        TypeDefinition::Record(fields)
    };
    Ok(Statement::CreateType(CreateTypeStatement {
        name,
        definition,
    }))
}

/// `WORDS [=] type`, an option of `CREATE TYPE ... AS LIST|MAP`.
fn parse_type_option(
    parser: &mut Parser,
    words: &[&str],
) -> Result<sqlparser::ast::DataType, ParserError> {
    expect_words(parser, words)?;
    let _ = parser.consume_token(&Token::Eq);
    parse_column_type(parser)
}

fn parse_alter_secret(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["ALTER", "SECRET"])?;
    let if_exists = parse_if_exists(parser);
    let name = parser.parse_object_name(false)?;
    expect_words(parser, &["AS"])?;
    let value = parse_secret_value(parser)?;
    Ok(Statement::AlterSecret(AlterSecretStatement {
        name,
        if_exists,
        value,
    }))
}

/// The option names of each option list (`crate::options`), for reading
/// multi-word names: the longest known name that matches wins.
const CONNECTION_OPTION_NAMES: &[&[&str]] = &[
    AwsConnectionOptionName::SQL_NAMES,
    IcebergConnectionOptionName::SQL_NAMES,
    PostgresConnectionOptionName::SQL_NAMES,
    ConnectionWithOptionName::SQL_NAMES,
];
const SINK_OPTION_NAMES: &[&[&str]] = &[
    SinkConnectionOptionName::SQL_NAMES,
    SinkWithOptionName::SQL_NAMES,
];
const CLUSTER_OPTION_NAMES: &[&[&str]] = &[ClusterOptionName::SQL_NAMES];
const SOURCE_OPTION_NAMES: &[&[&str]] = &[LoadGeneratorOptionName::SQL_NAMES];

/// Parses an option name: a known multi-word name if one matches, else the
/// run of words up to `=`, a literal, `,` or `)`.
fn parse_option_name(parser: &mut Parser, known: &[&[&str]]) -> Result<OptionName, ParserError> {
    let mut best: Option<&str> = None;
    for name in known.iter().flat_map(|names| names.iter()) {
        let words: Vec<&str> = name.split(' ').collect();
        if peek_words(parser, &words) && best.is_none_or(|b| b.split(' ').count() < words.len()) {
            best = Some(name);
        }
    }
    if let Some(name) = best {
        for _ in name.split(' ') {
            parser.next_token();
        }
        return Ok(OptionName(name.to_string()));
    }
    let mut words = Vec::new();
    while let Some(word) = peek_word(parser, 0) {
        if word == "SECRET" && !words.is_empty() {
            break;
        }
        words.push(word);
        parser.next_token();
    }
    if words.is_empty() {
        return expected(parser, "an option name");
    }
    Ok(OptionName(words.join(" ")))
}

fn parse_option_value(parser: &mut Parser) -> Result<Option<OptionValue>, ParserError> {
    let token = parser.peek_token();
    match &token.token {
        Token::Comma | Token::RParen | Token::SemiColon | Token::EOF => Ok(None),
        Token::SingleQuotedString(_) | Token::EscapedStringLiteral(_) => {
            Ok(Some(OptionValue::String(parser.parse_literal_string()?)))
        }
        Token::Number(n, _) => {
            let n = n.clone();
            parser.next_token();
            Ok(Some(OptionValue::Number(n)))
        }
        Token::Minus => {
            parser.next_token();
            match parser.next_token().token {
                Token::Number(n, _) => Ok(Some(OptionValue::Number(format!("-{n}")))),
                _ => expected(parser, "a number"),
            }
        }
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("SECRET") => {
            parser.next_token();
            Ok(Some(OptionValue::Secret(parser.parse_object_name(false)?)))
        }
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("TRUE") => {
            parser.next_token();
            Ok(Some(OptionValue::Bool(true)))
        }
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("FALSE") => {
            parser.next_token();
            Ok(Some(OptionValue::Bool(false)))
        }
        Token::Word(_) => Ok(Some(OptionValue::Object(parser.parse_object_name(false)?))),
        _ => expected(parser, "an option value"),
    }
}

fn parse_option(parser: &mut Parser, known: &[&[&str]]) -> Result<SqlOption, ParserError> {
    let name = parse_option_name(parser, known)?;
    let _equals_sign_is_optional = parser.consume_token(&Token::Eq);
    let value = parse_option_value(parser)?;
    Ok(SqlOption { name, value })
}

/// `( option [, ...] )`; an empty list `()` is allowed.
fn parse_option_list(
    parser: &mut Parser,
    known: &[&[&str]],
) -> Result<Vec<SqlOption>, ParserError> {
    expect_token(parser, Token::LParen)?;
    if parser.consume_token(&Token::RParen) {
        return Ok(Vec::new());
    }
    let mut options = vec![parse_option(parser, known)?];
    while parser.consume_token(&Token::Comma) {
        options.push(parse_option(parser, known)?);
    }
    expect_token(parser, Token::RParen)?;
    Ok(options)
}

fn parse_with_options(
    parser: &mut Parser,
    known: &[&[&str]],
) -> Result<Vec<SqlOption>, ParserError> {
    if parse_words(parser, &["WITH"]) {
        parse_option_list(parser, known)
    } else {
        Ok(Vec::new())
    }
}

fn parse_create_connection(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "CONNECTION"])?;
    let if_not_exists = parse_if_not_exists(parser);
    let name = parser.parse_object_name(false)?;
    expect_words(parser, &["TO"])?;
    let connection_type = if parse_words(parser, &["AWS", "PRIVATELINK"]) {
        ConnectionType::Other("AWS PRIVATELINK".into())
    } else if parse_words(parser, &["AWS"]) {
        ConnectionType::Aws
    } else if parse_words(parser, &["ICEBERG", "CATALOG"]) {
        ConnectionType::IcebergCatalog
    } else if parse_words(parser, &["POSTGRES"]) {
        ConnectionType::Postgres
    } else if parse_words(parser, &["SSH", "TUNNEL"]) {
        ConnectionType::Other("SSH TUNNEL".into())
    } else if parse_words(parser, &["CONFLUENT", "SCHEMA", "REGISTRY"]) {
        ConnectionType::Other("CONFLUENT SCHEMA REGISTRY".into())
    } else if let Some(word) = peek_word(parser, 0) {
        parser.next_token();
        ConnectionType::Other(word)
    } else {
        return expected(parser, "a connection type such as AWS or ICEBERG CATALOG");
    };
    let options = parse_option_list(parser, CONNECTION_OPTION_NAMES)?;
    let with_options = parse_with_options(parser, CONNECTION_OPTION_NAMES)?;
    Ok(Statement::CreateConnection(CreateConnectionStatement {
        name,
        if_not_exists,
        connection_type,
        options,
        with_options,
    }))
}

fn rest_of_statement(parser: &mut Parser) -> String {
    let mut parts = Vec::new();
    loop {
        match parser.peek_token().token {
            Token::SemiColon | Token::EOF => break,
            // The tokenizer keeps a string's value, not its spelling: the
            // quotes inside are doubled again so the text parses back the same.
            Token::SingleQuotedString(value) => {
                parts.push(format!("'{}'", value.replace('\'', "''")));
                parser.next_token();
            }
            token => {
                parts.push(token.to_string());
                parser.next_token();
            }
        }
    }
    parts.join(" ")
}

fn parse_alter_connection(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["ALTER", "CONNECTION"])?;
    let if_exists = parse_if_exists(parser);
    let name = parser.parse_object_name(false)?;
    let action = rest_of_statement(parser);
    Ok(Statement::AlterConnection(AlterConnectionStatement {
        name,
        if_exists,
        action,
    }))
}

/// Reads the action text of an [`AlterConnectionStatement`]: actions
/// `SET (opt = value, ...)`, `DROP (opt, ...)` or `RESET (opt, ...)` separated
/// by commas, then `WITH (VALIDATE [= bool])`.
pub fn parse_alter_connection_actions(text: &str) -> Result<AlterConnectionActions, ParserError> {
    let dialect = FloeDialect::default();
    let mut parser = Parser::new(&dialect).try_with_sql(text)?;
    let mut parsed = AlterConnectionActions::default();
    loop {
        if parse_words(&mut parser, &["SET"]) {
            let options = parse_option_list(&mut parser, CONNECTION_OPTION_NAMES)?;
            parsed
                .actions
                .extend(options.into_iter().map(AlterConnectionAction::Set));
        } else if parse_words(&mut parser, &["DROP"]) || parse_words(&mut parser, &["RESET"]) {
            expect_token(&mut parser, Token::LParen)?;
            loop {
                let name = parse_option_name(&mut parser, CONNECTION_OPTION_NAMES)?;
                parsed.actions.push(AlterConnectionAction::Drop(name));
                if !parser.consume_token(&Token::Comma) {
                    break;
                }
            }
            expect_token(&mut parser, Token::RParen)?;
        } else if let Some(word @ ("RENAME" | "OWNER" | "ROTATE")) =
            peek_word(&parser, 0).as_deref()
        {
            return Err(ParserError::unsupported(format!(
                "ALTER CONNECTION ... {word} is not supported"
            )));
        } else {
            return expected(&parser, "SET, DROP or RESET");
        }
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parsed.with_options = parse_with_options(&mut parser, CONNECTION_OPTION_NAMES)?;
    if parser.peek_token().token != Token::EOF {
        let next = parser.peek_token();
        return Err(ParserError::syntax(format!(
            "expected end of statement, found {}",
            describe_token(&next)
        )));
    }
    Ok(parsed)
}

fn parse_in_cluster(parser: &mut Parser) -> Result<Option<Ident>, ParserError> {
    if parse_words(parser, &["IN", "CLUSTER"]) {
        Ok(Some(parser.parse_identifier()?))
    } else {
        Ok(None)
    }
}

/// `CREATE [OR REPLACE] [MATERIALIZED] VIEW [IF NOT EXISTS] name [IN CLUSTER c] AS query`.
fn parse_create_view(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE"])?;
    let or_replace = parse_words(parser, &["OR", "REPLACE"]);
    let materialized = parse_words(parser, &["MATERIALIZED"]);
    expect_words(parser, &["VIEW"])?;
    let if_not_exists = parse_if_not_exists(parser);
    let name = parser.parse_object_name(false)?;
    let in_cluster = if materialized {
        parse_in_cluster(parser)?
    } else {
        None
    };
    expect_words(parser, &["AS"])?;
    let query = parser.parse_query()?;
    Ok(Statement::CreateView(CreateViewStatement {
        name,
        materialized,
        or_replace,
        if_not_exists,
        in_cluster,
        query,
    }))
}

/// `CREATE [UNIQUE | DEFAULT] INDEX ...` (see [`CreateIndexStatement`]).
fn parse_create_index(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE"])?;
    let unique = parse_words(parser, &["UNIQUE"]);
    let default = !unique && parse_words(parser, &["DEFAULT"]);
    expect_words(parser, &["INDEX"])?;
    // PostgreSQL builds an index without blocking writes when asked; floe's never do.
    parse_words(parser, &["CONCURRENTLY"]);
    let if_not_exists = parse_if_not_exists(parser);
    let name = if default || peek_words(parser, &["ON"]) || peek_words(parser, &["IN", "CLUSTER"]) {
        None
    } else {
        Some(parser.parse_identifier()?)
    };
    let in_cluster = parse_in_cluster(parser)?;
    expect_words(parser, &["ON"])?;
    parse_words(parser, &["ONLY"]);
    let on = parser.parse_object_name(false)?;
    let method = if parse_words(parser, &["USING"]) {
        Some(parser.parse_identifier()?)
    } else {
        None
    };
    let key = if default {
        None
    } else {
        parser.expect_token(&Token::LParen)?;
        let mut parts = Vec::new();
        loop {
            let expr = parser.parse_expr()?;
            let descending = if parse_words(parser, &["DESC"]) {
                true
            } else {
                parse_words(parser, &["ASC"]);
                false
            };
            let nulls_first = if parse_words(parser, &["NULLS", "FIRST"]) {
                Some(true)
            } else if parse_words(parser, &["NULLS", "LAST"]) {
                Some(false)
            } else {
                None
            };
            parts.push(IndexKeyPart {
                expr,
                descending,
                nulls_first,
            });
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
        Some(parts)
    };
    Ok(Statement::CreateIndex(CreateIndexStatement {
        name,
        if_not_exists,
        unique,
        in_cluster,
        on,
        method,
        key,
    }))
}

fn parse_create_sink(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "SINK"])?;
    let if_not_exists = parse_if_not_exists(parser);
    let name = parser.parse_object_name(false)?;
    let in_cluster = parse_in_cluster(parser)?;
    expect_words(parser, &["FROM"])?;
    let from = parser.parse_object_name(false)?;
    expect_words(parser, &["INTO"])?;
    if !parse_words(parser, &["ICEBERG", "CATALOG", "CONNECTION"]) {
        let kind = peek_word(parser, 0).unwrap_or_else(|| "this kind of".to_string());
        skip_statement(parser);
        return Err(ParserError::unsupported(format!(
            "{kind} sinks are not supported: floe sinks into ICEBERG CATALOG CONNECTION"
        )));
    }
    let connection = parser.parse_object_name(false)?;
    let connection_options = parse_option_list(parser, SINK_OPTION_NAMES)?;
    let key = if parse_words(parser, &["KEY"]) {
        let columns = parser
            .parse_parenthesized_column_list(sqlparser::parser::IsOptional::Mandatory, false)?;
        let not_enforced = parse_words(parser, &["NOT", "ENFORCED"]);
        Some(SinkKey {
            columns,
            not_enforced,
        })
    } else {
        None
    };
    let mode = if parse_words(parser, &["MODE"]) {
        if parse_words(parser, &["UPSERT"]) {
            Some(SinkMode::Upsert)
        } else if parse_words(parser, &["APPEND"]) {
            Some(SinkMode::Append)
        } else {
            return expected(parser, "UPSERT or APPEND");
        }
    } else {
        None
    };
    let with_options = parse_with_options(parser, SINK_OPTION_NAMES)?;
    Ok(Statement::CreateSink(CreateSinkStatement {
        name,
        if_not_exists,
        in_cluster,
        from,
        connection,
        connection_options,
        key,
        mode,
        with_options,
    }))
}

fn parse_alter_options_action(
    parser: &mut Parser,
    known: &[&[&str]],
) -> Result<AlterOptionsAction, ParserError> {
    if parse_words(parser, &["SET"]) {
        Ok(AlterOptionsAction::Set(parse_option_list(parser, known)?))
    } else if parse_words(parser, &["RESET"]) {
        expect_token(parser, Token::LParen)?;
        let mut names = vec![parse_option_name(parser, known)?];
        while parser.consume_token(&Token::Comma) {
            names.push(parse_option_name(parser, known)?);
        }
        expect_token(parser, Token::RParen)?;
        Ok(AlterOptionsAction::Reset(names))
    } else if peek_words(parser, &["RENAME"]) {
        skip_statement(parser);
        Err(ParserError::unsupported(
            "ALTER ... RENAME is not supported",
        ))
    } else {
        expected(parser, "SET or RESET")
    }
}

fn parse_alter_sink(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["ALTER", "SINK"])?;
    let if_exists = parse_if_exists(parser);
    let name = parser.parse_object_name(false)?;
    let action = parse_alter_options_action(parser, SINK_OPTION_NAMES)?;
    Ok(Statement::AlterSink(AlterSinkStatement {
        name,
        if_exists,
        action,
    }))
}

fn parse_create_source(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "SOURCE"])?;
    let if_not_exists = parse_if_not_exists(parser);
    let name = parser.parse_object_name(false)?;
    let in_cluster = parse_in_cluster(parser)?;
    expect_words(parser, &["FROM"])?;
    if parse_words(parser, &["POSTGRES"]) {
        return parse_postgres_source(parser, name, if_not_exists, in_cluster);
    }
    if !parse_words(parser, &["LOAD", "GENERATOR"]) {
        let kind = peek_word(parser, 0).unwrap_or_else(|| "this kind of".to_string());
        skip_statement(parser);
        return Err(ParserError::unsupported(format!(
            "{kind} sources are not supported: floe supports FROM LOAD GENERATOR and FROM POSTGRES"
        )));
    }
    let generator = match peek_word(parser, 0) {
        Some(word) => {
            parser.next_token();
            word
        }
        None => return expected(parser, "a load generator such as COUNTER or AUCTION"),
    };
    let options = if parser.peek_token().token == Token::LParen {
        parse_option_list(parser, SOURCE_OPTION_NAMES)?
    } else {
        Vec::new()
    };
    let for_all_tables = parse_words(parser, &["FOR", "ALL", "TABLES"]);
    Ok(Statement::CreateSource(CreateSourceStatement {
        name,
        if_not_exists,
        in_cluster,
        generator,
        options,
        for_all_tables,
    }))
}

/// The rest of `CREATE SOURCE ... FROM POSTGRES`: `CONNECTION c (options) selection`.
fn parse_postgres_source(
    parser: &mut Parser,
    name: ObjectName,
    if_not_exists: bool,
    in_cluster: Option<Ident>,
) -> Result<Statement, ParserError> {
    expect_words(parser, &["CONNECTION"])?;
    let connection = parser.parse_object_name(false)?;
    let options = parse_postgres_source_options(parser)?;
    let selection = if parse_words(parser, &["FOR", "ALL", "TABLES"]) {
        PostgresTableSelection::AllTables
    } else if parse_words(parser, &["FOR", "TABLES"]) {
        PostgresTableSelection::Tables(parse_parenthesized(parser, parse_table_reference)?)
    } else if parse_words(parser, &["FOR", "SCHEMAS"]) {
        PostgresTableSelection::Schemas(parse_parenthesized(parser, |p| Ok(p.parse_identifier()?))?)
    } else {
        return expected(
            parser,
            "FOR ALL TABLES, FOR TABLES (...) or FOR SCHEMAS (...)",
        );
    };
    Ok(Statement::CreatePostgresSource(
        CreatePostgresSourceStatement {
            name,
            if_not_exists,
            in_cluster,
            connection,
            options,
            selection,
        },
    ))
}

/// `(item, ...)` with at least one item.
fn parse_parenthesized<T>(
    parser: &mut Parser,
    mut item: impl FnMut(&mut Parser) -> Result<T, ParserError>,
) -> Result<Vec<T>, ParserError> {
    expect_token(parser, Token::LParen)?;
    let mut items = vec![item(parser)?];
    while parser.consume_token(&Token::Comma) {
        items.push(item(parser)?);
    }
    expect_token(parser, Token::RParen)?;
    Ok(items)
}

/// `schema.table [AS name]`.
fn parse_table_reference(parser: &mut Parser) -> Result<UpstreamTableReference, ParserError> {
    let name = parser.parse_object_name(false)?;
    let alias = if parse_words(parser, &["AS"]) {
        Some(parser.parse_identifier()?)
    } else {
        None
    };
    Ok(UpstreamTableReference { name, alias })
}

/// `(PUBLICATION [=] 'p', TEXT COLUMNS [=] (t.c, ...), EXCLUDE COLUMNS [=] (...))`.
fn parse_postgres_source_options(
    parser: &mut Parser,
) -> Result<Vec<PostgresSourceOption>, ParserError> {
    parse_parenthesized(parser, |parser| {
        if parse_words(parser, &["PUBLICATION"]) {
            let _equals_sign_is_optional = parser.consume_token(&Token::Eq);
            Ok(PostgresSourceOption::Publication(
                parser.parse_literal_string()?,
            ))
        } else if parse_words(parser, &["TEXT", "COLUMNS"]) {
            Ok(PostgresSourceOption::TextColumns(parse_column_names(
                parser,
            )?))
        } else if parse_words(parser, &["EXCLUDE", "COLUMNS"]) {
            Ok(PostgresSourceOption::ExcludeColumns(parse_column_names(
                parser,
            )?))
        } else {
            expected(parser, "PUBLICATION, TEXT COLUMNS or EXCLUDE COLUMNS")
        }
    })
}

fn parse_column_names(parser: &mut Parser) -> Result<Vec<ObjectName>, ParserError> {
    let _equals_sign_is_optional = parser.consume_token(&Token::Eq);
    parse_parenthesized(parser, |p| Ok(p.parse_object_name(false)?))
}

/// `ALTER SOURCE [IF EXISTS] s ADD SUBSOURCE ...` or `... DROP SUBSOURCE ...`.
fn parse_alter_source(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["ALTER", "SOURCE"])?;
    let if_exists = parse_if_exists(parser);
    let name = parser.parse_object_name(false)?;
    let action = if parse_words(parser, &["ADD", "SUBSOURCE"])
        || parse_words(parser, &["ADD", "TABLE"])
    {
        let mut tables = vec![parse_table_reference(parser)?];
        while parser.consume_token(&Token::Comma) {
            tables.push(parse_table_reference(parser)?);
        }
        let options = if parse_words(parser, &["WITH"]) {
            parse_postgres_source_options(parser)?
        } else {
            Vec::new()
        };
        AlterSourceAction::AddSubsources { tables, options }
    } else if parse_words(parser, &["DROP", "SUBSOURCE"]) {
        let exists = parse_if_exists(parser);
        let mut names = vec![parser.parse_object_name(false)?];
        while parser.consume_token(&Token::Comma) {
            names.push(parser.parse_object_name(false)?);
        }
        let cascade = parse_words(parser, &["CASCADE"]);
        if !cascade {
            parse_words(parser, &["RESTRICT"]);
        }
        AlterSourceAction::DropSubsources {
            if_exists: exists,
            names,
            cascade,
        }
    } else {
        let action = rest_of_statement(parser);
        return Err(ParserError::unsupported(format!(
            "ALTER SOURCE ... {action} is not supported: floe supports ADD SUBSOURCE and DROP SUBSOURCE"
        )));
    };
    Ok(Statement::AlterSource(AlterSourceStatement {
        name,
        if_exists,
        action,
    }))
}

fn parse_create_cluster(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "CLUSTER"])?;
    let name = parser.parse_identifier()?;
    let mut replicas = None;
    if parse_words(parser, &["REPLICAS"]) {
        expect_token(parser, Token::LParen)?;
        let mut list = Vec::new();
        if !parser.consume_token(&Token::RParen) {
            loop {
                let replica_name = parser.parse_identifier()?;
                let options = parse_option_list(parser, CLUSTER_OPTION_NAMES)?;
                list.push(ReplicaDefinition {
                    name: replica_name,
                    options,
                });
                if !parser.consume_token(&Token::Comma) {
                    break;
                }
            }
            expect_token(parser, Token::RParen)?;
        }
        replicas = Some(list);
    }
    let options = if parser.peek_token().token == Token::LParen {
        parse_option_list(parser, CLUSTER_OPTION_NAMES)?
    } else {
        Vec::new()
    };
    Ok(Statement::CreateCluster(CreateClusterStatement {
        name,
        options,
        replicas,
    }))
}

fn parse_alter_cluster(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["ALTER", "CLUSTER"])?;
    let if_exists = parse_if_exists(parser);
    let name = parser.parse_identifier()?;
    let action = parse_alter_options_action(parser, CLUSTER_OPTION_NAMES)?;
    Ok(Statement::AlterCluster(AlterClusterStatement {
        name,
        if_exists,
        action,
    }))
}

/// `cluster.replica`
fn parse_replica_name(parser: &mut Parser) -> Result<(Ident, Ident), ParserError> {
    let cluster = parser.parse_identifier()?;
    expect_token(parser, Token::Period)?;
    let replica = parser.parse_identifier()?;
    Ok((cluster, replica))
}

fn parse_create_cluster_replica(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["CREATE", "CLUSTER", "REPLICA"])?;
    let (cluster, replica) = parse_replica_name(parser)?;
    let options = parse_option_list(parser, CLUSTER_OPTION_NAMES)?;
    Ok(Statement::CreateClusterReplica(
        CreateClusterReplicaStatement {
            cluster,
            replica,
            options,
        },
    ))
}

fn parse_object_type(parser: &mut Parser) -> Result<ObjectType, ParserError> {
    const TYPES: &[(&[&str], ObjectType)] = &[
        (&["MATERIALIZED", "VIEW"], ObjectType::MaterializedView),
        (&["CLUSTER", "REPLICA"], ObjectType::ClusterReplica),
        (&["TABLE"], ObjectType::Table),
        (&["VIEW"], ObjectType::View),
        (&["SOURCE"], ObjectType::Source),
        (&["SINK"], ObjectType::Sink),
        (&["INDEX"], ObjectType::Index),
        (&["TYPE"], ObjectType::Type),
        (&["SECRET"], ObjectType::Secret),
        (&["CONNECTION"], ObjectType::Connection),
        (&["CLUSTER"], ObjectType::Cluster),
        (&["SCHEMA"], ObjectType::Schema),
        (&["DATABASE"], ObjectType::Database),
        (&["ROLE"], ObjectType::Role),
    ];
    for (words, object_type) in TYPES {
        if parse_words(parser, words) {
            return Ok(*object_type);
        }
    }
    expected(
        parser,
        "an object type such as TABLE, SINK, CONNECTION or SECRET",
    )
}

fn parse_comment(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["COMMENT", "ON"])?;
    let target = if parse_words(parser, &["COLUMN"]) {
        CommentTarget::Column
    } else {
        CommentTarget::Object(parse_object_type(parser)?)
    };
    let name = parser.parse_object_name(false)?;
    expect_words(parser, &["IS"])?;
    let comment = if parse_words(parser, &["NULL"]) {
        None
    } else {
        match parser.peek_token().token {
            Token::SingleQuotedString(_) | Token::EscapedStringLiteral(_) => {
                Some(parser.parse_literal_string()?)
            }
            _ => return expected(parser, "a string literal or NULL"),
        }
    };
    Ok(Statement::Comment(CommentStatement {
        target,
        name,
        comment,
    }))
}

fn parse_drop(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["DROP"])?;
    let object_type = parse_object_type(parser)?;
    let if_exists = parse_if_exists(parser);
    let mut names = Vec::new();
    loop {
        let name = if object_type == ObjectType::ClusterReplica {
            let (cluster, replica) = parse_replica_name(parser)?;
            ObjectName::from(vec![cluster, replica])
        } else {
            parser.parse_object_name(false)?
        };
        names.push(name);
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    let cascade = if parse_words(parser, &["CASCADE"]) {
        true
    } else {
        parse_words(parser, &["RESTRICT"]);
        false
    };
    Ok(Statement::DropObjects(DropObjectsStatement {
        object_type,
        if_exists,
        names,
        cascade,
    }))
}

fn parse_show(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["SHOW"])?;
    if parse_words(parser, &["CREATE"]) {
        let object_type = parse_object_type(parser)?;
        let name = parser.parse_object_name(false)?;
        return Ok(Statement::Show(ShowStatement::Create { object_type, name }));
    }
    if parse_words(parser, &["INDEXES"]) || parse_words(parser, &["INDEX"]) {
        let on = if parse_words(parser, &["ON"]) {
            Some(parser.parse_object_name(false)?)
        } else {
            None
        };
        let from = if parse_words(parser, &["FROM"]) || parse_words(parser, &["IN"]) {
            if peek_word(parser, 0).as_deref() == Some("CLUSTER") {
                parser.prev_token();
                None
            } else {
                Some(parser.parse_object_name(false)?)
            }
        } else {
            None
        };
        let in_cluster = parse_in_cluster(parser)?;
        return Ok(Statement::Show(ShowStatement::Indexes {
            on,
            from,
            in_cluster,
        }));
    }
    if parse_words(parser, &["COLUMNS"]) {
        if !parse_words(parser, &["FROM"]) {
            expect_words(parser, &["IN"])?;
        }
        let table = parser.parse_object_name(false)?;
        return Ok(Statement::Show(ShowStatement::Columns { table }));
    }
    const PLURALS: &[(&[&str], ShowObjectType)] = &[
        (
            &["MATERIALIZED", "VIEWS"],
            ShowObjectType::MaterializedViews,
        ),
        (&["CLUSTER", "REPLICAS"], ShowObjectType::ClusterReplicas),
        (&["SECRETS"], ShowObjectType::Secrets),
        (&["TYPES"], ShowObjectType::Types),
        (&["CONNECTIONS"], ShowObjectType::Connections),
        (&["SINKS"], ShowObjectType::Sinks),
        (&["SOURCES"], ShowObjectType::Sources),
        (&["TABLES"], ShowObjectType::Tables),
        (&["VIEWS"], ShowObjectType::Views),
        (&["OBJECTS"], ShowObjectType::Objects),
        (&["CLUSTERS"], ShowObjectType::Clusters),
        (&["SCHEMAS"], ShowObjectType::Schemas),
        (&["DATABASES"], ShowObjectType::Databases),
    ];
    for (words, object_type) in PLURALS {
        if parse_words(parser, words) {
            let from = if parse_words(parser, &["FROM"]) || parse_words(parser, &["IN"]) {
                Some(parser.parse_object_name(false)?)
            } else {
                None
            };
            let filter = if parse_words(parser, &["LIKE"]) {
                Some(ShowFilter::Like(parser.parse_literal_string()?))
            } else if parse_words(parser, &["WHERE"]) {
                Some(ShowFilter::Where(Box::new(parser.parse_expr()?)))
            } else {
                None
            };
            return Ok(Statement::Show(ShowStatement::Objects {
                object_type: *object_type,
                from,
                filter,
            }));
        }
    }
    let name = parse_variable_name(parser)?;
    Ok(Statement::Show(ShowStatement::Variable { name }))
}

/// A session variable name: `search_path`, `TIME ZONE`, `transaction_isolation`,
/// `ALL`. Stored lower-case with spaces replaced, as Postgres does.
fn parse_variable_name(parser: &mut Parser) -> Result<String, ParserError> {
    if parse_words(parser, &["TIME", "ZONE"]) {
        return Ok("timezone".to_string());
    }
    if parse_words(parser, &["TRANSACTION", "ISOLATION", "LEVEL"]) {
        return Ok("transaction_isolation".to_string());
    }
    let token = parser.next_token();
    let mut name = match token.token {
        Token::Word(w) => w.value.to_lowercase(),
        _ => {
            parser.prev_token();
            return expected(parser, "a variable name");
        }
    };
    // Dotted names such as `mz_catalog.x` (custom variables).
    while parser.consume_token(&Token::Period) {
        match parser.next_token().token {
            Token::Word(w) => {
                name.push('.');
                name.push_str(&w.value.to_lowercase());
            }
            _ => {
                parser.prev_token();
                return expected(parser, "a variable name");
            }
        }
    }
    Ok(name)
}

fn parse_set(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["SET"])?;
    let local = if parse_words(parser, &["LOCAL"]) {
        true
    } else {
        parse_words(parser, &["SESSION"]);
        false
    };
    let name = parse_variable_name(parser)?;
    // `SET TIME ZONE 'UTC'` needs no `=` or `TO`; `SET timezone = 'UTC'` does.
    if !parser.consume_token(&Token::Eq) && !parse_words(parser, &["TO"]) && name != "timezone" {
        return expected(parser, "= or TO");
    }
    if parse_words(parser, &["DEFAULT"]) {
        return Ok(Statement::SetVariable(SetVariableStatement {
            local,
            name,
            value: None,
        }));
    }
    let mut values = Vec::new();
    loop {
        let token = parser.next_token();
        let value = match token.token {
            Token::SingleQuotedString(s) | Token::EscapedStringLiteral(s) => s,
            Token::Word(w) => w.value,
            Token::Number(n, _) => n,
            Token::Minus => match parser.next_token().token {
                Token::Number(n, _) => format!("-{n}"),
                _ => return expected(parser, "a number"),
            },
            _ => {
                parser.prev_token();
                return expected(parser, "a variable value");
            }
        };
        values.push(value);
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    Ok(Statement::SetVariable(SetVariableStatement {
        local,
        name,
        value: Some(values),
    }))
}

/// `CREATE TABLE`: sqlparser's, unless a column has one of Materialize's
/// types sqlparser cannot read (`int list`, `text list list`,
/// `map[text=>int]`). Those columns are parsed here and carried as custom
/// types whose name is the type's text, so `Display` round-trips and the
/// planner reads the type from that text.
fn parse_create_table(parser: &mut Parser) -> Result<Statement, ParserError> {
    let standard = parser.maybe_parse(|p| {
        let statement = p.parse_statement()?;
        match p.peek_token().token {
            Token::SemiColon | Token::EOF => Ok(statement),
            _ => p.expected("end of statement", p.peek_token()),
        }
    })?;
    if let Some(statement) = standard {
        return Ok(Statement::Standard(Box::new(statement)));
    }
    parse_create_table_with_floe_types(parser)
}

fn parse_create_table_with_floe_types(parser: &mut Parser) -> Result<Statement, ParserError> {
    use sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder;
    use sqlparser::ast::{ColumnDef, ColumnOptionDef};
    expect_words(parser, &["CREATE", "TABLE"])?;
    let if_not_exists = parse_if_not_exists(parser);
    let name = parser.parse_object_name(false)?;
    expect_token(parser, Token::LParen)?;
    let mut columns = Vec::new();
    let mut constraints = Vec::new();
    loop {
        if let Some(constraint) = parser.parse_optional_table_constraint()? {
            constraints.push(constraint);
        } else {
            let column_name = parser.parse_identifier()?;
            let data_type = parse_column_type(parser)?;
            let mut options = Vec::new();
            loop {
                if parser.parse_keyword(Keyword::CONSTRAINT) {
                    let constraint_name = Some(parser.parse_identifier()?);
                    match parser.parse_optional_column_option()? {
                        Some(option) => options.push(ColumnOptionDef {
                            name: constraint_name,
                            option,
                        }),
                        None => {
                            return expected(parser, "constraint details after CONSTRAINT <name>");
                        }
                    }
                } else if let Some(option) = parser.parse_optional_column_option()? {
                    options.push(ColumnOptionDef { name: None, option });
                } else {
                    break;
                }
            }
            columns.push(ColumnDef {
                name: column_name,
                data_type,
                options,
            });
        }
        if parser.consume_token(&Token::Comma) {
            continue;
        }
        expect_token(parser, Token::RParen)?;
        break;
    }
    let create = CreateTableBuilder::new(name)
        .if_not_exists(if_not_exists)
        .columns(columns)
        .constraints(constraints)
        .build();
    Ok(Statement::Standard(Box::new(
        sqlparser::ast::Statement::CreateTable(create),
    )))
}

/// A column type, with Materialize's `T list` suffixes and `map[K=>V]`.
fn parse_column_type(parser: &mut Parser) -> Result<sqlparser::ast::DataType, ParserError> {
    Ok(crate::constructors::parse_type(parser)?)
}

/// `COPY (SUBSCRIBE ...) TO STDOUT`.
fn parse_copy_subscribe(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["COPY"])?;
    expect_token(parser, Token::LParen)?;
    let mut subscribe = parse_subscribe(parser)?;
    expect_token(parser, Token::RParen)?;
    expect_words(parser, &["TO", "STDOUT"])?;
    subscribe.copy = true;
    Ok(Statement::Subscribe(subscribe))
}

/// `SUBSCRIBE`, `DECLARE`, `FETCH` and `CLOSE`, by their leading word.
fn parse_subscription_statement(parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
    match peek_word(parser, 0).as_deref() {
        Some("SUBSCRIBE") => Some(parse_subscribe(parser).map(Statement::Subscribe)),
        Some("DECLARE") => Some(parse_declare(parser)),
        Some("FETCH") => Some(parse_fetch(parser)),
        Some("CLOSE") => {
            parser.next_token();
            Some(
                parser
                    .parse_identifier()
                    .map(Statement::Close)
                    .map_err(Into::into),
            )
        }
        _ => None,
    }
}

/// `SUBSCRIBE [TO] name | (query) [WITH (SNAPSHOT [= bool], PROGRESS [= bool])]`.
fn parse_subscribe(parser: &mut Parser) -> Result<SubscribeStatement, ParserError> {
    expect_words(parser, &["SUBSCRIBE"])?;
    parse_words(parser, &["TO"]);
    let relation = if parser.consume_token(&Token::LParen) {
        let query = parser.parse_query()?;
        expect_token(parser, Token::RParen)?;
        SubscribeRelation::Query(query)
    } else {
        SubscribeRelation::Name(parser.parse_object_name(false)?)
    };
    let (mut snapshot, mut progress) = (true, false);
    if parse_words(parser, &["WITH"]) {
        expect_token(parser, Token::LParen)?;
        loop {
            let option = peek_word(parser, 0);
            let target = match option.as_deref() {
                Some("SNAPSHOT") => &mut snapshot,
                Some("PROGRESS") => &mut progress,
                _ => return expected(parser, "SNAPSHOT or PROGRESS"),
            };
            parser.next_token();
            let _ = parser.consume_token(&Token::Eq);
            *target = match peek_word(parser, 0).as_deref() {
                Some("TRUE") => {
                    parser.next_token();
                    true
                }
                Some("FALSE") => {
                    parser.next_token();
                    false
                }
                _ => true,
            };
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        expect_token(parser, Token::RParen)?;
    }
    Ok(SubscribeStatement {
        relation,
        snapshot,
        progress,
        copy: false,
    })
}

/// `DECLARE name CURSOR [WITHOUT HOLD] FOR SUBSCRIBE ...`.
fn parse_declare(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["DECLARE"])?;
    let name = parser.parse_identifier()?;
    expect_words(parser, &["CURSOR"])?;
    parse_words(parser, &["WITHOUT", "HOLD"]);
    expect_words(parser, &["FOR"])?;
    if peek_word(parser, 0).as_deref() != Some("SUBSCRIBE") {
        skip_statement(parser);
        return Err(ParserError::unsupported(
            "DECLARE CURSOR for a statement other than SUBSCRIBE is not supported",
        ));
    }
    let subscribe = parse_subscribe(parser)?;
    Ok(Statement::Declare(DeclareStatement {
        name,
        statement: Box::new(Statement::Subscribe(subscribe)),
    }))
}

/// `FETCH [FORWARD] [count | ALL] [FROM | IN] name [WITH (TIMEOUT [=] 'interval')]`.
fn parse_fetch(parser: &mut Parser) -> Result<Statement, ParserError> {
    expect_words(parser, &["FETCH"])?;
    parse_words(parser, &["FORWARD"]);
    let count = if parse_words(parser, &["ALL"]) {
        None
    } else if let Token::Number(number, _) = parser.peek_token().token {
        parser.next_token();
        match number.parse::<u64>() {
            Ok(count) => Some(count),
            Err(_) => {
                return Err(ParserError::syntax(format!(
                    "invalid FETCH count: {number}"
                )));
            }
        }
    } else {
        Some(1)
    };
    if !parse_words(parser, &["FROM"]) {
        parse_words(parser, &["IN"]);
    }
    let name = parser.parse_identifier()?;
    let mut timeout = None;
    if parse_words(parser, &["WITH"]) {
        expect_token(parser, Token::LParen)?;
        expect_words(parser, &["TIMEOUT"])?;
        let _ = parser.consume_token(&Token::Eq);
        timeout = Some(match parser.next_token().token {
            Token::SingleQuotedString(text) => text,
            Token::Number(number, _) => number,
            _ => return expected(parser, "an interval"),
        });
        expect_token(parser, Token::RParen)?;
    }
    Ok(Statement::Fetch(FetchStatement {
        name,
        count,
        timeout,
    }))
}
