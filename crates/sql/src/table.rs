//! `CREATE TABLE`: columns, types, nullability, defaults, the primary key and
//! `UNIQUE` constraints.

use floe_repr::{ColumnType, RelationDesc, SqlScalarType, SqlState};
use sqlparser::ast::{
    ColumnOption, CreateTable, Expr, Ident, IndexColumn, NullsDistinctOption, TableConstraint,
    UniqueConstraint,
};

use crate::catalog::{PlanCatalog, QualifiedName, TableDefinition};
use crate::error::PlanError;
use crate::plan::{CreateTablePlan, Plan, UniqueConstraintPlan};
use crate::planner::{
    SessionContext, create_name, exists_check, normalize_ident, qualified, resolve_cluster,
};

pub(crate) fn plan_create_table(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    create: CreateTable,
) -> Result<Plan, PlanError> {
    if create.query.is_some() {
        return Err(PlanError::unsupported(
            "CREATE TABLE ... AS is not supported",
        ));
    }
    if create.temporary {
        return Err(PlanError::unsupported(
            "CREATE TEMPORARY TABLE is not supported",
        ));
    }
    let name = create_name(catalog, &create.name)?;
    if exists_check(catalog, &name, create.if_not_exists)? {
        return Ok(Plan::NoOp {
            tag: "CREATE TABLE",
        });
    }
    if create.columns.is_empty() {
        return Err(PlanError::syntax("CREATE TABLE needs at least one column"));
    }
    let mut columns: Vec<(String, ColumnType)> = Vec::new();
    let mut defaults = Vec::new();
    let mut types = Vec::new();
    let mut primary_key: Option<Vec<usize>> = None;
    // Each `UNIQUE` constraint: its name when the statement gave one, and its key.
    let mut unique: Vec<(Option<Ident>, Vec<usize>)> = Vec::new();
    let set_primary_key = |key: Vec<usize>, primary_key: &mut Option<Vec<usize>>| {
        if primary_key.is_some() {
            return Err(PlanError::new(
                SqlState::INVALID_OBJECT_DEFINITION,
                format!(
                    "multiple primary keys for table \"{}\" are not allowed",
                    name.item
                ),
            ));
        }
        *primary_key = Some(key);
        Ok(())
    };
    for (index, column) in create.columns.iter().enumerate() {
        let column_name = normalize_ident(&column.name);
        if columns.iter().any(|(n, _)| n == &column_name) {
            return Err(PlanError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("column \"{column_name}\" specified more than once"),
            ));
        }
        let (scalar_type, used) = crate::types::resolve_data_type(catalog, &column.data_type)?;
        types.extend(used);
        let mut nullable = true;
        let mut default = None;
        for option in &column.options {
            match &option.option {
                ColumnOption::NotNull => nullable = false,
                ColumnOption::Null => nullable = true,
                ColumnOption::Default(expr) => default = Some(expr.to_string()),
                ColumnOption::PrimaryKey(_) => {
                    nullable = false;
                    set_primary_key(vec![index], &mut primary_key)?;
                }
                ColumnOption::Unique(constraint) => {
                    check_unique_constraint(constraint)?;
                    let name = option.name.clone().or_else(|| constraint.name.clone());
                    unique.push((name, vec![index]));
                }
                other => {
                    return Err(PlanError::unsupported(format!(
                        "column option {other} is not supported"
                    )));
                }
            }
        }
        columns.push((
            column_name,
            ColumnType {
                scalar_type,
                nullable,
            },
        ));
        defaults.push(default);
    }
    for constraint in &create.constraints {
        match constraint {
            TableConstraint::PrimaryKey(pk) => {
                let key = key_columns(&columns, &pk.columns)?;
                for position in &key {
                    columns[*position].1.nullable = false;
                }
                set_primary_key(key, &mut primary_key)?;
            }
            TableConstraint::Unique(constraint) => {
                check_unique_constraint(constraint)?;
                let key = key_columns(&columns, &constraint.columns)?;
                unique.push((constraint.name.clone(), key));
            }
            other => {
                return Err(PlanError::unsupported(format!(
                    "table constraint {other} is not supported"
                )));
            }
        }
    }
    let desc = RelationDesc {
        columns,
        unique_keys: primary_key.into_iter().collect(),
    };
    let (unique, of_clause) = distinct_keys(desc.unique_keys.first(), unique);
    let constraints = unique_constraints(catalog, session, &name, &desc, unique)?;
    let clause_names: Vec<Option<Ident>> = of_clause
        .iter()
        .map(|kept| {
            kept.and_then(|position| constraints.get(position))
                .map(|constraint| Ident::with_quote('"', constraint.name.item.clone()))
        })
        .collect();
    let mut create_sql_statement = create.clone();
    create_sql_statement.name = qualified(&name);
    create_sql_statement.if_not_exists = false;
    name_unique_constraints(&mut create_sql_statement, clause_names);
    let create_sql = sqlparser::ast::Statement::CreateTable(create_sql_statement).to_string();
    Ok(Plan::CreateTable(CreateTablePlan {
        name,
        if_not_exists: create.if_not_exists,
        definition: TableDefinition {
            desc,
            defaults,
            version: 0,
            types: {
                types.sort();
                types.dedup();
                types
            },
        },
        create_sql,
        constraints,
    }))
}

/// PostgreSQL keeps one constraint for a key declared twice: a `UNIQUE` clause on
/// the primary key's columns, or on those of an earlier clause (in the same
/// order), adds none (an unnamed earlier one takes the later one's name). The
/// constraints kept, and for each clause the position of its constraint among
/// them (`None` for a clause that adds none).
#[allow(clippy::type_complexity)]
fn distinct_keys(
    primary_key: Option<&Vec<usize>>,
    clauses: Vec<(Option<Ident>, Vec<usize>)>,
) -> (Vec<(Option<Ident>, Vec<usize>)>, Vec<Option<usize>>) {
    let mut kept: Vec<(Option<Ident>, Vec<usize>)> = Vec::new();
    let mut of_clause = Vec::new();
    for (name, key) in clauses {
        if primary_key == Some(&key) {
            of_clause.push(None);
            continue;
        }
        match kept.iter().position(|(_, earlier)| *earlier == key) {
            Some(position) => {
                if kept[position].0.is_none() {
                    kept[position].0 = name;
                }
                of_clause.push(Some(position));
            }
            None => {
                of_clause.push(Some(kept.len()));
                kept.push((name, key));
            }
        }
    }
    (kept, of_clause)
}

/// Writes each `UNIQUE` clause's constraint name into the statement the table is
/// kept as (`CONSTRAINT "t_a_key" UNIQUE`), so `SHOW CREATE TABLE` names the
/// constraints it creates and `ALTER TABLE ... DROP CONSTRAINT` finds them. A
/// clause that added no constraint of its own (`None`) is left out, as is all but
/// the first of the clauses of one constraint. `names` are in the statement's
/// order: column options, then table constraints.
fn name_unique_constraints(create: &mut CreateTable, names: Vec<Option<Ident>>) {
    let mut names = names.into_iter();
    let mut written: Vec<Ident> = Vec::new();
    let mut keep = |name: Option<Ident>| match name {
        Some(name) if !written.contains(&name) => {
            written.push(name.clone());
            Some(name)
        }
        _ => None,
    };
    for column in &mut create.columns {
        column.options.retain_mut(|option| {
            let ColumnOption::Unique(constraint) = &mut option.option else {
                return true;
            };
            constraint.name = None;
            option.name = keep(names.next().flatten());
            option.name.is_some()
        });
    }
    create.constraints.retain_mut(|constraint| {
        let TableConstraint::Unique(constraint) = constraint else {
            return true;
        };
        constraint.name = keep(names.next().flatten());
        constraint.name.is_some()
    });
}

/// The positions of the columns a key names (`PRIMARY KEY (a, b)`, `UNIQUE (a)`).
fn key_columns(
    columns: &[(String, ColumnType)],
    parts: &[IndexColumn],
) -> Result<Vec<usize>, PlanError> {
    let mut key = Vec::new();
    for part in parts {
        let Expr::Identifier(ident) = &part.column.expr else {
            return Err(PlanError::unsupported(
                "keys on expressions are not supported",
            ));
        };
        let column_name = normalize_ident(ident);
        let Some(position) = columns.iter().position(|(n, _)| n == &column_name) else {
            return Err(PlanError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column \"{column_name}\" named in key does not exist"),
            ));
        };
        if key.contains(&position) {
            return Err(PlanError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("column \"{column_name}\" appears twice in unique constraint"),
            ));
        }
        key.push(position);
    }
    Ok(key)
}

/// The forms of `UNIQUE` storage can check: NULLs distinct, checked at once.
fn check_unique_constraint(constraint: &UniqueConstraint) -> Result<(), PlanError> {
    if constraint.nulls_distinct == NullsDistinctOption::NotDistinct {
        return Err(PlanError::unsupported(
            "UNIQUE NULLS NOT DISTINCT is not supported",
        ));
    }
    if constraint
        .characteristics
        .as_ref()
        .is_some_and(|c| c.deferrable == Some(true) || c.initially.is_some())
    {
        return Err(PlanError::unsupported(
            "deferrable UNIQUE constraints are not supported",
        ));
    }
    Ok(())
}

/// Each `UNIQUE` constraint of a new table as the unique index it is kept as: named
/// as given or as PostgreSQL names one (`<table>_<columns>_key`, a number added
/// when the name is taken), on the session's cluster.
fn unique_constraints(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    table: &QualifiedName,
    desc: &RelationDesc,
    unique: Vec<(Option<Ident>, Vec<usize>)>,
) -> Result<Vec<UniqueConstraintPlan>, PlanError> {
    if unique.is_empty() {
        return Ok(Vec::new());
    }
    let cluster = resolve_cluster(catalog, None, &session.cluster)?.id;
    let mut names: Vec<String> = vec![table.item.clone()];
    let mut constraints = Vec::new();
    for (given, key) in unique {
        let item = match given {
            Some(ident) => {
                let item = normalize_ident(&ident);
                let like = QualifiedName {
                    item: item.clone(),
                    ..table.clone()
                };
                if names.contains(&item) || catalog.item_by_name(&like).is_some() {
                    return Err(PlanError::new(
                        SqlState::DUPLICATE_TABLE,
                        format!("relation \"{item}\" already exists"),
                    ));
                }
                item
            }
            None => {
                let columns: Vec<&str> = key.iter().map(|c| desc.columns[*c].0.as_str()).collect();
                let stem = format!("{}_{}_key", table.item, columns.join("_"));
                crate::index::free_name(catalog, table, stem, &names)
            }
        };
        names.push(item.clone());
        let name = QualifiedName {
            item,
            ..table.clone()
        };
        let create_sql =
            crate::index::create_sql(catalog, &name.item, true, None, table, desc, &key, None);
        constraints.push(UniqueConstraintPlan {
            name,
            key,
            cluster,
            create_sql,
        });
    }
    Ok(constraints)
}

/// Parses a type name as written in SQL (`int`, `numeric(10,2)`,
/// `timestamp with time zone`, `uint8`, ...).
pub fn parse_type_name(text: &str) -> Result<SqlScalarType, PlanError> {
    resolve_type_name(text, &mut |_| None)
}

/// [`parse_type_name`], where a name that is no built-in type may be one
/// `named` knows (`CREATE TYPE`'s, see [`crate::types`]).
pub fn resolve_type_name(
    text: &str,
    named: &mut dyn FnMut(&str) -> Option<SqlScalarType>,
) -> Result<SqlScalarType, PlanError> {
    let normalized = text
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    // `int[]`, `text[][]`: a PostgreSQL array, of any dimensions.
    if let Some(element) = normalized.strip_suffix("[]") {
        return Ok(SqlScalarType::Array {
            element: Box::new(resolve_type_name(element.trim_end(), named)?),
        });
    }
    if let Some(element) = normalized.strip_suffix(" list") {
        return Ok(SqlScalarType::List {
            element: Box::new(resolve_type_name(element, named)?),
        });
    }
    if let Some(inner) = normalized
        .strip_prefix("map[")
        .and_then(|rest| rest.strip_suffix(']'))
    {
        let (key, value) = split_map_type(inner).ok_or_else(|| {
            PlanError::new(SqlState::SYNTAX_ERROR, format!("invalid map type: {text}"))
        })?;
        let key = resolve_type_name(key, named)?;
        if !matches!(key, SqlScalarType::Text) {
            return Err(PlanError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                format!("map key type must be text, got {key}"),
            ));
        }
        return Ok(SqlScalarType::Map {
            value: Box::new(resolve_type_name(value, named)?),
        });
    }
    // A record type as floe spells one (`record(a:integer,b:text)`, see
    // `types::spell_named_types`).
    if let Some(inner) = normalized
        .strip_prefix("record(")
        .and_then(|rest| rest.strip_suffix(')'))
        .filter(|inner| !inner.is_empty())
    {
        let mut fields = Vec::new();
        for field in split_top_level(inner) {
            let (name, field_type) = field.split_once(':').ok_or_else(|| {
                PlanError::new(
                    SqlState::SYNTAX_ERROR,
                    format!("invalid record type: {text}"),
                )
            })?;
            let (field_type, nullable) = match field_type.strip_suffix(" not null") {
                Some(field_type) => (field_type, false),
                None => (field_type, true),
            };
            let field_type = resolve_type_name(field_type, named)?;
            fields.push((name.trim().to_string(), field_type, nullable));
        }
        return Ok(SqlScalarType::Record { fields });
    }
    let (base, args) = match normalized.find('(') {
        Some(open) if normalized.ends_with(')') => {
            let args: Vec<String> = normalized[open + 1..normalized.len() - 1]
                .split(',')
                .map(|a| a.trim().to_string())
                .collect();
            (normalized[..open].trim().to_string(), args)
        }
        _ => (normalized.clone(), Vec::new()),
    };
    let number = |i: usize| -> Result<Option<u32>, PlanError> {
        match args.get(i) {
            None => Ok(None),
            Some(a) => a.parse::<u32>().map(Some).map_err(|_| {
                PlanError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("invalid type modifier in {text}"),
                )
            }),
        }
    };
    use SqlScalarType::*;
    let scalar_type = match base.as_str() {
        "bool" | "boolean" => Bool,
        "smallint" | "int2" => Int16,
        "int" | "integer" | "int4" => Int32,
        "bigint" | "int8" => Int64,
        "uint2" => UInt16,
        "uint4" => UInt32,
        "uint8" => UInt64,
        "real" | "float4" => Float32,
        "double precision" | "double" | "float8" | "float" => Float64,
        "numeric" | "decimal" => {
            let precision = number(0)?;
            let scale = number(1)?;
            if let Some(p) = precision
                && !(1..=38).contains(&p)
            {
                return Err(PlanError::invalid(format!(
                    "precision for type numeric must be between 1 and 38, not {p}"
                )));
            }
            if let (Some(p), Some(s)) = (precision, scale)
                && s > p
            {
                return Err(PlanError::invalid(format!(
                    "numeric scale {s} must be between 0 and precision {p}"
                )));
            }
            Numeric {
                precision: precision.map(|p| p as u8),
                max_scale: match (precision, scale) {
                    (Some(_), None) => Some(0),
                    (_, s) => s.map(|s| s as u8),
                },
            }
        }
        "date" => Date,
        "time" | "time without time zone" => Time,
        "timestamp" | "timestamp without time zone" => Timestamp,
        "timestamptz" | "timestamp with time zone" => TimestampTz,
        "text" | "string" => Text,
        "varchar" | "character varying" => VarChar {
            max_length: number(0)?,
        },
        "bytea" => Bytes,
        "uuid" => Uuid,
        "jsonb" => Jsonb,
        "json" => Json,
        "interval" => Interval,
        "int4range" => Range {
            element: Box::new(Int32),
        },
        "int8range" => Range {
            element: Box::new(Int64),
        },
        "numrange" => Range {
            element: Box::new(Numeric {
                precision: None,
                max_scale: None,
            }),
        },
        "daterange" => Range {
            element: Box::new(Date),
        },
        "tsrange" => Range {
            element: Box::new(Timestamp),
        },
        "tstzrange" => Range {
            element: Box::new(TimestampTz),
        },
        _ => {
            if args.is_empty()
                && let Some(scalar_type) = named(&base)
            {
                return Ok(scalar_type);
            }
            return Err(PlanError::new(
                SqlState::UNDEFINED_OBJECT,
                format!("type \"{text}\" does not exist"),
            ));
        }
    };
    Ok(scalar_type)
}

/// The parts of `inner` between its top-level commas (not those inside
/// brackets or parentheses).
fn split_top_level(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// Splits `K=>V` (the inside of `map[...]`) at its top-level `=>`.
fn split_map_type(inner: &str) -> Option<(&str, &str)> {
    let mut depth = 0i32;
    let bytes = inner.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'[' | b'(' => depth += 1,
            b']' | b')' => depth -= 1,
            b'=' if depth == 0 && bytes.get(i + 1) == Some(&b'>') => {
                return Some((inner[..i].trim(), inner[i + 2..].trim()));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_parse_like_postgres() {
        assert_eq!(parse_type_name("INT").unwrap(), SqlScalarType::Int32);
        assert_eq!(
            parse_type_name("NUMERIC(10,2)").unwrap(),
            SqlScalarType::Numeric {
                precision: Some(10),
                max_scale: Some(2)
            }
        );
        assert_eq!(
            parse_type_name("timestamp  with time zone").unwrap(),
            SqlScalarType::TimestampTz
        );
        assert_eq!(parse_type_name("uint8").unwrap(), SqlScalarType::UInt64);
        assert!(parse_type_name("numeric(99)").is_err());
        assert!(parse_type_name("frobnicator").is_err());
        let list = |e| SqlScalarType::List {
            element: Box::new(e),
        };
        assert_eq!(
            parse_type_name("INT list").unwrap(),
            list(SqlScalarType::Int32)
        );
        assert_eq!(
            parse_type_name("text list list").unwrap(),
            list(list(SqlScalarType::Text))
        );
        assert_eq!(
            parse_type_name("INT[]").unwrap(),
            SqlScalarType::Array {
                element: Box::new(SqlScalarType::Int32)
            }
        );
        assert_eq!(
            parse_type_name("map[TEXT=>INT]").unwrap(),
            SqlScalarType::Map {
                value: Box::new(SqlScalarType::Int32)
            }
        );
        assert_eq!(
            parse_type_name("map[text=>map[text=>bigint list]]").unwrap(),
            SqlScalarType::Map {
                value: Box::new(SqlScalarType::Map {
                    value: Box::new(list(SqlScalarType::Int64))
                })
            }
        );
        assert_eq!(
            parse_type_name("numeric(10,2) list").unwrap(),
            list(SqlScalarType::Numeric {
                precision: Some(10),
                max_scale: Some(2)
            })
        );
        assert!(parse_type_name("map[int=>int]").is_err());
        assert!(parse_type_name("map[text int]").is_err());
        assert_eq!(parse_type_name("UInt8").unwrap(), SqlScalarType::UInt64);
        assert_eq!(parse_type_name("uint2").unwrap(), SqlScalarType::UInt16);
        assert_eq!(
            parse_type_name("tstzrange").unwrap(),
            SqlScalarType::Range {
                element: Box::new(SqlScalarType::TimestampTz)
            }
        );
    }
}
