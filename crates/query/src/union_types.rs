//! A UNION's (INTERSECT's, EXCEPT's) columns typed by all its inputs before
//! floe chooses the operators that read them.
//!
//! DataFusion types a set operation's columns by its first input's until its
//! analyzer makes the inputs one type (INTERSECT and EXCEPT, planned as semi
//! and anti joins, by their left input's for good), after the statement is
//! planned: `SELECT
//! v / 2 FROM (SELECT x AS v FROM t UNION ALL SELECT amount FROM t)` of an
//! integer `x` and a numeric `amount` was planned as a division of integers.
//! PostgreSQL types each column by all the inputs (`select_common_type`).
//!
//! As for CASE ([`crate::case_types`], whose two extra plannings this shares):
//! the numbered planning marks each item of a set operation's first select
//! list (`floe_union_item(item, 'k:i')`, which is the item), the common type
//! of each column whose inputs are numbers of different types is read from
//! it, and the statement is planned again with those items of the first
//! select list cast to it (keeping their names).
//!
//! A first input whose items cannot be marked one by one (a select list with
//! a wildcard, `VALUES`, `TABLE t`) is read through a derived table in the
//! numbered planning (`SELECT * FROM (<input>) AS floe_union_first_k`), whose
//! columns are its marks, and, where a column needs a cast, in the typed
//! planning as `SELECT CAST(c0 AS ...) AS "x", c1 AS "y" FROM (<input>) AS
//! floe_union_first_k(c0, c1)`, named by the numbered planning's names.

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, JoinType, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use sqlparser::ast::{
    self, Ident, Query, Select, SelectItem, SetExpr, Statement, Value, VisitMut, VisitorMut,
};

use crate::case_types::{common_of, needs_cast, sql_cast, sql_type};
use crate::error::QueryError;

/// The function that marks a set operation's first select list's items.
pub const UNION_ITEM: &str = "floe_union_item";

/// The alias (followed by its set operation's number) of the derived table
/// a first input that cannot be marked item by item is read through.
const FIRST_INPUT: &str = "floe_union_first_";

/// A cast of item `item` of set operation `number`'s first select list (of
/// column `item` where the first input is read through a derived table).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemCast {
    pub number: i64,
    pub item: usize,
    pub data_type: DataType,
}

/// The casts a statement's set operations need: of marked items, and the
/// names of the columns of each first input read through a derived table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnionCasts {
    pub items: Vec<ItemCast>,
    pub derived_names: Vec<(i64, Vec<String>)>,
}

impl UnionCasts {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A column of a set operation's first input read from the numbered
/// planning: set operation `number`'s item (or column) `item`.
struct Mark {
    number: i64,
    item: usize,
    /// Whether the first input is read through a derived table.
    derived: bool,
}

/// Whether `plan` has a set operation a column of which has inputs of
/// numbers of different types, typed by its first input's.
pub fn has_mixed_union(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        if let Some(inputs) = set_operation_inputs(node) {
            let width = node.schema().fields().len();
            found = (0..width).any(|column| column_cast(&inputs, column).is_some());
        }
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// The inputs of a set operation: a union's, or the two sides of the join the
/// engine plans INTERSECT and EXCEPT as (a semi or anti join, which a FROM
/// clause does not plan: `IN` and `EXISTS` stay subqueries until optimized).
fn set_operation_inputs(node: &LogicalPlan) -> Option<Vec<&LogicalPlan>> {
    match node {
        LogicalPlan::Union(union) => Some(union.inputs.iter().map(AsRef::as_ref).collect()),
        LogicalPlan::Join(join)
            if matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti) =>
        {
            Some(vec![join.left.as_ref(), join.right.as_ref()])
        }
        _ => None,
    }
}

/// The type column `column` of these inputs is cast to in the first, if it
/// needs one.
fn column_cast(inputs: &[&LogicalPlan], column: usize) -> Option<DataType> {
    let types: Vec<DataType> = inputs
        .iter()
        .filter_map(|input| {
            let fields = input.schema().fields();
            fields.get(column).map(|f| f.data_type().clone())
        })
        .filter(|t| !t.is_null())
        .collect();
    let common = common_of(&types)?;
    needs_cast(types.first()?, &common).then_some(common)
}

/// `statement` with the items of each set operation's first select list
/// marked (see the module documentation).
pub fn marked(statement: &Statement) -> Statement {
    let mut statement = statement.clone();
    let mut marker = Items {
        next: 0,
        casts: None,
    };
    let _ = statement.visit(&mut marker);
    statement
}

/// The casts the marked items of `plan` (planned from [`marked`]) need.
pub fn item_casts(plan: &LogicalPlan) -> UnionCasts {
    let mut casts = UnionCasts::default();
    let _ = plan.apply_with_subqueries(|node| {
        if let Some(inputs) = set_operation_inputs(node)
            && let Some(first) = inputs.first()
            && let Some(marks) = first_select_marks(first)
        {
            for (column, mark) in marks.into_iter().enumerate() {
                let (Some(mark), Some(data_type)) = (mark, column_cast(&inputs, column)) else {
                    continue;
                };
                if mark.derived && !casts.derived_names.iter().any(|(n, _)| *n == mark.number) {
                    let names = first.schema().fields().iter();
                    let names = names.map(|field| field.name().clone()).collect();
                    casts.derived_names.push((mark.number, names));
                }
                add_cast(&mut casts.items, mark, data_type);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    casts
}

/// Adds the cast of `mark`'s item to `data_type` to `casts`.
fn add_cast(casts: &mut Vec<ItemCast>, mark: Mark, data_type: DataType) {
    let existing = casts
        .iter_mut()
        .find(|c| c.number == mark.number && c.item == mark.item);
    match existing {
        // A set operation inside another: the type of both.
        Some(cast) => {
            if let Some(common) = common_of(&[cast.data_type.clone(), data_type]) {
                cast.data_type = common;
            }
        }
        None => casts.push(ItemCast {
            number: mark.number,
            item: mark.item,
            data_type,
        }),
    }
}

/// `statement` with the items `casts` name cast (the set operations counted
/// as [`marked`] counts them).
pub fn typed(statement: &Statement, casts: &UnionCasts) -> Statement {
    let mut statement = statement.clone();
    let mut caster = Items {
        next: 0,
        casts: Some(casts),
    };
    let _ = statement.visit(&mut caster);
    statement
}

/// Marks (`casts` `None`) or casts the items of each set operation's first
/// select list, numbering the set operations in the order queries are
/// visited.
struct Items<'a> {
    next: i64,
    casts: Option<&'a UnionCasts>,
}

impl VisitorMut for Items<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::SetOperation { .. } = query.body.as_ref() else {
            return ControlFlow::Continue(());
        };
        let number = self.next;
        self.next += 1;
        let first = first_input(&mut query.body);
        let select = match first {
            SetExpr::Select(select) if !has_wildcard(select) => select,
            _ => {
                read_through_derived(first, number, self.casts);
                return ControlFlow::Continue(());
            }
        };
        for (index, item) in select.projection.iter_mut().enumerate() {
            match self.casts {
                None => {
                    map_item(item, |expr| mark_call(expr, number, index));
                }
                Some(casts) => {
                    if let Some(data_type) = cast_of(casts, number, index) {
                        map_item(item, |expr| sql_cast(expr, data_type));
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// The type item `item` of set operation `number` is cast to, if any.
fn cast_of(casts: &UnionCasts, number: i64, item: usize) -> Option<ast::DataType> {
    let cast = casts
        .items
        .iter()
        .find(|c| c.number == number && c.item == item)?;
    sql_type(&cast.data_type)
}

fn has_wildcard(select: &Select) -> bool {
    select.projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    })
}

/// Set operation `number`'s first input `first` read through a derived
/// table (see the module documentation): marked when `casts` is `None`,
/// typed where `casts` has its column names.
fn read_through_derived(first: &mut SetExpr, number: i64, casts: Option<&UnionCasts>) {
    let alias = format!("{FIRST_INPUT}{number}");
    let placeholder = || {
        SetExpr::Values(ast::Values {
            explicit_row: false,
            value_keyword: false,
            rows: Vec::new(),
        })
    };
    let Some(casts) = casts else {
        let body = std::mem::replace(first, placeholder());
        *first = match crate::rewrite::selected_from(body.clone(), &alias, &[]) {
            Some(select) => SetExpr::Select(select),
            None => body,
        };
        return;
    };
    let Some((_, names)) = casts.derived_names.iter().find(|(n, _)| *n == number) else {
        return;
    };
    let columns: Vec<ast::TableAliasColumnDef> = (0..names.len())
        .map(|index| ast::TableAliasColumnDef::from_name(format!("floe_c{index}")))
        .collect();
    let body = std::mem::replace(first, placeholder());
    let Some(mut select) = crate::rewrite::selected_from(body.clone(), &alias, &columns) else {
        *first = body;
        return;
    };
    select.projection = names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let column = ast::Expr::Identifier(Ident::new(format!("floe_c{index}")));
            SelectItem::ExprWithAlias {
                expr: match cast_of(casts, number, index) {
                    Some(data_type) => sql_cast(column, data_type),
                    None => column,
                },
                alias: Ident::with_quote('"', name),
            }
        })
        .collect();
    *first = SetExpr::Select(select);
}

/// The first input of a set operation's inputs, nested or not.
fn first_input(body: &mut SetExpr) -> &mut SetExpr {
    match body {
        SetExpr::SetOperation { left, .. } => first_input(left),
        SetExpr::Query(query) => first_input(&mut query.body),
        other => other,
    }
}

/// `item` with its expression changed by `change`, named as PostgreSQL
/// names it before the change (a wildcard stays as it is).
fn map_item(item: &mut SelectItem, change: impl FnOnce(ast::Expr) -> ast::Expr) {
    let placeholder = || ast::Expr::Value(Value::Null.into());
    match item {
        SelectItem::UnnamedExpr(expr) => {
            let alias = Ident::with_quote('"', crate::naming::column_name(expr));
            let expr = std::mem::replace(expr, placeholder());
            *item = SelectItem::ExprWithAlias {
                expr: change(expr),
                alias,
            };
        }
        SelectItem::ExprWithAlias { expr, .. } => {
            let value = std::mem::replace(expr, placeholder());
            *expr = change(value);
        }
        _ => {}
    }
}

fn mark_call(expr: ast::Expr, number: i64, item: usize) -> ast::Expr {
    let mark = ast::Expr::Value(Value::SingleQuotedString(format!("{number}:{item}")).into());
    crate::rewrite::function_call(UNION_ITEM, vec![expr, mark])
}

/// The marks of the first select list under a set operation's first input,
/// by column, where the column is a marked item or a column of a first input
/// read through a derived table.
fn first_select_marks(input: &LogicalPlan) -> Option<Vec<Option<Mark>>> {
    match input {
        LogicalPlan::Projection(projection) => Some(
            projection
                .expr
                .iter()
                .enumerate()
                .map(|(column, e)| mark_of(e.clone().unalias_nested().data, column))
                .collect(),
        ),
        LogicalPlan::Union(_) | LogicalPlan::Join(_) => {
            first_select_marks(set_operation_inputs(input)?.first()?)
        }
        LogicalPlan::SubqueryAlias(alias) => first_select_marks(&alias.input),
        LogicalPlan::Sort(sort) => first_select_marks(&sort.input),
        LogicalPlan::Limit(limit) => first_select_marks(&limit.input),
        LogicalPlan::Distinct(distinct) => first_select_marks(distinct.input()),
        _ => None,
    }
}

/// The mark of `expr`, column `column` of a first input's projection.
fn mark_of(expr: Expr, column: usize) -> Option<Mark> {
    if let Expr::Column(read) = &expr {
        let number = read.relation.as_ref()?.table().strip_prefix(FIRST_INPUT)?;
        return Some(Mark {
            number: number.parse().ok()?,
            item: column,
            derived: true,
        });
    }
    let Expr::ScalarFunction(function) = expr else {
        return None;
    };
    if function.name() != UNION_ITEM {
        return None;
    }
    match function.args.get(1) {
        Some(Expr::Literal(
            ScalarValue::Utf8(Some(text)) | ScalarValue::Utf8View(Some(text)),
            _,
        )) => {
            let (number, item) = text.split_once(':')?;
            Some(Mark {
                number: number.parse().ok()?,
                item: item.parse().ok()?,
                derived: false,
            })
        }
        _ => None,
    }
}

/// `floe_union_item(value, mark)`: `value`, of its type and field (planned in
/// the numbered planning only, never run).
pub fn function() -> ScalarUDF {
    ScalarUDF::new_from_impl(UnionItem {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct UnionItem {
    signature: Signature,
}

impl ScalarUDFImpl for UnionItem {
    fn name(&self) -> &str {
        UNION_ITEM
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        arg_types
            .first()
            .cloned()
            .ok_or_else(|| QueryError::internal("floe_union_item arity").into_datafusion())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        args.arg_fields
            .first()
            .cloned()
            .ok_or_else(|| QueryError::internal("floe_union_item arity").into_datafusion())
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if args.args.is_empty() {
            return Err(QueryError::internal("floe_union_item arity").into_datafusion());
        }
        Ok(args.args.swap_remove(0))
    }
}
