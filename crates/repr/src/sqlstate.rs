//! The one table of SQLSTATE codes floe sends. Every client-facing error maps
//! to one of these; the codes are the ones Postgres (and Materialize) use for
//! the same condition.

use std::fmt;

/// A five-character SQLSTATE code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqlState(&'static str);

impl SqlState {
    pub const SUCCESSFUL_COMPLETION: SqlState = SqlState("00000");
    pub const WARNING: SqlState = SqlState("01000");
    pub const CONNECTION_EXCEPTION: SqlState = SqlState("08000");
    pub const SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION: SqlState = SqlState("08001");
    pub const PROTOCOL_VIOLATION: SqlState = SqlState("08P01");
    pub const FEATURE_NOT_SUPPORTED: SqlState = SqlState("0A000");
    pub const INVALID_GRANT_OPERATION: SqlState = SqlState("0LP01");
    pub const CARDINALITY_VIOLATION: SqlState = SqlState("21000");
    pub const DATA_EXCEPTION: SqlState = SqlState("22000");
    pub const STRING_DATA_RIGHT_TRUNCATION: SqlState = SqlState("22001");
    pub const NUMERIC_VALUE_OUT_OF_RANGE: SqlState = SqlState("22003");
    pub const INVALID_DATETIME_FORMAT: SqlState = SqlState("22007");
    pub const DATETIME_FIELD_OVERFLOW: SqlState = SqlState("22008");
    pub const DIVISION_BY_ZERO: SqlState = SqlState("22012");
    pub const INVALID_ARGUMENT_FOR_LOGARITHM: SqlState = SqlState("2201E");
    pub const INVALID_ARGUMENT_FOR_POWER_FUNCTION: SqlState = SqlState("2201F");
    pub const INVALID_ARGUMENT_FOR_WIDTH_BUCKET: SqlState = SqlState("2201G");
    pub const INVALID_ROW_COUNT_IN_LIMIT_CLAUSE: SqlState = SqlState("2201W");
    pub const ARRAY_SUBSCRIPT_ERROR: SqlState = SqlState("2202E");
    pub const INVALID_REGULAR_EXPRESSION: SqlState = SqlState("2201B");
    pub const INVALID_ESCAPE_SEQUENCE: SqlState = SqlState("22025");
    pub const NULL_VALUE_NOT_ALLOWED: SqlState = SqlState("22004");
    pub const INVALID_JSON_TEXT: SqlState = SqlState("22032");
    pub const INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION: SqlState = SqlState("22031");
    pub const INVALID_SQL_JSON_SUBSCRIPT: SqlState = SqlState("22033");
    pub const NON_NUMERIC_SQL_JSON_ITEM: SqlState = SqlState("22036");
    pub const SINGLETON_SQL_JSON_ITEM_REQUIRED: SqlState = SqlState("22038");
    pub const SQL_JSON_ARRAY_NOT_FOUND: SqlState = SqlState("22039");
    pub const SQL_JSON_OBJECT_NOT_FOUND: SqlState = SqlState("2203C");
    pub const SQL_JSON_MEMBER_NOT_FOUND: SqlState = SqlState("2203A");
    pub const SQL_JSON_NUMBER_NOT_FOUND: SqlState = SqlState("2203B");
    pub const INTERVAL_FIELD_OVERFLOW: SqlState = SqlState("22015");
    pub const INVALID_BINARY_REPRESENTATION: SqlState = SqlState("22P03");
    pub const CHARACTER_NOT_IN_REPERTOIRE: SqlState = SqlState("22021");
    pub const UNTRANSLATABLE_CHARACTER: SqlState = SqlState("22P05");
    pub const INVALID_PARAMETER_VALUE: SqlState = SqlState("22023");
    pub const INVALID_TEXT_REPRESENTATION: SqlState = SqlState("22P02");
    pub const BAD_COPY_FILE_FORMAT: SqlState = SqlState("22P04");
    pub const NOT_NULL_VIOLATION: SqlState = SqlState("23502");
    pub const UNIQUE_VIOLATION: SqlState = SqlState("23505");
    pub const INVALID_TRANSACTION_STATE: SqlState = SqlState("25000");
    pub const ACTIVE_SQL_TRANSACTION: SqlState = SqlState("25001");
    pub const NO_ACTIVE_SQL_TRANSACTION: SqlState = SqlState("25P01");
    pub const READ_ONLY_SQL_TRANSACTION: SqlState = SqlState("25006");
    pub const IN_FAILED_SQL_TRANSACTION: SqlState = SqlState("25P02");
    pub const INVALID_AUTHORIZATION_SPECIFICATION: SqlState = SqlState("28000");
    pub const INVALID_PASSWORD: SqlState = SqlState("28P01");
    pub const DEPENDENT_OBJECTS_STILL_EXIST: SqlState = SqlState("2BP01");
    pub const INVALID_CURSOR_NAME: SqlState = SqlState("34000");
    pub const INVALID_CATALOG_NAME: SqlState = SqlState("3D000");
    pub const INVALID_SCHEMA_NAME: SqlState = SqlState("3F000");
    pub const SERIALIZATION_FAILURE: SqlState = SqlState("40001");
    pub const INSUFFICIENT_PRIVILEGE: SqlState = SqlState("42501");
    pub const SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION: SqlState = SqlState("42000");
    pub const SYNTAX_ERROR: SqlState = SqlState("42601");
    pub const INVALID_NAME: SqlState = SqlState("42602");
    pub const DUPLICATE_COLUMN: SqlState = SqlState("42701");
    pub const AMBIGUOUS_COLUMN: SqlState = SqlState("42702");
    pub const UNDEFINED_COLUMN: SqlState = SqlState("42703");
    pub const UNDEFINED_OBJECT: SqlState = SqlState("42704");
    pub const DUPLICATE_OBJECT: SqlState = SqlState("42710");
    pub const DUPLICATE_CURSOR: SqlState = SqlState("42P03");
    pub const RESERVED_NAME: SqlState = SqlState("42939");
    pub const GROUPING_ERROR: SqlState = SqlState("42803");
    pub const DATATYPE_MISMATCH: SqlState = SqlState("42804");
    pub const AMBIGUOUS_FUNCTION: SqlState = SqlState("42725");
    pub const CANNOT_COERCE: SqlState = SqlState("42846");
    pub const INVALID_COLUMN_REFERENCE: SqlState = SqlState("42P10");
    pub const INDETERMINATE_DATATYPE: SqlState = SqlState("42P18");
    pub const WRONG_OBJECT_TYPE: SqlState = SqlState("42809");
    pub const UNDEFINED_FUNCTION: SqlState = SqlState("42883");
    pub const UNDEFINED_TABLE: SqlState = SqlState("42P01");
    pub const UNDEFINED_PARAMETER: SqlState = SqlState("42P02");
    pub const DUPLICATE_SCHEMA: SqlState = SqlState("42P06");
    pub const DUPLICATE_TABLE: SqlState = SqlState("42P07");
    pub const INVALID_OBJECT_DEFINITION: SqlState = SqlState("42P17");
    pub const PROGRAM_LIMIT_EXCEEDED: SqlState = SqlState("54000");
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: SqlState = SqlState("55000");
    pub const OBJECT_IN_USE: SqlState = SqlState("55006");
    pub const CANT_CHANGE_RUNTIME_PARAM: SqlState = SqlState("55P02");
    pub const QUERY_CANCELED: SqlState = SqlState("57014");
    pub const SYSTEM_ERROR: SqlState = SqlState("58000");
    pub const IO_ERROR: SqlState = SqlState("58030");
    pub const INTERNAL_ERROR: SqlState = SqlState("XX000");

    /// The five characters of the code.
    pub fn code(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
