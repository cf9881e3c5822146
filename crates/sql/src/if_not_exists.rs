//! `CREATE ... IF NOT EXISTS` of a name that is taken: nothing to do, and
//! Materialize's notice saying so (`sink "s" already exists, skipping`).

use floe_sql_parser::ast::Statement;
use sqlparser::ast::ObjectName;

use crate::catalog::PlanCatalog;
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{PlanNotice, create_name};

/// The no-op plan of a `CREATE ... IF NOT EXISTS` whose name is taken, with
/// its notice; `None` when the statement should be planned.
pub(crate) fn skip_existing(
    catalog: &dyn PlanCatalog,
    statement: &Statement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Option<Plan>, PlanError> {
    let Some((name, kind, tag)) = creates_if_not_exists(statement) else {
        return Ok(None);
    };
    let name = create_name(catalog, name)?;
    if catalog.item_by_name(&name).is_none() {
        return Ok(None);
    }
    notices.push(PlanNotice {
        message: format!("{kind} \"{}\" already exists, skipping", name.item),
        hint: None,
    });
    Ok(Some(Plan::NoOp { tag }))
}

/// The name, the kind as the notice names it and the command tag of a
/// `CREATE ... IF NOT EXISTS`.
fn creates_if_not_exists(
    statement: &Statement,
) -> Option<(&ObjectName, &'static str, &'static str)> {
    let (name, if_not_exists, kind, tag) = match statement {
        Statement::CreateSecret(s) => (&s.name, s.if_not_exists, "secret", "CREATE SECRET"),
        Statement::CreateConnection(s) => {
            (&s.name, s.if_not_exists, "connection", "CREATE CONNECTION")
        }
        Statement::CreateSink(s) => (&s.name, s.if_not_exists, "sink", "CREATE SINK"),
        Statement::CreateSource(s) => (&s.name, s.if_not_exists, "source", "CREATE SOURCE"),
        Statement::Standard(standard) => match standard.as_ref() {
            sqlparser::ast::Statement::CreateTable(create) => {
                (&create.name, create.if_not_exists, "table", "CREATE TABLE")
            }
            _ => return None,
        },
        _ => return None,
    };
    if_not_exists.then_some((name, kind, tag))
}
