//! sqlparser's Postgres dialect, with the PostgreSQL grammar it lacks:
//! `BETWEEN SYMMETRIC` and `BETWEEN ASYMMETRIC`; and Materialize's list and
//! map constructors and type names in casts ([`crate::constructors`]).
//!
//! Every other decision is the Postgres dialect's; `dialect()` answers its
//! type, so sqlparser's checks for the Postgres dialect hold for this one.

use std::any::TypeId;

use sqlparser::ast::{BinaryOperator, Expr};
use sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// The dialect every floe statement is parsed with.
#[derive(Debug, Default)]
pub struct FloeDialect(PostgreSqlDialect);

/// Delegates methods of `&self` alone to the Postgres dialect.
macro_rules! delegate {
    ($($name:ident -> $result:ty),* $(,)?) => {
        $(fn $name(&self) -> $result {
            self.0.$name()
        })*
    };
}

impl Dialect for FloeDialect {
    fn dialect(&self) -> TypeId {
        self.0.dialect()
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.0.identifier_quote_style(identifier)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.0.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.0.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.0.is_identifier_part(ch)
    }

    fn is_reserved_for_identifier(&self, keyword: Keyword) -> bool {
        self.0.is_reserved_for_identifier(keyword)
    }

    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.0.is_custom_operator_part(ch)
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        self.0.get_next_precedence(parser)
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        self.0.prec_value(prec)
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        crate::constructors::parse_prefix(parser)
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        _precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        if let Some(cast) = crate::constructors::parse_double_colon(parser, expr) {
            return Some(cast);
        }
        let negated = parser.peek_keyword(Keyword::NOT);
        let between = usize::from(negated);
        if !is_keyword(parser, between, Keyword::BETWEEN) {
            return None;
        }
        let symmetric = is_keyword(parser, between + 1, Keyword::SYMMETRIC);
        if !symmetric && !is_keyword(parser, between + 1, Keyword::ASYMMETRIC) {
            return None;
        }
        for _ in 0..between + 2 {
            parser.next_token();
        }
        let precedence = self.prec_value(Precedence::Between);
        Some(parse_between(parser, expr, negated, symmetric, precedence))
    }

    delegate! {
        supports_unicode_string_literal -> bool,
        supports_filter_during_aggregation -> bool,
        supports_group_by_expr -> bool,
        allow_extract_custom -> bool,
        allow_extract_single_quotes -> bool,
        supports_create_index_with_clause -> bool,
        supports_explain_with_utility_options -> bool,
        supports_listen_notify -> bool,
        supports_factorial_operator -> bool,
        supports_bitwise_shift_operators -> bool,
        supports_comment_on -> bool,
        supports_load_extension -> bool,
        supports_named_fn_args_with_colon_operator -> bool,
        supports_named_fn_args_with_expr_name -> bool,
        supports_empty_projections -> bool,
        supports_nested_comments -> bool,
        supports_string_escape_constant -> bool,
        supports_numeric_literal_underscores -> bool,
        supports_array_typedef_with_brackets -> bool,
        supports_geometric_types -> bool,
        supports_set_names -> bool,
        supports_alter_column_type_using -> bool,
        supports_notnull_operator -> bool,
        supports_interval_options -> bool,
        supports_insert_table_alias -> bool,
        supports_create_table_like_parenthesized -> bool,
        supports_select_wildcard_with_alias -> bool,
        supports_comma_separated_trim -> bool,
        supports_xml_expressions -> bool,
        supports_comment_optimizer_hint -> bool,
    }
}

fn is_keyword(parser: &Parser, n: usize, keyword: Keyword) -> bool {
    matches!(parser.peek_nth_token_ref(n).token, Token::Word(ref word) if word.keyword == keyword)
}

/// The bounds of `expr [NOT] BETWEEN [A]SYMMETRIC low AND high`, read after
/// its keywords, each bound read at `precedence` (that of BETWEEN). A
/// symmetric range is written as PostgreSQL defines it: the range in either
/// order (`x BETWEEN a AND b OR x BETWEEN b AND a`), and its
/// negation outside both (`x NOT BETWEEN a AND b AND x NOT BETWEEN b AND a`),
/// which keeps PostgreSQL's answers where a bound is NULL.
fn parse_between(
    parser: &mut Parser,
    expr: &Expr,
    negated: bool,
    symmetric: bool,
    precedence: u8,
) -> Result<Expr, ParserError> {
    let low = parser.parse_subexpr(precedence)?;
    parser.expect_keyword_is(Keyword::AND)?;
    let high = parser.parse_subexpr(precedence)?;
    let between = |low: &Expr, high: &Expr| Expr::Between {
        expr: Box::new(expr.clone()),
        negated,
        low: Box::new(low.clone()),
        high: Box::new(high.clone()),
    };
    if !symmetric {
        return Ok(between(&low, &high));
    }
    let op = if negated {
        BinaryOperator::And
    } else {
        BinaryOperator::Or
    };
    Ok(Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(between(&low, &high)),
        op,
        right: Box::new(between(&high, &low)),
    })))
}
