//! Materialize's expressions sqlparser does not read: the constructors
//! `LIST[a, b]` and `MAP['k' => v]`, and casts to its types `T list` and
//! `map[text=>T]` (`x::int list`, `CAST(x AS map[text=>int])`), which
//! sqlparser reads as a cast to `int` aliased `list`, or not at all.
//!
//! A constructor becomes a call of a function floe-query defines over an
//! `ARRAY[...]` of its items (which the engine types as one type, as
//! Materialize types a list's items): `LIST[a, b]` is
//! `floe_list(ARRAY[a, b])`, `MAP['k' => v]` is `floe_map(ARRAY['k'],
//! ARRAY[v])`; a list of lists is `floe_list_of_lists(LIST[...], ...)`. A
//! cast's type is one custom type name (`int list`), which
//! floe's type names read as CREATE TABLE's column types are read.

use sqlparser::ast::{
    Array, CastKind, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    ObjectName,
};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Word};

/// The function `LIST[...]` becomes.
pub const LIST_CONSTRUCTOR: &str = "floe_list";
/// The function `LIST[...]` of lists becomes (`LIST[LIST[1], LIST[2, 3]]`),
/// whose items are the lists themselves: an array of lists would be one of
/// more dimensions, whose sub-arrays must all be of one length.
pub const LIST_OF_LISTS: &str = "floe_list_of_lists";
/// The function `MAP[...]` becomes.
pub const MAP_CONSTRUCTOR: &str = "floe_map";

/// A call of function `name` with `args`.
pub fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(sqlparser::ast::Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// The expression that begins at the parser's next token, where it is one
/// of this module's (see the module documentation).
pub fn parse_prefix(parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
    let word = match &parser.peek_token_ref().token {
        Token::Word(Word {
            value,
            quote_style: None,
            ..
        }) => value.to_ascii_uppercase(),
        _ => return None,
    };
    let next = &parser.peek_nth_token_ref(1).token;
    match (word.as_str(), next) {
        ("LIST", Token::LBracket) => Some(parse_list(parser)),
        ("MAP", Token::LBracket) => Some(parse_map(parser)),
        ("CAST", Token::LParen) => Some(parse_cast(parser)),
        _ => None,
    }
}

/// `expr::type` after `expr`, where `::` is the parser's next token.
pub fn parse_double_colon(parser: &mut Parser, expr: &Expr) -> Option<Result<Expr, ParserError>> {
    if parser.peek_token_ref().token != Token::DoubleColon {
        return None;
    }
    parser.next_token();
    Some(parse_type(parser).map(|data_type| Expr::Cast {
        kind: CastKind::DoubleColon,
        expr: Box::new(expr.clone()),
        data_type,
        array: false,
        format: None,
    }))
}

/// `LIST[a, b, ...]`.
fn parse_list(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.next_token();
    parser.expect_token(&Token::LBracket)?;
    let items = if parser.consume_token(&Token::RBracket) {
        Vec::new()
    } else {
        let items = parser.parse_comma_separated(Parser::parse_expr)?;
        parser.expect_token(&Token::RBracket)?;
        items
    };
    if items.iter().any(is_list_constructor) {
        return Ok(function_call(LIST_OF_LISTS, items));
    }
    Ok(function_call(LIST_CONSTRUCTOR, vec![array(items)]))
}

fn is_list_constructor(expr: &Expr) -> bool {
    let Expr::Function(function) = expr else {
        return false;
    };
    let name = function.name.to_string();
    name == LIST_CONSTRUCTOR || name == LIST_OF_LISTS
}

/// `MAP[k => v, ...]`.
fn parse_map(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.next_token();
    parser.expect_token(&Token::LBracket)?;
    let mut keys = Vec::new();
    let mut values = Vec::new();
    if !parser.consume_token(&Token::RBracket) {
        loop {
            keys.push(parser.parse_expr()?);
            parser.expect_token(&Token::RArrow)?;
            values.push(parser.parse_expr()?);
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RBracket)?;
    }
    Ok(function_call(
        MAP_CONSTRUCTOR,
        vec![array(keys), array(values)],
    ))
}

fn array(items: Vec<Expr>) -> Expr {
    Expr::Array(Array {
        elem: items,
        named: true,
    })
}

/// `CAST(expr AS type)`, of any type floe names.
fn parse_cast(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.next_token();
    parser.expect_token(&Token::LParen)?;
    let expr = parser.parse_expr()?;
    parser.expect_keyword_is(Keyword::AS)?;
    let data_type = parse_type(parser)?;
    parser.expect_token(&Token::RParen)?;
    Ok(Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    })
}

/// A type name, with Materialize's `T list` suffixes and `map[K=>V]`; those
/// are one custom type name (`integer list`, `map[text=>integer]`).
pub fn parse_type(parser: &mut Parser) -> Result<DataType, ParserError> {
    let is_map = matches!(
        &parser.peek_token_ref().token,
        Token::Word(Word { value, quote_style: None, .. }) if value.eq_ignore_ascii_case("map")
    ) && parser.peek_nth_token_ref(1).token == Token::LBracket;
    let (mut text, mut custom, data_type) = if is_map {
        parser.next_token();
        parser.next_token();
        let key = parse_type(parser)?;
        parser.expect_token(&Token::RArrow)?;
        let value = parse_type(parser)?;
        parser.expect_token(&Token::RBracket)?;
        (format!("map[{key}=>{value}]"), true, None)
    } else {
        let data_type = parser.parse_data_type()?;
        (data_type.to_string(), false, Some(data_type))
    };
    while matches!(
        &parser.peek_token_ref().token,
        Token::Word(Word { value, quote_style: None, .. }) if value.eq_ignore_ascii_case("list")
    ) {
        parser.next_token();
        text.push_str(" list");
        custom = true;
    }
    match (custom, data_type) {
        (false, Some(data_type)) => Ok(data_type),
        _ => Ok(DataType::Custom(
            ObjectName::from(vec![Ident::new(text)]),
            vec![],
        )),
    }
}
