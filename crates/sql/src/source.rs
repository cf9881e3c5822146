//! `CREATE SOURCE ... FROM LOAD GENERATOR`: Materialize's demo generators.

use floe_repr::{ColumnType, RelationDesc, SqlScalarType, SqlState};
use floe_sql_parser::ast::{CreatePostgresSourceStatement, CreateSourceStatement, OptionValue};
use sqlparser::ast::{Ident, ObjectName};

use crate::catalog::{Cluster, PlanCatalog, QualifiedName, SourceDefinition};
use crate::error::PlanError;
use crate::interval::parse_duration;
use crate::options::{LoadGeneratorOptions, Written};
use crate::plan::Plan;
use crate::planner::exists_check;

/// A planned `CREATE SOURCE`: the source and, for multi-output generators,
/// its subsources.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSourcePlan {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub definition: SourceDefinition,
    /// `(name, output, shape)` of each subsource.
    pub subsources: Vec<(QualifiedName, String, RelationDesc)>,
    pub create_sql: String,
}

fn column(name: &str, scalar_type: SqlScalarType, nullable: bool) -> (String, ColumnType) {
    (
        name.to_string(),
        ColumnType {
            scalar_type,
            nullable,
        },
    )
}

/// The outputs of the AUCTION generator, with their shapes (Materialize's).
pub fn auction_outputs() -> Vec<(&'static str, RelationDesc)> {
    use SqlScalarType::*;
    vec![
        (
            "accounts",
            RelationDesc {
                columns: vec![
                    column("id", Int64, false),
                    column("org_id", Int64, false),
                    column("balance", Int64, false),
                ],
                unique_keys: vec![vec![0]],
            },
        ),
        (
            "auctions",
            RelationDesc {
                columns: vec![
                    column("id", Int64, false),
                    column("seller", Int64, false),
                    column("item", Text, false),
                    column("end_time", TimestampTz, false),
                ],
                unique_keys: vec![vec![0]],
            },
        ),
        (
            "bids",
            RelationDesc {
                columns: vec![
                    column("id", Int64, false),
                    column("buyer", Int64, false),
                    column("auction_id", Int64, false),
                    column("amount", Int32, false),
                    column("bid_time", TimestampTz, false),
                ],
                unique_keys: vec![vec![0]],
            },
        ),
        (
            "organizations",
            RelationDesc {
                columns: vec![column("id", Int64, false), column("name", Text, false)],
                unique_keys: vec![vec![0]],
            },
        ),
        (
            "users",
            RelationDesc {
                columns: vec![
                    column("id", Int64, false),
                    column("org_id", Int64, false),
                    column("name", Text, false),
                ],
                unique_keys: vec![vec![0]],
            },
        ),
    ]
}

/// Where a CREATE SOURCE puts the new source: its name and the cluster it runs in.
pub(crate) struct NewSource<'a> {
    pub name: QualifiedName,
    pub cluster: &'a Cluster,
}

/// What every CREATE SOURCE statement says of the source itself: its name, whether IF
/// NOT EXISTS was said, and `IN CLUSTER`.
pub(crate) trait CreateSource {
    fn target(&self) -> (&ObjectName, bool, Option<&Ident>);
}

/// Implements `CreateSource` for statements with `name`, `if_not_exists` and `in_cluster`
/// fields (a field of several types is what a function cannot reach).
macro_rules! create_source {
    ($($statement:ty),*) => {$(
        impl CreateSource for $statement {
            fn target(&self) -> (&ObjectName, bool, Option<&Ident>) {
                (&self.name, self.if_not_exists, self.in_cluster.as_ref())
            }
        }
    )*};
}

create_source!(CreateSourceStatement, CreatePostgresSourceStatement);

/// Plans a CREATE SOURCE of either kind: the name it creates and the cluster it runs in
/// (`IN CLUSTER`, else the session's) are found alike, then `plan` plans the rest. A
/// taken name under IF NOT EXISTS is the no-op.
pub(crate) fn plan_new_source<'a, S: CreateSource>(
    catalog: &'a dyn PlanCatalog,
    session_cluster: &str,
    statement: S,
    plan: fn(&'a dyn PlanCatalog, NewSource<'a>, S) -> Result<Plan, PlanError>,
) -> Result<Plan, PlanError> {
    let (name, if_not_exists, in_cluster) = statement.target();
    let name = crate::planner::create_name(catalog, name)?;
    if exists_check(catalog, &name, if_not_exists)? {
        return Ok(Plan::NoOp {
            tag: "CREATE SOURCE",
        });
    }
    let cluster = crate::planner::resolve_cluster(catalog, in_cluster, session_cluster)?;
    plan(catalog, NewSource { name, cluster }, statement)
}

pub(crate) fn plan_create_source(
    catalog: &dyn PlanCatalog,
    created: NewSource<'_>,
    statement: CreateSourceStatement,
) -> Result<Plan, PlanError> {
    let options = LoadGeneratorOptions::extract(&statement.options, |unknown, _| {
        PlanError::invalid(format!("LOAD GENERATOR does not support {unknown} values"))
    })?;
    let tick_interval_ms = match options.tick_interval {
        None => 1_000,
        Some(Written(Some(OptionValue::String(text)))) => {
            let duration = parse_duration(&text).ok_or_else(|| {
                PlanError::new(
                    SqlState::INVALID_DATETIME_FORMAT,
                    format!("invalid input syntax for type interval: \"{text}\""),
                )
            })?;
            if duration.as_millis() < 1 {
                return Err(PlanError::invalid("TICK INTERVAL must be positive"));
            }
            u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
        }
        Some(_) => {
            return Err(PlanError::invalid(
                "LOAD GENERATOR does not support TICK INTERVAL values",
            ));
        }
    };
    let up_to = match options.up_to {
        None => None,
        Some(Written(Some(OptionValue::Number(n)))) => Some(n.parse::<u64>().map_err(|_| {
            PlanError::invalid(format!("UP TO must be a non-negative integer, not {n}"))
        })?),
        Some(_) => {
            return Err(PlanError::invalid(
                "LOAD GENERATOR does not support UP TO values",
            ));
        }
    };
    let (desc, subsources) = match statement.generator.as_str() {
        "COUNTER" => {
            if statement.for_all_tables {
                return Err(PlanError::invalid(
                    "FOR ALL TABLES is only valid for multi-output sources",
                ));
            }
            (
                RelationDesc {
                    columns: vec![column("counter", SqlScalarType::Int64, false)],
                    unique_keys: vec![vec![0]],
                },
                Vec::new(),
            )
        }
        "AUCTION" => {
            if !statement.for_all_tables {
                return Err(PlanError::invalid(
                    "multi-output sources require a FOR ALL TABLES statement",
                ));
            }
            let mut subsources = Vec::new();
            for (output, desc) in auction_outputs() {
                let subsource_name = QualifiedName {
                    item: output.to_string(),
                    ..created.name.clone()
                };
                exists_check(catalog, &subsource_name, false)?;
                subsources.push((subsource_name, output.to_string(), desc));
            }
            // The source itself is its progress relation.
            (
                RelationDesc {
                    columns: vec![column("offset", SqlScalarType::Int64, false)],
                    unique_keys: vec![vec![0]],
                },
                subsources,
            )
        }
        other => {
            return Err(PlanError::unsupported(format!(
                "LOAD GENERATOR {other} is not supported: floe has COUNTER and AUCTION"
            )));
        }
    };
    let mut normalized = statement.clone();
    normalized.name = crate::planner::qualified(&created.name);
    normalized.if_not_exists = false;
    normalized.in_cluster = Some(sqlparser::ast::Ident::with_quote(
        '"',
        created.cluster.name.clone(),
    ));
    Ok(Plan::CreateSource(CreateSourcePlan {
        name: created.name,
        if_not_exists: statement.if_not_exists,
        definition: SourceDefinition {
            generator: statement.generator.clone(),
            tick_interval_ms,
            cluster: created.cluster.id,
            desc,
            up_to,
            parent: None,
            ingestion: None,
        },
        subsources,
        create_sql: normalized.to_string(),
    }))
}
