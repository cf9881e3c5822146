//! Row constructors compared as Postgres compares them, in terms of their
//! fields (DataFusion has no row comparisons):
//!
//! - `(a, b) = (c, d)` is `a = c AND b = d`, `<>` the `OR` of `<>`: the same
//!   three-valued result as Postgres' (false or true as soon as a pair decides
//!   it, else NULL when a pair is NULL).
//! - `(a, b) < (c, d)` compares pairs left to right until one is unequal:
//!   `a < c OR (a = c AND b < d)`.
//! - `(a, b) IN ((1, 2), (3, 4))` is the `OR` of the row equalities.
//! - `(a, b) IN (SELECT x, y ...)` is true when a row of the subquery equals
//!   it, NULL when none does but one might (a pair is NULL), else false: two
//!   `EXISTS` over the subquery's rows.

use sqlparser::ast::{BinaryOperator, Expr};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// The name of the subquery's relation in the `EXISTS` of a row `IN`, and the
/// prefix of its columns' names (a private-use character no client writes).
const ROW: &str = "\u{E004}row";

/// `expr` with its row comparison spelled field by field; `None` when it is
/// no row comparison.
pub fn rewrite(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::BinaryOp { left, op, right } => {
            let (Expr::Tuple(left), Expr::Tuple(right)) = (left.as_ref(), right.as_ref()) else {
                return None;
            };
            compare(left, op, right)
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let Expr::Tuple(row) = expr.as_ref() else {
                return None;
            };
            let equalities = list
                .iter()
                .map(|item| match item {
                    Expr::Tuple(other) => compare(row, &BinaryOperator::Eq, other),
                    _ => None,
                })
                .collect::<Option<Vec<Expr>>>()?;
            let any = join(equalities, BinaryOperator::Or)?;
            Some(negate(any, *negated))
        }
        Expr::InSubquery {
            expr,
            subquery,
            negated,
        } => {
            let Expr::Tuple(row) = expr.as_ref() else {
                return None;
            };
            in_subquery(row, &subquery.to_string(), *negated)
        }
        _ => None,
    }
}

/// Two rows of as many fields compared under `op`, field by field.
fn compare(left: &[Expr], op: &BinaryOperator, right: &[Expr]) -> Option<Expr> {
    if left.len() != right.len() || left.is_empty() {
        return None;
    }
    let pair = |index: usize, op: BinaryOperator| Expr::BinaryOp {
        left: Box::new(nested(left[index].clone())),
        op,
        right: Box::new(nested(right[index].clone())),
    };
    let pairs = |op: BinaryOperator| (0..left.len()).map(|i| pair(i, op.clone())).collect();
    match op {
        BinaryOperator::Eq => join(pairs(BinaryOperator::Eq), BinaryOperator::And),
        BinaryOperator::NotEq => join(pairs(BinaryOperator::NotEq), BinaryOperator::Or),
        BinaryOperator::Lt | BinaryOperator::LtEq | BinaryOperator::Gt | BinaryOperator::GtEq => {
            let strict = match op {
                BinaryOperator::LtEq => BinaryOperator::Lt,
                BinaryOperator::GtEq => BinaryOperator::Gt,
                other => other.clone(),
            };
            // From the last pair out: the last compares under `op` itself.
            let last = left.len() - 1;
            let mut ordered = pair(last, op.clone());
            for index in (0..last).rev() {
                ordered = Expr::BinaryOp {
                    left: Box::new(pair(index, strict.clone())),
                    op: BinaryOperator::Or,
                    right: Box::new(nested(Expr::BinaryOp {
                        left: Box::new(pair(index, BinaryOperator::Eq)),
                        op: BinaryOperator::And,
                        right: Box::new(nested(ordered)),
                    })),
                };
            }
            Some(nested(ordered))
        }
        _ => None,
    }
}

/// `(a, b) [NOT] IN (subquery)`, with Postgres' NULL: a `CASE` over whether
/// some row equals the tuple, else whether some row's equality is NULL.
fn in_subquery(row: &[Expr], subquery: &str, negated: bool) -> Option<Expr> {
    let columns: Vec<String> = (0..row.len()).map(|i| format!("\"{ROW}{i}\"")).collect();
    let equality: Vec<String> = row
        .iter()
        .zip(&columns)
        .map(|(field, column)| format!("\"{ROW}\".{column} = ({field})"))
        .collect();
    let equality = equality.join(" AND ");
    let rows = format!("FROM ({subquery}) AS \"{ROW}\"({})", columns.join(", "));
    let sql = format!(
        "CASE WHEN EXISTS (SELECT 1 {rows} WHERE {equality}) THEN true \
         WHEN EXISTS (SELECT 1 {rows} WHERE ({equality}) IS NULL) THEN NULL::boolean \
         ELSE false END"
    );
    let parsed = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .ok()?
        .parse_expr()
        .ok()?;
    Some(negate(parsed, negated))
}

/// `exprs` joined by `op` (`AND`, `OR`), parenthesized.
fn join(exprs: Vec<Expr>, op: BinaryOperator) -> Option<Expr> {
    let joined = exprs.into_iter().reduce(|left, right| Expr::BinaryOp {
        left: Box::new(left),
        op: op.clone(),
        right: Box::new(right),
    })?;
    Some(nested(joined))
}

fn negate(expr: Expr, negated: bool) -> Expr {
    if negated {
        Expr::UnaryOp {
            op: sqlparser::ast::UnaryOperator::Not,
            expr: Box::new(nested(expr)),
        }
    } else {
        expr
    }
}

fn nested(expr: Expr) -> Expr {
    Expr::Nested(Box::new(expr))
}
