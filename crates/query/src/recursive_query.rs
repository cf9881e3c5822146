//! A recursive query's terms made one type, as PostgreSQL's are.
//!
//! PostgreSQL types a recursive CTE's columns by its non-recursive term: in
//! `WITH RECURSIVE r(n) AS (SELECT 1.50 UNION ALL SELECT n + 1 FROM r ...)`
//! `n` is a `numeric`. floe's literal `1.50` is a decimal of scale 2, and
//! its `n + 1` an unconstrained numeric (a decimal of ten places): the
//! engine's cast of the recursive term to the first's type becomes floe's
//! cast to `numeric` (see [`crate::semantics`]), and the engine then refuses
//! the query, its terms being of two types. So, after floe's semantics, a
//! recursive query (also one in a subquery) whose recursive term answers
//! wider decimals than its first term reads both terms at the wider type (the
//! first term's values fit it, so none changes); a column whose terms are of
//! one type but differ in floe's metadata (an unconstrained numeric column, a
//! computed numeric) is read with the metadata floe's cast of the other term
//! answers. Any other difference is left as it was.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result as DfResult};
use datafusion::datasource::cte_worktable::CteWorkTable;
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, Projection, RecursiveQuery,
    TableScan,
};

use floe_repr::{SqlScalarType, SqlState};

use crate::error::QueryError;
use crate::functions;

/// `plan` with each recursive query's terms made one type (see the module
/// documentation), and the nodes above it typed by what it answers.
pub fn unify_terms(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    Ok(unified(plan)?.0)
}

/// [`unify_terms`] of `plan`, and whether it changed.
fn unified(plan: LogicalPlan) -> DfResult<(LogicalPlan, bool)> {
    let (plan, changed) = with_inputs(plan, unified)?;
    // A recursive query in a subquery (`SELECT (WITH RECURSIVE ...)`).
    let in_subqueries = plan.map_subqueries(|subquery| {
        let (subquery, changed) = unified(subquery)?;
        Ok(Transformed::new_transformed(subquery, changed))
    })?;
    let (plan, changed) = if in_subqueries.transformed {
        (in_subqueries.data.recompute_schema()?, true)
    } else {
        (in_subqueries.data, changed)
    };
    if let LogicalPlan::RecursiveQuery(query) = &plan
        && let Some(unified) = one_type(query)?
    {
        return Ok((unified, true));
    }
    Ok((plan, changed))
}

/// `plan` with its inputs rewritten by `rewrite`, rebuilt (its schema
/// recomputed) when one changed.
fn with_inputs(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(LogicalPlan) -> DfResult<(LogicalPlan, bool)>,
) -> DfResult<(LogicalPlan, bool)> {
    let mut changed = false;
    let mut inputs = Vec::new();
    for input in plan.inputs() {
        let (input, input_changed) = rewrite(input.clone())?;
        changed |= input_changed;
        inputs.push(input);
    }
    if !changed {
        return Ok((plan, false));
    }
    Ok((plan.with_new_exprs(plan.expressions(), inputs)?, true))
}

/// `query` with its terms of one type; `None` where they are already, or
/// where they differ otherwise than [`column_type`] resolves.
fn one_type(query: &RecursiveQuery) -> DfResult<Option<LogicalPlan>> {
    // A node above one floe's semantics retyped still has its old schema.
    let static_term = retyped_schemas(query.static_term.as_ref().clone())?;
    let recursive_term = retyped_schemas(query.recursive_term.as_ref().clone())?;
    let first = static_term.schema();
    let recursive = recursive_term.schema();
    for index in 0..first.fields().len().min(recursive.fields().len()) {
        let term = Term {
            field: recursive.field(index),
            expr: output_expr(&recursive_term, index).map(|(expr, _)| expr),
        };
        check_overall_type(query, index, first.field(index), term)?;
    }
    let mut types = Vec::with_capacity(first.fields().len());
    for index in 0..first.fields().len() {
        match column_type(index, &static_term, &recursive_term)? {
            Some(field) => types.push(field),
            None => return Ok(None),
        }
    }
    let same = |schema: &datafusion::common::DFSchema| {
        schema
            .fields()
            .iter()
            .zip(&types)
            .all(|(field, target)| same_type(field, target))
    };
    if same(first) && same(recursive) {
        return Ok(None);
    }
    let Some(static_term) = typed_as(static_term.clone(), &types)? else {
        return Ok(None);
    };
    let (recursive_term, _) = reading_work_table(recursive_term.clone(), &query.name, &types)?;
    // Its types follow the work table's: where they still differ from the
    // first term's, the query stays as it was.
    let Some(recursive_term) = typed_as(recursive_term, &types)? else {
        return Ok(None);
    };
    if !same(recursive_term.schema()) || !same(static_term.schema()) {
        return Ok(None);
    }
    let query = RecursiveQuery::try_new(
        query.name.clone(),
        Arc::new(static_term),
        Arc::new(recursive_term),
        query.is_distinct,
    )?;
    Ok(Some(LogicalPlan::RecursiveQuery(query)))
}

/// PostgreSQL's refusal (42804) of a recursive query whose column `index`
/// is of one type in its first term and of another in the union of both
/// terms: the first term's numeric of a typmod (`numeric(10,2)`) the
/// recursive term's does not keep (their union is a plain numeric), or its
/// integer where the recursive term's is wider.
fn check_overall_type(
    query: &RecursiveQuery,
    index: usize,
    first: &Field,
    recursive: Term<'_>,
) -> DfResult<()> {
    let first_type = functions::sql_type(first);
    let recursive_type = functions::sql_type(recursive.field);
    let overall = match (&first_type, &recursive_type) {
        (SqlScalarType::Numeric { .. }, _) if drops_typmod(first, recursive) => {
            SqlScalarType::Numeric {
                precision: None,
                max_scale: None,
            }
        }
        _ if wider_integer(&first_type, &recursive_type) => recursive_type,
        _ => return Ok(()),
    };
    Err(overall_type_error(&query.name, index, &first_type, &overall).into_datafusion())
}

/// PostgreSQL's 42804 for column `index` of recursive query `name`.
fn overall_type_error(
    name: &str,
    index: usize,
    first_type: &SqlScalarType,
    overall: &SqlScalarType,
) -> QueryError {
    QueryError::new(
        SqlState::DATATYPE_MISMATCH,
        format!(
            "recursive query \"{name}\" column {} has type {first_type} in non-recursive term but type {overall} overall",
            index + 1
        ),
    )
    .with_hint("Cast the output of the non-recursive term to the correct type.")
}

/// PostgreSQL's refusal of a recursive query of `plan` (as planned, before
/// floe's semantics) whose recursive term answers a wider integer than its
/// first term: the engine casts the recursive term's `SELECT` list to the
/// first term's types when it plans the query (`n::bigint + 1` of an
/// integer first term is `CAST(... AS Int32)`), where a cast the query wrote
/// is floe's (`floe_cast`). floe's semantics later makes the engine's casts
/// floe's too, so [`check_overall_type`] cannot tell them apart.
pub fn refuse_narrowed_terms(plan: &LogicalPlan) -> Result<(), QueryError> {
    let mut refusal = None;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::RecursiveQuery(query) = node {
            refusal = narrowed_column(query);
        }
        Ok(if refusal.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    refusal.map_or(Ok(()), Err)
}

/// The refusal of `query`'s first column whose recursive term the engine
/// narrowed (see [`refuse_narrowed_terms`]).
fn narrowed_column(query: &RecursiveQuery) -> Option<QueryError> {
    let first = query.static_term.schema();
    let recursive = query.recursive_term.schema();
    (0..first.fields().len().min(recursive.fields().len())).find_map(|index| {
        let (expr, input) = output_expr(&query.recursive_term, index)?;
        let field = recursive.field(index).as_ref();
        let uncast = uncast_type(expr, input, field)?;
        let first_type = functions::sql_type(first.field(index));
        let recursive_type = functions::sql_type(&field.clone().with_data_type(uncast));
        wider_integer(&first_type, &recursive_type)
            .then(|| overall_type_error(&query.name, index, &first_type, &recursive_type))
    })
}

/// A recursive term's output column: its field, and the expression of its
/// projection where it has one.
struct Term<'a> {
    field: &'a Field,
    expr: Option<&'a Expr>,
}

/// The type of a recursive term's column before the engine cast it to the
/// first term's: DataFusion casts the recursive term's `SELECT` list to the
/// first term's types when it plans the query (`n::bigint + 1` of an integer
/// first term is `CAST(... AS Int32)`), where a cast the query wrote is
/// floe's (`floe_cast`) and stays.
/// `output` is the column's expression, `input` the schema it is typed
/// against, `field` the column.
fn uncast_type(output: &Expr, input: &DFSchema, field: &Field) -> Option<DataType> {
    let Expr::Cast(Cast { expr, field: cast }) = output.clone().unalias() else {
        return None;
    };
    if cast.data_type() != field.data_type() {
        return None;
    }
    expr.get_type(input).ok()
}

/// Whether `recursive` is an integer wider than the integer `first`.
fn wider_integer(first: &SqlScalarType, recursive: &SqlScalarType) -> bool {
    matches!(
        (first, recursive),
        (
            SqlScalarType::Int16,
            SqlScalarType::Int32 | SqlScalarType::Int64
        ) | (SqlScalarType::Int32, SqlScalarType::Int64)
    )
}

/// The expression of `plan`'s output column `index`, and the schema it is
/// typed against, where `plan` is a projection (the recursive term's
/// `SELECT` list). Where it only names a
/// column of a projection below it (the display-scale rewrite puts one
/// between the `SELECT` list and the term's output), that column's
/// expression.
fn output_expr(plan: &LogicalPlan, index: usize) -> Option<(&Expr, &DFSchema)> {
    let LogicalPlan::Projection(projection) = plan else {
        return None;
    };
    let expr = projection.expr.get(index)?;
    let named = match expr {
        Expr::Alias(alias) => alias.expr.as_ref(),
        other => other,
    };
    if let Expr::Column(column) = named
        && let Ok(below) = projection.input.schema().index_of_column(column)
        && let Some(below) = output_expr(&projection.input, below)
    {
        return Some(below);
    }
    Some((expr, projection.input.schema().as_ref()))
}

/// Whether the first term's numeric column `first` has a typmod (floe's
/// metadata names it) the recursive term's column does not keep: its
/// metadata names another numeric, or it has none and is the engine's
/// arithmetic (`n + 1`), of another decimal type or of an operator whose
/// result PostgreSQL's is a plain numeric. Any other decimal without floe's
/// metadata may keep the typmod, and is let pass.
fn drops_typmod(first: &Field, term: Term<'_>) -> bool {
    let recursive = term.field;
    let Some(
        first_type @ SqlScalarType::Numeric {
            precision,
            max_scale,
        },
    ) = floe_arrow::sql_type_of(first)
    else {
        return false;
    };
    if precision.is_none() && max_scale.is_none() {
        return false;
    }
    match floe_arrow::sql_type_of(recursive) {
        Some(recursive_type @ SqlScalarType::Numeric { .. }) => recursive_type != first_type,
        Some(_) => false,
        None => {
            let arithmetic = term.expr.is_some_and(|expr| {
                matches!(
                    expr.clone().unalias(),
                    Expr::BinaryExpr(BinaryExpr {
                        op: Operator::Plus
                            | Operator::Minus
                            | Operator::Multiply
                            | Operator::Divide
                            | Operator::Modulo,
                        ..
                    })
                )
            });
            matches!(recursive.data_type(), DataType::Decimal128(..))
                && (arithmetic || recursive.data_type() != first.data_type())
        }
    }
}

/// `plan` with each node's schema computed again from its inputs'.
fn retyped_schemas(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| Ok(Transformed::yes(node.recompute_schema()?)))
        .map(|transformed| transformed.data)
}

/// The type both terms of column `index` are read as: the recursive term's
/// where it is a decimal every value of the first term's fits; where their
/// types are one, the first term's or the recursive term's metadata,
/// whichever floe's cast of the other term's values answers. `None`
/// otherwise.
fn column_type(
    index: usize,
    static_term: &LogicalPlan,
    recursive_term: &LogicalPlan,
) -> DfResult<Option<Field>> {
    let first = static_term.schema().field(index).as_ref().clone();
    let recursive = recursive_term.schema().field(index).as_ref().clone();
    let candidates = match (first.data_type(), recursive.data_type()) {
        (a, b) if a == b => vec![
            first.clone(),
            first.clone().with_metadata(recursive.metadata().clone()),
        ],
        (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2))
            if s1 <= s2 && i16::from(*p1) - i16::from(*s1) <= i16::from(*p2) - i16::from(*s2) =>
        {
            vec![
                first
                    .clone()
                    .with_data_type(recursive.data_type().clone())
                    .with_metadata(recursive.metadata().clone()),
            ]
        }
        _ => return Ok(None),
    };
    for candidate in candidates {
        if reads_as(static_term, index, &candidate)? && reads_as(recursive_term, index, &candidate)?
        {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

/// Whether `plan`'s column `index` is of `target`'s type or can be read as it.
fn reads_as(plan: &LogicalPlan, index: usize, target: &Field) -> DfResult<bool> {
    let schema = plan.schema();
    let field = schema.field(index);
    if same_type(field, target) {
        return Ok(true);
    }
    let (qualifier, _) = schema.qualified_field(index);
    let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
    Ok(retyped(column, schema, target)?.is_some())
}

fn same_type(field: &Field, target: &Field) -> bool {
    field.data_type() == target.data_type() && field.metadata() == target.metadata()
}

/// `plan`'s rows with each column of the type of `types` (a decimal cast to
/// one it fits, or given floe's metadata of its type), named as they were;
/// `None` where a column cannot be.
fn typed_as(plan: LogicalPlan, types: &[Field]) -> DfResult<Option<LogicalPlan>> {
    let schema = plan.schema().clone();
    if schema
        .fields()
        .iter()
        .zip(types)
        .all(|(field, target)| same_type(field, target))
    {
        return Ok(Some(plan));
    }
    let mut exprs = Vec::with_capacity(types.len());
    for ((qualifier, field), target) in schema.iter().zip(types) {
        let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
        if same_type(field, target) {
            exprs.push(column);
            continue;
        }
        let Some(value) = retyped(column, &schema, target)? else {
            return Ok(None);
        };
        exprs.push(value.alias_qualified(qualifier.cloned(), field.name()));
    }
    let plan = Projection::try_new(exprs, Arc::new(plan))?;
    Ok(Some(LogicalPlan::Projection(plan)))
}

/// `value` as a value of `target`'s type: floe's cast to its SQL type (which
/// gives floe's metadata), or the engine's cast to its Arrow type; `None`
/// where neither answers that type.
fn retyped(value: Expr, schema: &DFSchema, target: &Field) -> DfResult<Option<Expr>> {
    let floe_cast = functions::cast_expr(value.clone(), &functions::sql_type(target));
    let engine_cast = Expr::Cast(Cast::new(Box::new(value), target.data_type().clone()));
    for cast in [floe_cast, engine_cast] {
        if same_type(&cast.to_field(schema)?.1, target) {
            return Ok(Some(cast));
        }
    }
    Ok(None)
}

/// `plan` (a recursive term) with its scans of the work table `name` reading
/// it at `types`, and the nodes above them retyped.
fn reading_work_table(
    plan: LogicalPlan,
    name: &str,
    types: &[Field],
) -> DfResult<(LogicalPlan, bool)> {
    if let LogicalPlan::TableScan(scan) = &plan
        && let Some(schema) = work_table(scan, name)
    {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .zip(types)
            .map(|(field, target)| {
                field
                    .as_ref()
                    .clone()
                    .with_data_type(target.data_type().clone())
                    .with_metadata(target.metadata().clone())
            })
            .collect();
        let retyped = Schema::new_with_metadata(fields, schema.metadata().clone());
        let source = provider_as_source(Arc::new(CteWorkTable::new(name, Arc::new(retyped))));
        let scan = TableScan::try_new(
            scan.table_name.clone(),
            source,
            scan.projection.clone(),
            scan.filters.clone(),
            scan.fetch,
        )?;
        return Ok((LogicalPlan::TableScan(scan), true));
    }
    with_inputs(plan, |input| reading_work_table(input, name, types))
}

/// The work table `name` a scan reads, if it reads it.
fn work_table(scan: &TableScan, name: &str) -> Option<Arc<Schema>> {
    let provider = source_as_provider(&scan.source).ok()?;
    let table = provider.downcast_ref::<CteWorkTable>()?;
    (table.name() == name).then(|| table.schema())
}
