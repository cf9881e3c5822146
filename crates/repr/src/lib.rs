//! The vocabulary every other floe crate shares: SQL types, relation
//! descriptions, object ids, timestamps and the table of SQLSTATE codes.
//!
//! Nothing here does I/O; it is the bottom of the dependency graph.

pub mod cast;
pub mod codec;
pub mod datum;
pub mod id;
pub mod relation;
pub mod sqlstate;
pub mod strconv;
pub mod timestamp;
pub mod types;
pub mod upstream;

pub use cast::cast_datum;
pub use codec::{CodecError, decode_row, encode_row};
pub use datum::{
    ColumnDesc, Datum, LIST_OID, MAP_OID, PgType, RangeBounds, Row, UINT2_OID, UINT4_OID, UINT8_OID,
};
pub use id::{ClusterId, GlobalId, ReplicaId, RoleId};
pub use relation::{ColumnType, RelationDesc};
pub use sqlstate::SqlState;
pub use strconv::{ValueError, format_datum, parse_datum};
pub use timestamp::Timestamp;
pub use types::SqlScalarType;
