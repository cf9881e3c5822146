//! floe's SQL parser: sqlparser's Postgres dialect for standard SQL, plus
//! floe's own statements (SECRET, CONNECTION, SINK, CLUSTER, SOURCE, ...).
//!
//! The grammar of each statement is documented on its AST type in [`ast`].

pub mod ast;
pub mod constructors;
pub mod dialect;
pub mod join_alias;
pub mod options;
pub mod parser;
pub mod table_query;

pub use parser::{
    ParserError, ParserErrorKind, parse_alter_connection_actions, parse_statement, parse_statements,
};
pub use sqlparser;

#[cfg(test)]
mod tests;
