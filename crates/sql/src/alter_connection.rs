//! `ALTER CONNECTION` of an AWS connection: `SET (opt = value)`, `DROP (opt)`
//! and `RESET (opt)` change the options as written in the connection's
//! statement, and the result is planned again as `CREATE CONNECTION` would
//! plan it. The connection keeps its id, and with it its external id
//! (`mz_<prefix>_<id>`), so an IAM trust policy naming it stays valid.

use floe_sql_parser::ast::{
    AlterConnectionAction, AlterConnectionStatement, ConnectionType, CreateConnectionStatement,
    SqlOption, Statement,
};
use floe_sql_parser::options::AwsConnectionOptionName;
use floe_sql_parser::{ParserError, ParserErrorKind};

use crate::catalog::{CatalogItem, ConnectionDefinition, PlanCatalog};
use crate::error::PlanError;
use crate::options::ConnectionWithOptions;
use crate::plan::{AlterConnectionPlan, Plan};
use crate::planner::{
    plan_aws_connection, qualified_object_name, qualify_option_references, redact_options,
};

/// Plans `ALTER CONNECTION` of the AWS connection `item`.
pub(crate) fn plan_alter_aws_connection(
    catalog: &dyn PlanCatalog,
    item: &CatalogItem,
    statement: &AlterConnectionStatement,
) -> Result<Plan, PlanError> {
    let parsed =
        floe_sql_parser::parse_alter_connection_actions(&statement.action).map_err(parser_error)?;
    let with_options = ConnectionWithOptions::extract(&parsed.with_options, |unknown, _| {
        PlanError::invalid(format!("CONNECTION does not support WITH option {unknown}"))
    })?;
    let mut options = stored_options(item)?;
    let mut set: Vec<&str> = Vec::new();
    let mut dropped: Vec<&str> = Vec::new();
    for action in &parsed.actions {
        let name = match action {
            AlterConnectionAction::Set(option) => option.name.0.as_str(),
            AlterConnectionAction::Drop(name) => name.0.as_str(),
        };
        if AwsConnectionOptionName::from_sql_name(name).is_none() {
            return Err(PlanError::invalid(format!(
                "AWS connections do not support {name} values"
            )));
        }
        let (this, other) = match action {
            AlterConnectionAction::Set(_) => (&mut set, &dropped),
            AlterConnectionAction::Drop(_) => (&mut dropped, &set),
        };
        if other.contains(&name) {
            return Err(PlanError::invalid(format!(
                "cannot both SET and DROP/RESET options {name}"
            )));
        }
        if this.contains(&name) {
            return Err(PlanError::invalid(format!(
                "{name} specified more than once"
            )));
        }
        this.push(name);
        options.retain(|option| option.name.0 != name);
        if let AlterConnectionAction::Set(option) = action {
            options.push(option.clone());
        }
    }
    let mut inline_secrets = Vec::new();
    let definition = plan_aws_connection(catalog, &options, &mut inline_secrets)?;
    // A credential written inline and not set again keeps its stored,
    // encrypted value: the statement holds only its redaction.
    if !set.contains(&AwsConnectionOptionName::SessionToken.sql_name()) {
        inline_secrets.clear();
    }
    let create_sql = CreateConnectionStatement {
        name: qualified_object_name(&item.name),
        if_not_exists: false,
        connection_type: ConnectionType::Aws,
        options: redact_options(&qualify_option_references(catalog, &options)?),
        with_options: Vec::new(),
    }
    .to_string();
    Ok(Plan::AlterConnection(AlterConnectionPlan {
        id: item.id,
        definition: ConnectionDefinition::Aws(definition),
        inline_secrets,
        // Off by default, as for CREATE CONNECTION ... TO AWS.
        validate: with_options.validate.unwrap_or(false),
        create_sql,
    }))
}

/// The options of the connection's statement as stored.
fn stored_options(item: &CatalogItem) -> Result<Vec<SqlOption>, PlanError> {
    match floe_sql_parser::parse_statement(&item.create_sql) {
        Ok(Statement::CreateConnection(create)) => Ok(create.options),
        _ => Err(PlanError::internal(format!(
            "the statement of connection {} cannot be read back",
            item.id
        ))),
    }
}

fn parser_error(error: ParserError) -> PlanError {
    match error.kind {
        ParserErrorKind::Syntax => PlanError::syntax(error.message),
        ParserErrorKind::Unsupported => PlanError::unsupported(error.message),
    }
}
