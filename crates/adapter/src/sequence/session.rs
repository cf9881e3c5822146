//! SHOW, SET and RESET of session variables.

use floe_repr::Datum;
use floe_sql::catalog::PlanCatalog;
use floe_sql::plan::{SetVariablePlan, ShowVariablePlan};

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse, show_variable_desc};
use crate::error::AdapterError;
use crate::session::Session;

impl Coordinator {
    pub(super) fn sequence_show_variable(
        &self,
        session: &Session,
        plan: ShowVariablePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let rows = if plan.name == "all" {
            session
                .all()
                .into_iter()
                .map(|(name, value)| {
                    vec![
                        Datum::Text(name.to_string()),
                        Datum::Text(value),
                        Datum::Text(String::new()),
                    ]
                })
                .collect()
        } else {
            vec![vec![Datum::Text(session.get(&plan.name)?)]]
        };
        Ok(ExecuteResponse::Rows {
            desc: show_variable_desc(&plan.name),
            rows,
            tag: None,
        })
    }

    /// `SET cluster` must name an existing cluster.
    pub(super) async fn sequence_set_variable(
        &self,
        session: &mut Session,
        plan: SetVariablePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        if plan.name == "cluster"
            && let Some(name) = &plan.value
        {
            let catalog = self.catalog.lock().await;
            if catalog.state().cluster_by_name(name).is_none() {
                return Err(AdapterError::InvalidVariableValue {
                    name: "cluster".into(),
                    value: name.clone(),
                    hint: Some(format!("There is no cluster named \"{name}\".")),
                });
            }
        }
        session.set(&plan.name, plan.value.as_deref())?;
        command(if plan.value.is_none() && plan.name == "all" {
            "RESET"
        } else {
            "SET"
        })
    }
}
