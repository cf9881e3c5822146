//! SQL/JSON paths, the common part of PostgreSQL's `jsonpath`, for
//! `jsonb_path_query` (and `_array`, `_first`), `jsonb_path_exists`,
//! `jsonb_path_match`, each also as `_tz` (which compares datetimes with and
//! without a zone), and the operators `@?` and `@@`.
//!
//! Read: `lax` (the default) and `strict`; `$`, `@` and `$variable`; the
//! accessors `.key`, `."key"`, `.*`, `[*]`, `[n]`, `[n to m]`, `[last]` (and
//! `last - n`), lists of subscripts; filters `? (predicate)`; comparisons
//! `== != <> < <= > >=`, `&&`, `||`, `!`, `exists (path)`, `like_regex "re"
//! [flag "i"]`, `starts with`; literals (numbers, strings, `true`, `false`,
//! `null`); arithmetic (`+ - * / %`, unary `-` and `+`) and the item methods
//! `.type()`, `.size()`, `.double()`, `.abs()`, `.floor()`, `.ceiling()` and
//! `.keyvalue()` ([`items`]), and `.datetime()` and `.datetime(template)`, of
//! a path or of a string literal ([`datetime`]). Anything else of the full
//! grammar is refused with 0A000.
//!
//! Lax mode unwraps an array met by a member accessor or a filter, reads a
//! non-array as an array of itself for a subscript and yields nothing where
//! strict mode raises PostgreSQL's errors (a missing key, an accessor of the
//! wrong kind, a subscript out of bounds).

mod datetime;
mod items;

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::{Decimal, Json};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::jsonb::{document, jsonb};
use super::{Arguments, RowFunction, expect_arguments};
use crate::error::QueryError;

/// The list `jsonb_path_query` unnests (see `crate::srf`).
pub const PATH_QUERY: &str = "floe_jsonb_path_query";
/// The list `jsonb_path_query_tz` unnests.
pub const PATH_QUERY_TZ: &str = "floe_jsonb_path_query_tz";

/// Whether a function may read a datetime without a zone in the session's zone
/// to compare it with one that has a zone: only the `_tz` functions may, as
/// their results then depend on the session.
#[derive(Clone, Copy)]
enum SessionZone {
    Refused,
    Used,
}

pub(super) fn functions() -> Vec<ScalarUDF> {
    use SessionZone::{Refused, Used};
    let immutable = Volatility::Immutable;
    let stable = Volatility::Stable;
    vec![
        RowFunction::new(PATH_QUERY, immutable, jsonb_list, |row, _| {
            query_list(row, Refused)
        })
        .udf(),
        RowFunction::new(PATH_QUERY_TZ, stable, jsonb_list, |row, _| {
            query_list(row, Used)
        })
        .udf(),
        RowFunction::new(
            "jsonb_path_query_array",
            immutable,
            jsonb_result,
            |row, _| query_array(row, Refused),
        )
        .udf(),
        RowFunction::new(
            "jsonb_path_query_array_tz",
            stable,
            jsonb_result,
            |row, _| query_array(row, Used),
        )
        .udf(),
        RowFunction::new(
            "jsonb_path_query_first",
            immutable,
            jsonb_result,
            |row, _| query_first(row, Refused),
        )
        .udf(),
        RowFunction::new(
            "jsonb_path_query_first_tz",
            stable,
            jsonb_result,
            |row, _| query_first(row, Used),
        )
        .udf(),
        RowFunction::new("jsonb_path_exists", immutable, bool_result, |row, _| {
            exists(row, Refused)
        })
        .udf(),
        RowFunction::new("jsonb_path_exists_tz", stable, bool_result, |row, _| {
            exists(row, Used)
        })
        .udf(),
        RowFunction::new("jsonb_path_match", immutable, bool_result, |row, _| {
            path_match(row, Refused)
        })
        .udf(),
        RowFunction::new("jsonb_path_match_tz", stable, bool_result, |row, _| {
            path_match(row, Used)
        })
        .udf(),
    ]
}

fn jsonb_list(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::List {
        element: Box::new(SqlScalarType::Jsonb),
    })
}

/// `jsonb_path_query`'s items, as the list its set unnests.
fn query_list(row: &[Datum], zone: SessionZone) -> Result<Datum, QueryError> {
    let items = query(row, zone)?.unwrap_or_default();
    Ok(Datum::List(items.iter().map(jsonb).collect()))
}

/// `jsonb_path_query_array`: an error kept quiet yields no items, `[]`.
fn query_array(row: &[Datum], zone: SessionZone) -> Result<Datum, QueryError> {
    Ok(jsonb(&Json::Array(query(row, zone)?.unwrap_or_default())))
}

fn query_first(row: &[Datum], zone: SessionZone) -> Result<Datum, QueryError> {
    let first = query(row, zone)?.and_then(|items| items.into_iter().next());
    Ok(first.map_or(Datum::Null, |item| jsonb(&item)))
}

fn exists(row: &[Datum], zone: SessionZone) -> Result<Datum, QueryError> {
    Ok(query(row, zone)?.map_or(Datum::Null, |items| Datum::Bool(!items.is_empty())))
}

fn jsonb_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[2, 3, 4])?;
    Ok(SqlScalarType::Jsonb)
}

fn bool_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[2, 3, 4])?;
    Ok(SqlScalarType::Bool)
}

/// The items the path of `row` (target, path, vars, silent) yields; `None`
/// for an error `silent` keeps quiet.
fn query(row: &[Datum], zone: SessionZone) -> Result<Option<Vec<Json>>, QueryError> {
    let silent = matches!(row.get(3), Some(Datum::Bool(true)));
    let result = evaluate(row, zone);
    match result {
        Err(error) if silent && error.code != SqlState::FEATURE_NOT_SUPPORTED => Ok(None),
        other => other.map(Some),
    }
}

fn evaluate(row: &[Datum], zone: SessionZone) -> Result<Vec<Json>, QueryError> {
    let target = document(&row[0])?;
    let Datum::Text(text) = &row[1] else {
        return Err(QueryError::internal("a jsonpath is text"));
    };
    let path = parse(text)?;
    let vars = match row.get(2) {
        Some(datum @ Datum::Jsonb(_)) => Some(document(datum)?),
        // A quoted literal is a document.
        Some(Datum::Text(text)) => {
            Some(floe_repr::strconv::parse_json(text).map_err(QueryError::from_value)?)
        }
        _ => None,
    };
    let context = Context {
        root: &target,
        vars: vars.as_ref(),
        strict: path.strict,
        zone,
    };
    // A datetime the path yields is its text.
    let items = context.items(&path.expr, &target)?;
    Ok(items.into_iter().map(datetime::plain).collect())
}

/// `jsonb_path_match`: the path's one boolean (NULL for unknown).
fn path_match(row: &[Datum], zone: SessionZone) -> Result<Datum, QueryError> {
    let silent = matches!(row.get(3), Some(Datum::Bool(true)));
    let Some(items) = query(row, zone)? else {
        return Ok(Datum::Null);
    };
    match items.as_slice() {
        [Json::Bool(b)] => Ok(Datum::Bool(*b)),
        [Json::Null] => Ok(Datum::Null),
        _ if silent => Ok(Datum::Null),
        _ => Err(QueryError::new(
            SqlState::SINGLETON_SQL_JSON_ITEM_REQUIRED,
            "single boolean result is expected",
        )),
    }
}

/// A parsed path: its mode and its expression.
struct Path {
    strict: bool,
    expr: Expr,
}

/// A path expression: a sequence of items, or a predicate (a boolean item).
#[derive(Debug)]
enum Expr {
    Path(Root, Vec<Step>),
    Literal(Json),
    Compare(Box<Expr>, Comparison, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Exists(Box<Expr>),
    LikeRegex(Box<Expr>, regex::Regex),
    StartsWith(Box<Expr>, Box<Expr>),
    Arithmetic(Box<Expr>, items::Operator, Box<Expr>),
    /// Unary `-` (true) or `+`.
    Sign(Box<Expr>, bool),
}

impl Expr {
    fn is_predicate(&self) -> bool {
        !matches!(
            self,
            Expr::Path(..) | Expr::Literal(_) | Expr::Arithmetic(..) | Expr::Sign(..)
        )
    }
}

#[derive(Debug)]
enum Root {
    /// `$`, the target.
    Target,
    /// `@`, the item a filter tests.
    Current,
    /// `$name`, a member of the variables.
    Variable(String),
    /// A string literal with accessors (`"2023-01-02".datetime()`).
    Literal(Json),
}

#[derive(Debug)]
enum Step {
    Key(String),
    AnyKey,
    AnyIndex,
    Subscripts(Vec<(Index, Option<Index>)>),
    Filter(Box<Expr>),
    Method(items::Method),
    /// `.datetime()`, or `.datetime(template)`.
    DateTime(Option<String>),
}

#[derive(Debug, Clone, Copy)]
enum Index {
    At(i64),
    /// `last - n`.
    FromLast(i64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

// ---------------------------------------------------------------------------
// Reading a path

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Dollar,
    At,
    Variable(String),
    Word(String),
    String(String),
    Number(String),
    Punct(&'static str),
}

fn syntax_error(near: Option<&Token>) -> QueryError {
    let message = match near {
        None => "syntax error at end of jsonpath input".to_string(),
        Some(token) => format!(
            "syntax error at or near \"{}\" of jsonpath input",
            spelled(token)
        ),
    };
    QueryError::new(SqlState::SYNTAX_ERROR, message)
}

fn spelled(token: &Token) -> String {
    match token {
        Token::Dollar => "$".into(),
        Token::At => "@".into(),
        Token::Variable(name) => format!("${name}"),
        Token::Word(word) | Token::Number(word) => word.clone(),
        Token::String(text) => format!("\"{text}\""),
        Token::Punct(punct) => (*punct).into(),
    }
}

fn unsupported(what: &str) -> QueryError {
    QueryError::unsupported(format!("jsonpath {what} is not supported"))
}

const PUNCTUATION: &[&str] = &[
    "==", "!=", "<>", "<=", ">=", "&&", "||", "<", ">", "!", ".", "[", "]", "(", ")", "?", "*",
    ",", "+", "-", "/", "%",
];

fn tokens(text: &str) -> Result<Vec<Token>, QueryError> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        if c.is_whitespace() {
            at += 1;
        } else if c == '"' {
            let (string, next) = string_token(&chars, at + 1)?;
            out.push(Token::String(string));
            at = next;
        } else if c.is_ascii_digit() {
            let start = at;
            while at < chars.len() && (chars[at].is_ascii_digit() || chars[at] == '.') {
                at += 1;
            }
            if at < chars.len() && matches!(chars[at], 'e' | 'E') {
                at += 1;
                if at < chars.len() && matches!(chars[at], '+' | '-') {
                    at += 1;
                }
                while at < chars.len() && chars[at].is_ascii_digit() {
                    at += 1;
                }
            }
            out.push(Token::Number(chars[start..at].iter().collect()));
        } else if c == '$' || c.is_alphabetic() || c == '_' {
            let start = at + usize::from(c == '$');
            at = start;
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            let word: String = chars[start..at].iter().collect();
            out.push(match (c == '$', word.is_empty()) {
                (true, true) => Token::Dollar,
                (true, false) => Token::Variable(word),
                _ => Token::Word(word),
            });
        } else if c == '@' {
            out.push(Token::At);
            at += 1;
        } else {
            let rest: String = chars[at..chars.len().min(at + 2)].iter().collect();
            let Some(punct) = PUNCTUATION.iter().find(|p| rest.starts_with(**p)) else {
                return Err(syntax_error(Some(&Token::Word(c.to_string()))));
            };
            out.push(Token::Punct(punct));
            at += punct.len();
        }
    }
    Ok(out)
}

/// A double-quoted string's contents (its escapes read) and the position
/// after its closing quote.
fn string_token(chars: &[char], mut at: usize) -> Result<(String, usize), QueryError> {
    let mut out = String::new();
    while at < chars.len() {
        match chars[at] {
            '"' => return Ok((out, at + 1)),
            '\\' if at + 1 < chars.len() => {
                out.push(match chars[at + 1] {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    other => other,
                });
                at += 2;
            }
            other => {
                out.push(other);
                at += 1;
            }
        }
    }
    Err(QueryError::new(
        SqlState::SYNTAX_ERROR,
        "unterminated quoted string in jsonpath input",
    ))
}

struct Reader {
    tokens: Vec<Token>,
    at: usize,
}

fn parse(text: &str) -> Result<Path, QueryError> {
    let mut reader = Reader {
        tokens: tokens(text)?,
        at: 0,
    };
    let strict = match reader.peek() {
        Some(Token::Word(word)) if word == "strict" || word == "lax" => {
            let strict = word == "strict";
            reader.at += 1;
            strict
        }
        _ => false,
    };
    let expr = reader.or()?;
    if let Some(token) = reader.peek() {
        return Err(match token {
            Token::Punct("+" | "-" | "*" | "/" | "%") => unsupported("arithmetic"),
            token => syntax_error(Some(token)),
        });
    }
    Ok(Path { strict, expr })
}

impl Reader {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn eat(&mut self, punct: &str) -> bool {
        if self.peek() == Some(&Token::Punct(leak(punct))) {
            self.at += 1;
            return true;
        }
        false
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Word(w)) if w == word) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect(&mut self, punct: &str) -> Result<(), QueryError> {
        if self.eat(punct) {
            return Ok(());
        }
        Err(syntax_error(self.peek()))
    }

    fn or(&mut self) -> Result<Expr, QueryError> {
        let mut expr = self.and()?;
        while self.eat("||") {
            expr = Expr::Or(Box::new(expr), Box::new(self.and()?));
        }
        Ok(expr)
    }

    fn and(&mut self) -> Result<Expr, QueryError> {
        let mut expr = self.unary()?;
        while self.eat("&&") {
            expr = Expr::And(Box::new(expr), Box::new(self.unary()?));
        }
        Ok(expr)
    }

    fn unary(&mut self) -> Result<Expr, QueryError> {
        if self.eat("!") {
            self.expect("(")?;
            let inner = self.or()?;
            self.expect(")")?;
            return Ok(Expr::Not(Box::new(inner)));
        }
        if self.eat("(") {
            let inner = self.or()?;
            self.expect(")")?;
            return Ok(inner);
        }
        if self.eat_word("exists") {
            self.expect("(")?;
            let inner = self.or()?;
            self.expect(")")?;
            return Ok(Expr::Exists(Box::new(inner)));
        }
        let value = self.value()?;
        self.comparison(value)
    }

    /// A value followed by a comparison, `like_regex` or `starts with`, if any.
    fn comparison(&mut self, value: Expr) -> Result<Expr, QueryError> {
        let operator = match self.peek() {
            Some(Token::Punct("==")) => Comparison::Eq,
            Some(Token::Punct("!=" | "<>")) => Comparison::Ne,
            Some(Token::Punct("<")) => Comparison::Lt,
            Some(Token::Punct("<=")) => Comparison::Le,
            Some(Token::Punct(">")) => Comparison::Gt,
            Some(Token::Punct(">=")) => Comparison::Ge,
            Some(Token::Word(word)) if word == "like_regex" => {
                self.at += 1;
                return self.like_regex(value);
            }
            Some(Token::Word(word)) if word == "starts" => {
                self.at += 1;
                if !self.eat_word("with") {
                    return Err(syntax_error(self.peek()));
                }
                let prefix = self.value()?;
                return Ok(Expr::StartsWith(Box::new(value), Box::new(prefix)));
            }
            _ => return Ok(value),
        };
        self.at += 1;
        let right = self.value()?;
        Ok(Expr::Compare(Box::new(value), operator, Box::new(right)))
    }

    fn like_regex(&mut self, value: Expr) -> Result<Expr, QueryError> {
        let Some(Token::String(pattern)) = self.next() else {
            return Err(syntax_error(self.tokens.get(self.at - 1)));
        };
        let mut builder = regex::RegexBuilder::new(&pattern);
        if self.eat_word("flag") {
            let Some(Token::String(flags)) = self.next() else {
                return Err(syntax_error(self.tokens.get(self.at - 1)));
            };
            for flag in flags.chars() {
                match flag {
                    'i' => builder.case_insensitive(true),
                    's' => builder.dot_matches_new_line(true),
                    'm' => builder.multi_line(true),
                    'x' => builder.ignore_whitespace(true),
                    _ => return Err(unsupported(&format!("like_regex flag \"{flag}\""))),
                };
            }
        }
        let regex = builder.build().map_err(|error| {
            QueryError::new(
                SqlState::INVALID_REGULAR_EXPRESSION,
                format!("invalid regular expression: {error}"),
            )
        })?;
        Ok(Expr::LikeRegex(Box::new(value), regex))
    }

    /// A sum or difference of terms.
    fn value(&mut self) -> Result<Expr, QueryError> {
        let mut expr = self.term()?;
        while let Some(operator @ (items::Operator::Add | items::Operator::Subtract)) =
            self.operator()
        {
            self.at += 1;
            expr = Expr::Arithmetic(Box::new(expr), operator, Box::new(self.term()?));
        }
        Ok(expr)
    }

    /// A product, quotient or remainder of signed values.
    fn term(&mut self) -> Result<Expr, QueryError> {
        let mut expr = self.signed()?;
        while let Some(
            operator @ (items::Operator::Multiply
            | items::Operator::Divide
            | items::Operator::Modulo),
        ) = self.operator()
        {
            self.at += 1;
            expr = Expr::Arithmetic(Box::new(expr), operator, Box::new(self.signed()?));
        }
        Ok(expr)
    }

    /// The arithmetic operator next, if any.
    fn operator(&self) -> Option<items::Operator> {
        match self.peek() {
            Some(Token::Punct(punct)) => items::Operator::of(punct),
            _ => None,
        }
    }

    /// A value under unary `-` or `+` (a negative number is a literal).
    fn signed(&mut self) -> Result<Expr, QueryError> {
        let number_next = matches!(self.tokens.get(self.at + 1), Some(Token::Number(_)));
        if self.peek() == Some(&Token::Punct("-")) && !number_next {
            self.at += 1;
            return Ok(Expr::Sign(Box::new(self.signed()?), true));
        }
        if self.eat("+") {
            return Ok(Expr::Sign(Box::new(self.signed()?), false));
        }
        self.primary()
    }

    /// A literal, or a path from `$`, `@` or a variable with its accessors.
    fn primary(&mut self) -> Result<Expr, QueryError> {
        let negative = self.eat("-");
        let root = match self.next() {
            Some(Token::Number(digits)) => {
                let text = if negative {
                    format!("-{digits}")
                } else {
                    digits
                };
                return Decimal::parse(&text)
                    .ok()
                    .flatten()
                    .map(|number| Expr::Literal(Json::Number(number.format(None))))
                    .ok_or_else(|| syntax_error(Some(&Token::Number(text))));
            }
            _ if negative => return Err(unsupported("arithmetic")),
            // A string's accessors (`"2023-01-02".datetime()`) read it as a path's root.
            Some(Token::String(text)) if self.peek() == Some(&Token::Punct(".")) => {
                Root::Literal(Json::String(text))
            }
            Some(Token::String(text)) => return Ok(Expr::Literal(Json::String(text))),
            Some(Token::Word(word)) if word == "true" => {
                return Ok(Expr::Literal(Json::Bool(true)));
            }
            Some(Token::Word(word)) if word == "false" => {
                return Ok(Expr::Literal(Json::Bool(false)));
            }
            Some(Token::Word(word)) if word == "null" => return Ok(Expr::Literal(Json::Null)),
            Some(Token::Dollar) => Root::Target,
            Some(Token::At) => Root::Current,
            Some(Token::Variable(name)) => Root::Variable(name),
            other => return Err(syntax_error(other.as_ref())),
        };
        let mut steps = Vec::new();
        while let Some(step) = self.step()? {
            steps.push(step);
        }
        Ok(Expr::Path(root, steps))
    }

    fn step(&mut self) -> Result<Option<Step>, QueryError> {
        if self.eat(".") {
            return match self.next() {
                Some(Token::Punct("*")) => Ok(Some(Step::AnyKey)),
                Some(Token::String(key)) => Ok(Some(Step::Key(key))),
                Some(Token::Word(key)) if key == "datetime" && self.eat("(") => {
                    let template = match self.peek() {
                        Some(Token::String(template)) => Some(template.clone()),
                        _ => None,
                    };
                    self.at += usize::from(template.is_some());
                    self.expect(")")?;
                    Ok(Some(Step::DateTime(template)))
                }
                Some(Token::Word(key)) if self.peek() == Some(&Token::Punct("(")) => {
                    let method = items::Method::of(&key)
                        .ok_or_else(|| unsupported(&format!("item method .{key}()")))?;
                    self.expect("(")?;
                    self.expect(")")?;
                    Ok(Some(Step::Method(method)))
                }
                Some(Token::Word(key)) => Ok(Some(Step::Key(key))),
                other => Err(syntax_error(other.as_ref())),
            };
        }
        if self.eat("[") {
            if self.eat("*") {
                self.expect("]")?;
                return Ok(Some(Step::AnyIndex));
            }
            let mut subscripts = Vec::new();
            loop {
                let from = self.index()?;
                let to = if self.eat_word("to") {
                    Some(self.index()?)
                } else {
                    None
                };
                subscripts.push((from, to));
                if self.eat("]") {
                    return Ok(Some(Step::Subscripts(subscripts)));
                }
                self.expect(",")?;
            }
        }
        if self.eat("?") {
            self.expect("(")?;
            let predicate = self.or()?;
            self.expect(")")?;
            return Ok(Some(Step::Filter(Box::new(predicate))));
        }
        Ok(None)
    }

    fn index(&mut self) -> Result<Index, QueryError> {
        if self.eat_word("last") {
            if self.eat("-") {
                let Some(Token::Number(digits)) = self.next() else {
                    return Err(unsupported("arithmetic"));
                };
                return digits
                    .parse()
                    .map(Index::FromLast)
                    .map_err(|_| syntax_error(Some(&Token::Number(digits))));
            }
            return Ok(Index::FromLast(0));
        }
        let negative = self.eat("-");
        match self.next() {
            Some(Token::Number(digits)) => digits
                .parse::<i64>()
                .map(|n| Index::At(if negative { -n } else { n }))
                .map_err(|_| unsupported("non-integer subscript")),
            other => Err(syntax_error(other.as_ref())),
        }
    }
}

/// The `'static` spelling of a punctuation token.
fn leak(punct: &str) -> &'static str {
    PUNCTUATION
        .iter()
        .find(|p| **p == punct)
        .copied()
        .unwrap_or("")
}

// ---------------------------------------------------------------------------
// Evaluating a path

struct Context<'a> {
    root: &'a Json,
    vars: Option<&'a Json>,
    strict: bool,
    /// Whether datetimes with and without a zone compare.
    zone: SessionZone,
}

/// Three-valued logic of predicates.
#[derive(Clone, Copy, PartialEq)]
enum Truth {
    True,
    False,
    Unknown,
}

impl Truth {
    fn of(b: bool) -> Truth {
        if b { Truth::True } else { Truth::False }
    }
}

fn member_error(message: String) -> QueryError {
    QueryError::new(SqlState::SQL_JSON_MEMBER_NOT_FOUND, message)
}

impl Context<'_> {
    /// The items `expr` yields with `current` as `@`; a predicate yields its
    /// boolean (`null` for unknown).
    fn items(&self, expr: &Expr, current: &Json) -> Result<Vec<Json>, QueryError> {
        if expr.is_predicate() {
            return Ok(vec![match self.truth(expr, current)? {
                Truth::True => Json::Bool(true),
                Truth::False => Json::Bool(false),
                Truth::Unknown => Json::Null,
            }]);
        }
        match expr {
            Expr::Literal(json) => Ok(vec![json.clone()]),
            Expr::Path(root, steps) => {
                let start = match root {
                    Root::Target => self.root.clone(),
                    Root::Current => current.clone(),
                    Root::Variable(name) => self.variable(name)?,
                    Root::Literal(json) => json.clone(),
                };
                let mut items = vec![start];
                for step in steps {
                    items = self.step(step, items)?;
                }
                Ok(items)
            }
            Expr::Arithmetic(left, operator, right) => {
                let left = self.unwrapped(self.items(left, current)?);
                let right = self.unwrapped(self.items(right, current)?);
                Ok(vec![items::binary(&left, *operator, &right)?])
            }
            Expr::Sign(inner, minus) => {
                items::unary(self.unwrapped(self.items(inner, current)?), *minus)
            }
            _ => Err(QueryError::internal("a predicate is no path")),
        }
    }

    /// Items with arrays read as their elements, in lax mode.
    fn unwrapped(&self, items: Vec<Json>) -> Vec<Json> {
        if self.strict {
            return items;
        }
        items
            .into_iter()
            .flat_map(|item| match item {
                Json::Array(elements) => elements,
                other => vec![other],
            })
            .collect()
    }

    fn variable(&self, name: &str) -> Result<Json, QueryError> {
        match self.vars {
            Some(Json::Object(vars)) => vars.get(name).cloned(),
            _ => None,
        }
        .ok_or_else(|| {
            QueryError::new(
                SqlState::UNDEFINED_OBJECT,
                format!("could not find jsonpath variable \"{name}\""),
            )
        })
    }

    fn step(&self, step: &Step, items: Vec<Json>) -> Result<Vec<Json>, QueryError> {
        let mut out = Vec::new();
        for item in items {
            match (step, item) {
                (Step::Method(items::Method::KeyValue), Json::Array(elements)) if !self.strict => {
                    for element in elements {
                        out.extend(items::key_values(element, self.root)?);
                    }
                }
                (Step::Method(items::Method::KeyValue), item) => {
                    out.extend(items::key_values(item, self.root)?);
                }
                (Step::Method(method), Json::Array(elements))
                    if method.unwraps() && !self.strict =>
                {
                    for element in elements {
                        out.extend(items::method(*method, element, self.strict)?);
                    }
                }
                (Step::Method(method), item) => {
                    out.extend(items::method(*method, item, self.strict)?);
                }
                (Step::DateTime(_), Json::Array(elements)) if !self.strict => {
                    for element in elements {
                        out.extend(self.step(step, vec![element])?);
                    }
                }
                (Step::DateTime(template), item) => {
                    out.push(datetime::method(&item, template.as_deref())?);
                }
                // Lax mode reads an array's elements for a member accessor or a filter.
                (Step::Key(_) | Step::AnyKey | Step::Filter(_), Json::Array(elements))
                    if !self.strict =>
                {
                    for element in elements {
                        out.extend(self.step(step, vec![element])?);
                    }
                }
                (Step::Key(key), Json::Object(object)) => match object.get(key) {
                    Some(value) => out.push(value.clone()),
                    None if self.strict => {
                        return Err(member_error(format!(
                            "JSON object does not contain key \"{key}\""
                        )));
                    }
                    None => {}
                },
                (Step::AnyKey, Json::Object(object)) => out.extend(object.into_values()),
                (Step::Key(_) | Step::AnyKey, _) if self.strict => {
                    return Err(member_error(
                        "jsonpath member accessor can only be applied to an object".into(),
                    ));
                }
                (Step::Key(_) | Step::AnyKey, _) => {}
                (Step::AnyIndex, Json::Array(elements)) => out.extend(elements),
                (Step::Subscripts(subscripts), Json::Array(elements)) => {
                    out.extend(self.subscripted(subscripts, elements)?);
                }
                (Step::AnyIndex | Step::Subscripts(_), _) if self.strict => {
                    return Err(QueryError::new(
                        SqlState::SQL_JSON_ARRAY_NOT_FOUND,
                        "jsonpath array accessor can only be applied to an array",
                    ));
                }
                // Lax mode reads anything else as an array of itself.
                (Step::AnyIndex, other) => out.push(other),
                (Step::Subscripts(subscripts), other) => {
                    out.extend(self.subscripted(subscripts, vec![other])?);
                }
                (Step::Filter(predicate), item) => {
                    if self.truth(predicate, &item)? == Truth::True {
                        out.push(item);
                    }
                }
            }
        }
        Ok(out)
    }

    fn subscripted(
        &self,
        subscripts: &[(Index, Option<Index>)],
        elements: Vec<Json>,
    ) -> Result<Vec<Json>, QueryError> {
        let len = elements.len() as i64;
        let position = |index: Index| match index {
            Index::At(n) => n,
            Index::FromLast(n) => len - 1 - n,
        };
        let mut out = Vec::new();
        for (from, to) in subscripts {
            let from = position(*from);
            let to = to.map_or(from, position);
            let in_bounds = from >= 0 && to < len && from <= to;
            if self.strict && !in_bounds {
                return Err(QueryError::new(
                    SqlState::INVALID_SQL_JSON_SUBSCRIPT,
                    "jsonpath array subscript is out of bounds",
                ));
            }
            for index in from.max(0)..=to.min(len - 1) {
                out.push(elements[index as usize].clone());
            }
        }
        Ok(out)
    }

    /// A predicate's truth; errors inside it make it unknown.
    fn truth(&self, expr: &Expr, current: &Json) -> Result<Truth, QueryError> {
        Ok(match expr {
            Expr::And(left, right) => {
                match (self.truth(left, current)?, self.truth(right, current)?) {
                    (Truth::False, _) | (_, Truth::False) => Truth::False,
                    (Truth::True, Truth::True) => Truth::True,
                    _ => Truth::Unknown,
                }
            }
            Expr::Or(left, right) => {
                match (self.truth(left, current)?, self.truth(right, current)?) {
                    (Truth::True, _) | (_, Truth::True) => Truth::True,
                    (Truth::False, Truth::False) => Truth::False,
                    _ => Truth::Unknown,
                }
            }
            Expr::Not(inner) => match self.truth(inner, current)? {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                Truth::Unknown => Truth::Unknown,
            },
            Expr::Exists(path) => match self.operand(path, current)? {
                Some(items) => Truth::of(!items.is_empty()),
                None => Truth::Unknown,
            },
            Expr::Compare(left, operator, right) => {
                self.any_pair(left, right, current, |l, r| {
                    compare(l, *operator, r, self.zone)
                })?
            }
            // A datetime is no string to match.
            Expr::LikeRegex(value, regex) => {
                let matches = |item: &Json, _: &Json| {
                    Ok(match item {
                        Json::String(text) if !datetime::is_datetime(item) => {
                            Truth::of(regex.is_match(text))
                        }
                        _ => Truth::Unknown,
                    })
                };
                self.any_pair(value, &Expr::Literal(Json::Null), current, matches)?
            }
            Expr::StartsWith(value, prefix) => self.any_pair(value, prefix, current, |v, p| {
                let datetimes = datetime::is_datetime(v) || datetime::is_datetime(p);
                Ok(match (v, p) {
                    (Json::String(v), Json::String(p)) if !datetimes => {
                        Truth::of(v.starts_with(p.as_str()))
                    }
                    _ => Truth::Unknown,
                })
            })?,
            Expr::Path(..) | Expr::Literal(_) | Expr::Arithmetic(..) | Expr::Sign(..) => {
                return Err(syntax_error(None));
            }
        })
    }

    /// An operand's items, arrays unwrapped in lax mode; `None` on an error
    /// (the predicate is then unknown).
    fn operand(&self, expr: &Expr, current: &Json) -> Result<Option<Vec<Json>>, QueryError> {
        match self.items(expr, current) {
            Ok(items) if self.strict => Ok(Some(items)),
            Ok(items) => Ok(Some(
                items
                    .into_iter()
                    .flat_map(|item| match item {
                        Json::Array(elements) => elements,
                        other => vec![other],
                    })
                    .collect(),
            )),
            Err(error) if error.code == SqlState::FEATURE_NOT_SUPPORTED => Err(error),
            Err(_) => Ok(None),
        }
    }

    /// PostgreSQL's rule for a predicate over two sequences: true when a pair
    /// is (in strict mode, unknown as soon as one is unknown), else unknown
    /// when a pair was, else false.
    fn any_pair(
        &self,
        left: &Expr,
        right: &Expr,
        current: &Json,
        test: impl Fn(&Json, &Json) -> Result<Truth, QueryError>,
    ) -> Result<Truth, QueryError> {
        let (Some(lefts), Some(rights)) =
            (self.operand(left, current)?, self.operand(right, current)?)
        else {
            return Ok(Truth::Unknown);
        };
        let (mut found, mut unknown) = (false, false);
        for l in &lefts {
            for r in &rights {
                match test(l, r)? {
                    Truth::Unknown if self.strict => return Ok(Truth::Unknown),
                    Truth::Unknown => unknown = true,
                    Truth::True if !self.strict => return Ok(Truth::True),
                    Truth::True => found = true,
                    Truth::False => {}
                }
            }
        }
        Ok(if found {
            Truth::True
        } else if unknown {
            Truth::Unknown
        } else {
            Truth::False
        })
    }
}

/// Two items compared as PostgreSQL's jsonpath compares them: a null equals
/// only a null, items of different kinds (and arrays, objects) do not compare;
/// datetimes compare as [`datetime::compare`] has them.
fn compare(
    left: &Json,
    operator: Comparison,
    right: &Json,
    zone: SessionZone,
) -> Result<Truth, QueryError> {
    use std::cmp::Ordering;
    let datetimes = datetime::is_datetime(left) || datetime::is_datetime(right);
    let session_zone = matches!(zone, SessionZone::Used);
    let ordering = match (left, right) {
        _ if datetimes => match datetime::compare(left, right, session_zone) {
            Some(ordering) => ordering?,
            // A null equals no datetime; anything else does not compare.
            None if matches!(left, Json::Null) || matches!(right, Json::Null) => {
                return Ok(Truth::of(operator == Comparison::Ne));
            }
            None => return Ok(Truth::Unknown),
        },
        (Json::Null, Json::Null) => Ordering::Equal,
        (Json::Null, _) | (_, Json::Null) => return Ok(Truth::of(operator == Comparison::Ne)),
        (Json::Bool(l), Json::Bool(r)) => l.cmp(r),
        (Json::String(l), Json::String(r)) => l.cmp(r),
        (Json::Number(l), Json::Number(r)) => match (Decimal::parse(l), Decimal::parse(r)) {
            (Ok(Some(l)), Ok(Some(r))) => l.cmp(&r),
            _ => return Ok(Truth::Unknown),
        },
        _ => return Ok(Truth::Unknown),
    };
    Ok(Truth::of(match operator {
        Comparison::Eq => ordering == Ordering::Equal,
        Comparison::Ne => ordering != Ordering::Equal,
        Comparison::Lt => ordering == Ordering::Less,
        Comparison::Le => ordering != Ordering::Greater,
        Comparison::Gt => ordering == Ordering::Greater,
        Comparison::Ge => ordering != Ordering::Less,
    }))
}

/// `target @? path` and `target @@ path`: `jsonb_path_exists` and
/// `jsonb_path_match`, errors kept quiet (planned by `crate::semantics`).
pub fn operator_call(
    name: &str,
    target: datafusion::prelude::Expr,
    path: datafusion::prelude::Expr,
) -> Result<datafusion::prelude::Expr, QueryError> {
    use datafusion::prelude::lit;
    // No variables, errors kept quiet.
    super::call(name, vec![target, path, lit("{}"), lit(true)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(target: &str, path: &str) -> Result<Vec<String>, QueryError> {
        let row = [
            Datum::Jsonb(floe_repr::strconv::parse_jsonb(target).unwrap()),
            Datum::Text(path.into()),
        ];
        Ok(evaluate(&row, SessionZone::Refused)?
            .iter()
            .map(floe_repr::strconv::json_text)
            .collect())
    }

    #[test]
    fn accessors_and_filters() {
        assert_eq!(
            run(r#"{"a":[1,2,3]}"#, "$.a[*] ? (@ > 1)").unwrap(),
            ["2", "3"]
        );
        assert_eq!(run("[1,2,3]", "$[last]").unwrap(), ["3"]);
        assert_eq!(
            run("[1,2,3]", "$[0 to 1, last - 1]").unwrap(),
            ["1", "2", "2"]
        );
        assert_eq!(run(r#"[{"a":1},{"a":2}]"#, "$.a").unwrap(), ["1", "2"]);
        assert_eq!(run(r#"{"a":1}"#, "$[0]").unwrap(), [r#"{"a":1}"#]);
        assert_eq!(run(r#"{"a":1}"#, "$.a == 1").unwrap(), ["true"]);
        assert_eq!(run(r#"{"a":"x"}"#, "$.a > 1").unwrap(), ["null"]);
        assert!(run(r#"{"a":1}"#, "$.b").unwrap().is_empty());
    }

    #[test]
    fn arithmetic_and_item_methods() {
        // Each PostgreSQL 15's answer.
        assert_eq!(
            run(r#"{"a":7,"b":2.0}"#, "$.a / $.b").unwrap(),
            ["3.5000000000000000"]
        );
        assert_eq!(run(r#"{"a":7,"b":2.0}"#, "$.a % $.b").unwrap(), ["1.0"]);
        assert_eq!(
            run(r#"{"a":7,"b":2.0}"#, "$.a * $.b - 1").unwrap(),
            ["13.0"]
        );
        assert_eq!(run("[1,2]", "-$[*]").unwrap(), ["-1", "-2"]);
        assert_eq!(
            run("[1, 2.5, -3.5]", "$[*].floor()").unwrap(),
            ["1", "2", "-4"]
        );
        assert_eq!(
            run("[1, 2.5, -3.5]", "$.ceiling()").unwrap(),
            ["1", "3", "-3"]
        );
        assert_eq!(
            run(r#"{"a":[1,2],"b":{}}"#, "$.*.size()").unwrap(),
            ["2", "1"]
        );
        assert_eq!(run("[1,2]", "$.type()").unwrap(), [r#""array""#]);
        assert_eq!(
            run(r#""1.23456789012345678""#, "$.double()").unwrap(),
            ["1.23456789012346"]
        );
        assert_eq!(run(r#"{"a":7}"#, "$.a ? (@ * 2 > 10)").unwrap(), ["7"]);
    }

    #[test]
    fn datetimes_read_print_and_compare() {
        let times = r#"["2023-01-02", "10:11:12.5+01", "2023-01-02T10:11:12", " 2023-01-02 10:11:12-03:30"]"#;
        assert_eq!(
            run(times, "$[*].datetime()").unwrap(),
            [
                r#""2023-01-02""#,
                r#""10:11:12.5+01:00""#,
                r#""2023-01-02T10:11:12""#,
                r#""2023-01-02T10:11:12-03:30""#
            ]
        );
        assert_eq!(
            run(times, "$[2].datetime().type()").unwrap(),
            [r#""timestamp without time zone""#]
        );
        let dates = r#"["2023-01-02", "2022-12-31", "x"]"#;
        assert_eq!(
            run(
                dates,
                r#"$[*] ? (@.datetime() >= "2023-01-02 00:00:00".datetime())"#
            )
            .unwrap(),
            [r#""2023-01-02""#]
        );
        // A datetime is no string: it equals none.
        assert_eq!(
            run(dates, r#"$[0].datetime() == "2023-01-02""#).unwrap(),
            ["null"]
        );
        assert_eq!(
            run(
                r#""02/01/2023 10:11""#,
                r#"$.datetime("dd/mm/yyyy HH24:MI")"#
            )
            .unwrap(),
            [r#""2023-01-02T10:11:00""#]
        );
    }

    #[test]
    fn strict_errors_and_refusals() {
        let code = |target: &str, path: &str| run(target, path).unwrap_err().code;
        assert_eq!(
            code(r#"{"a":1}"#, "strict $.b"),
            SqlState::SQL_JSON_MEMBER_NOT_FOUND
        );
        assert_eq!(
            code("[1]", "strict $[5]"),
            SqlState::INVALID_SQL_JSON_SUBSCRIPT
        );
        assert_eq!(code("1", "($ + 1) * 2"), SqlState::FEATURE_NOT_SUPPORTED);
        assert_eq!(
            code("1", "$.datetime()"),
            SqlState::INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION
        );
        assert_eq!(
            code(r#""2023-02-30""#, "$.datetime()"),
            SqlState::INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION
        );
        // PostgreSQL 15: 2203C.
        assert_eq!(
            code("1", "$.keyvalue()"),
            SqlState::SQL_JSON_OBJECT_NOT_FOUND
        );
        assert_eq!(code("1", "$.a ? ("), SqlState::SYNTAX_ERROR);
        assert_eq!(
            code("1", "$ ? (@ like_regex \"(\")"),
            SqlState::INVALID_REGULAR_EXPRESSION
        );
    }
}
