use super::*;
use arrow::array::{Decimal128Array, UInt32Array};
use floe_repr::parse_datum;

use SqlScalarType as S;

fn col(ty: SqlScalarType, nullable: bool) -> ColumnType {
    ColumnType {
        scalar_type: ty,
        nullable,
    }
}

fn every_type() -> Vec<(SqlScalarType, Vec<&'static str>)> {
    let list = |e: S| S::List {
        element: Box::new(e),
    };
    let range = |e: S| S::Range {
        element: Box::new(e),
    };
    vec![
        (S::Bool, vec!["t", "f"]),
        (S::Int16, vec!["-32768", "32767"]),
        (S::Int32, vec!["-2147483648", "7"]),
        (S::Int64, vec!["9223372036854775807", "-1"]),
        (S::UInt16, vec!["65535", "0"]),
        (S::UInt32, vec!["4294967295", "1"]),
        (S::UInt64, vec!["18446744073709551615", "2"]),
        (S::Float32, vec!["1.5", "NaN"]),
        (S::Float64, vec!["-Infinity", "1e+20"]),
        (
            S::Numeric {
                precision: Some(10),
                max_scale: Some(2),
            },
            vec!["1.50", "-99999999.99"],
        ),
        (
            S::Numeric {
                precision: None,
                max_scale: None,
            },
            vec!["1.5", "-0.0000000001"],
        ),
        (S::Date, vec!["2024-02-29", "0044-03-15 BC"]),
        (S::Time, vec!["00:00:00", "23:59:59.999999"]),
        (
            S::Timestamp,
            vec!["2024-01-01 10:00:00.5", "1900-01-01 00:00:00"],
        ),
        (
            S::TimestampTz,
            vec!["2024-01-01 10:00:00+00", "2024-01-01 00:00:00+00"],
        ),
        (S::Text, vec!["héllo", ""]),
        (
            S::VarChar {
                max_length: Some(5),
            },
            vec!["abc", "x"],
        ),
        (S::Bytes, vec!["\\xdeadbeef", "\\x"]),
        (
            S::Uuid,
            vec![
                "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                "00000000-0000-0000-0000-000000000000",
            ],
        ),
        (S::Jsonb, vec!["{\"a\":[1,null]}", "null"]),
        (
            S::Interval,
            vec!["1 year 2 mons -3 days +04:05:06.5", "00:00:00"],
        ),
        (range(S::Int32), vec!["[1,5)", "empty"]),
        (range(S::Int64), vec!["(,5)", "(,)"]),
        (
            range(S::Numeric {
                precision: None,
                max_scale: None,
            }),
            vec!["[1.5,2.5]", "(,3.25)"],
        ),
        (range(S::Date), vec!["[2024-01-01,2024-02-01)", "empty"]),
        (
            range(S::Timestamp),
            vec!["[\"2024-01-01 00:00:00\",)", "empty"],
        ),
        (
            range(S::TimestampTz),
            vec!["(,\"2024-01-01 00:00:00+00\"]", "empty"],
        ),
        (list(S::Int32), vec!["{1,NULL,3}", "{}"]),
        (list(list(S::Text)), vec!["{{a,\"b c\"},{},NULL}", "{}"]),
        (
            S::Map {
                value: Box::new(S::Int32),
            },
            vec!["{a=>1,b=>NULL}", "{}"],
        ),
        (
            S::Map {
                value: Box::new(list(S::Int64)),
            },
            vec!["{a=>{1,2}}", "{}"],
        ),
        (
            S::Record {
                fields: vec![("a".into(), S::Int32, true), ("b".into(), S::Text, true)],
            },
            vec!["(1,x)", "(,)"],
        ),
    ]
}

#[test]
fn every_type_round_trips_through_a_batch() {
    for (ty, texts) in every_type() {
        let desc = RelationDesc {
            columns: vec![("c".into(), col(ty.clone(), true))],
            unique_keys: vec![],
        };
        let mut rows: Vec<Row> = texts
            .iter()
            .map(|t| vec![parse_datum(t, &ty).unwrap_or_else(|e| panic!("{t}: {e}"))])
            .collect();
        rows.push(vec![Datum::Null]);
        let batch = rows_to_batch(&desc, &rows).unwrap_or_else(|e| panic!("{ty}: {e}"));
        let schema = batch.schema();
        let field = schema.field(0);
        assert_eq!(pg_type_of(field), PgType::from_scalar(&ty), "{ty}");
        assert_eq!(sql_type_of(field).as_ref(), Some(&ty));
        let back = array_to_datums(batch.column(0), field).unwrap();
        let printed: Vec<String> = back.iter().map(format_datum).collect();
        let mut expected: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        expected.push("NULL".into());
        assert_eq!(printed, expected, "{ty}");
        // And without the metadata the engine may drop, the Arrow type alone
        // still gives a value of the right shape.
        let bare = Field::new("c", field.data_type().clone(), true);
        let bare_values = array_to_datums(batch.column(0), &bare).unwrap();
        assert_eq!(bare_values.len(), rows.len());
    }
}

#[test]
fn mapping_matches_the_spec() {
    assert_eq!(arrow_data_type(&S::UInt64), DataType::UInt64);
    assert_eq!(
        arrow_data_type(&S::Numeric {
            precision: Some(12),
            max_scale: Some(2)
        }),
        DataType::Decimal128(38, 2)
    );
    assert_eq!(
        arrow_data_type(&S::Numeric {
            precision: None,
            max_scale: None
        }),
        DataType::Decimal128(38, 10)
    );
    assert_eq!(arrow_data_type(&S::Uuid), DataType::FixedSizeBinary(16));
    assert_eq!(
        arrow_data_type(&S::TimestampTz),
        DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
    );
    let DataType::Struct(fields) = arrow_data_type(&S::Range {
        element: Box::new(S::Int32),
    }) else {
        panic!("range is a struct");
    };
    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "lower",
            "upper",
            "lower_inclusive",
            "upper_inclusive",
            "empty"
        ]
    );
    assert!(matches!(
        arrow_data_type(&S::Map {
            value: Box::new(S::Int32)
        }),
        DataType::Map(..)
    ));
}

#[test]
fn inexact_numerics_are_errors() {
    let desc = RelationDesc {
        columns: vec![(
            "n".into(),
            col(
                S::Numeric {
                    precision: None,
                    max_scale: None,
                },
                true,
            ),
        )],
        unique_keys: vec![],
    };
    let err = rows_to_batch(&desc, &[vec![Datum::Numeric("0.12345678901".into())]]).unwrap_err();
    assert_eq!(err.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    assert!(err.message.contains("column \"n\""), "{}", err.message);
    assert!(rows_to_batch(&desc, &[vec![Datum::Numeric("NaN".into())]]).is_err());
    assert!(rows_to_batch(&desc, &[vec![Datum::Numeric("1e30".into())]]).is_err());
    assert_eq!(decimal_to_i128("-1.5", 38, 2).unwrap(), -150);
    assert_eq!(decimal_to_i128("0", 38, 10).unwrap(), 0);
}

#[test]
fn values_of_other_types_are_cast_and_nullability_is_checked() {
    let desc = RelationDesc {
        columns: vec![("a".into(), col(S::Int64, false))],
        unique_keys: vec![],
    };
    let batch = rows_to_batch(&desc, &[vec![Datum::Int32(5)]]).unwrap();
    assert_eq!(
        array_to_datums(batch.column(0), batch.schema().field(0)).unwrap(),
        vec![Datum::Int64(5)]
    );
    assert!(rows_to_batch(&desc, &[vec![Datum::Null]]).is_err());
    assert!(rows_to_batch(&desc, &[vec![Datum::Bytes(vec![1])]]).is_err());
}

#[test]
fn engine_types_without_metadata_convert() {
    use arrow::array::{Date64Array, DictionaryArray, LargeStringArray, TimestampSecondArray};
    let cases: Vec<(ArrayRef, Vec<&str>, PgType)> = vec![
        (
            Arc::new(TimestampSecondArray::from(vec![Some(1), None])),
            vec!["1970-01-01 00:00:01", "NULL"],
            PgType::Timestamp,
        ),
        (
            Arc::new(Date64Array::from(vec![86_400_000])),
            vec!["1970-01-02"],
            PgType::Date,
        ),
        (
            Arc::new(LargeStringArray::from(vec!["x"])),
            vec!["x"],
            PgType::Text,
        ),
        (
            Arc::new(
                Decimal128Array::from(vec![Some(12345), Some(-5)])
                    .with_precision_and_scale(10, 3)
                    .unwrap(),
            ),
            vec!["12.345", "-0.005"],
            PgType::Numeric,
        ),
        (
            Arc::new(
                vec!["a", "b", "a"]
                    .into_iter()
                    .collect::<DictionaryArray<arrow::datatypes::Int32Type>>(),
            ),
            vec!["a", "b", "a"],
            PgType::Text,
        ),
        (
            Arc::new(UInt32Array::from(vec![7])),
            vec!["7"],
            PgType::UInt4,
        ),
        (
            Arc::new(NullArray::new(2)),
            vec!["NULL", "NULL"],
            PgType::Text,
        ),
    ];
    for (array, expected, pg_type) in cases {
        let field = Field::new("c", array.data_type().clone(), true);
        assert_eq!(pg_type_of(&field), pg_type, "{:?}", array.data_type());
        let printed: Vec<String> = array_to_datums(&array, &field)
            .unwrap()
            .iter()
            .map(format_datum)
            .collect();
        assert_eq!(printed, expected);
    }
    // A list of strings without metadata is a text[] as Postgres shows it.
    let mut builder = arrow::array::ListBuilder::new(arrow::array::StringBuilder::new());
    builder.values().append_value("a b");
    builder.values().append_null();
    builder.append(true);
    let array: ArrayRef = Arc::new(builder.finish());
    let field = Field::new("c", array.data_type().clone(), true);
    assert_eq!(pg_type_of(&field), PgType::TextArray);
    assert_eq!(
        array_to_datums(&array, &field).unwrap(),
        vec![Datum::TextArray(vec![Some("a b".into()), None])]
    );
    // A list of such lists is a text[] of two dimensions, its sub-arrays
    // bare (`{{"a b",NULL}}`), as the one metadata of a cast's type says too.
    let mut builder = arrow::array::ListBuilder::new(arrow::array::ListBuilder::new(
        arrow::array::StringBuilder::new(),
    ));
    builder.values().values().append_value("a b");
    builder.values().values().append_null();
    builder.values().append(true);
    builder.append(true);
    let array: ArrayRef = Arc::new(builder.finish());
    for field in [
        Field::new("c", array.data_type().clone(), true),
        pg_field("c", PgType::TextArray, true).with_data_type(array.data_type().clone()),
    ] {
        assert_eq!(pg_type_of(&field), PgType::TextArray);
        let datums = array_to_datums(&array, &field).unwrap();
        assert_eq!(format_datum(&datums[0]), r#"{{"a b",NULL}}"#);
        assert_eq!(
            datums,
            vec![Datum::List(vec![Datum::List(vec![
                Datum::Text("a b".into()),
                Datum::Null
            ])])]
        );
    }
}

#[test]
fn builtin_columns_keep_their_types() {
    let oid = pg_field("oid", PgType::Oid, false);
    let array = pg_array(PgType::Oid, &[Datum::Oid(26)]).unwrap();
    assert_eq!(pg_type_of(&oid), PgType::Oid);
    assert_eq!(array_to_datums(&array, &oid).unwrap(), vec![Datum::Oid(26)]);
    let privileges = pg_field("privileges", PgType::TextArray, false);
    let array = pg_array(
        PgType::TextArray,
        &[Datum::TextArray(vec![Some("x".into())])],
    )
    .unwrap();
    assert_eq!(pg_type_of(&privileges), PgType::TextArray);
    assert_eq!(
        array_to_datums(&array, &privileges).unwrap(),
        vec![Datum::TextArray(vec![Some("x".into())])]
    );
    let numeric = pg_field("n", PgType::Numeric, true);
    let array = pg_array(
        PgType::Numeric,
        &[Datum::Numeric("100.50".into()), Datum::UInt64(7)],
    )
    .unwrap();
    assert_eq!(pg_type_of(&numeric), PgType::Numeric);
    assert_eq!(
        array_to_datums(&array, &numeric).unwrap(),
        vec![Datum::Numeric("100.50".into()), Datum::Numeric("7".into())]
    );
    let jsonb = pg_field("details", PgType::Jsonb, true);
    let array = pg_array(PgType::Jsonb, &[Datum::Jsonb("{}".into()), Datum::Null]).unwrap();
    assert_eq!(pg_type_of(&jsonb), PgType::Jsonb);
    assert_eq!(
        array_to_datums(&array, &jsonb).unwrap(),
        vec![Datum::Jsonb("{}".into()), Datum::Null]
    );
}

/// Exact decimals: every digit kept or refused (22003), never rounded.
#[test]
fn decimals_parse_exactly() {
    assert_eq!(decimal_to_i128("12.34", 38, 2).unwrap(), 1234);
    assert_eq!(decimal_to_i128("-12.3", 38, 2).unwrap(), -1230);
    assert_eq!(decimal_to_i128("12.3400", 38, 2).unwrap(), 1234);
    assert_eq!(decimal_to_i128("1.5e3", 38, 0).unwrap(), 1500);
    assert_eq!(decimal_to_i128(".5", 38, 1).unwrap(), 5);
    assert_eq!(
        decimal_to_i128("18446744073709551615", 20, 0).unwrap(),
        18446744073709551615
    );
    let err = decimal_to_i128("1.235", 38, 2).unwrap_err();
    assert_eq!(err.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    assert!(decimal_to_i128("NaN", 38, 2).is_err());
    assert!(decimal_to_i128(&"9".repeat(39), 38, 0).is_err());
    assert!(decimal_to_i128(&"9".repeat(37), 38, 2).is_err());
    assert!(decimal_to_i128(&"9".repeat(36), 38, 2).is_ok());
}

/// Every column of `rows` (encodings of rows of `desc`) as a batch, the way the query
/// engine's cache converts them; `None` when they go through rows.
fn encoded_rows_to_batch(
    desc: &RelationDesc,
    rows: &[&[u8]],
) -> Option<Result<RecordBatch, ValueError>> {
    let every: Vec<usize> = (0..desc.columns.len()).collect();
    let arrays = crate::encoded_columns(desc, rows, &every)?;
    Some(arrays.and_then(|arrays| {
        RecordBatch::try_new_with_options(
            arrow_schema(desc),
            arrays,
            &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows.len())),
        )
        .map_err(|e| internal(e.to_string()))
    }))
}

/// Encodings of `rows`, as storage keeps them.
fn encodings(rows: &[Row]) -> Vec<Vec<u8>> {
    rows.iter().map(floe_repr::codec::row_to_bytes).collect()
}

#[test]
fn encoded_rows_convert_as_rows_do() {
    let direct = |ty: &S| {
        !matches!(
            ty,
            S::Interval | S::Range { .. } | S::Record { .. } | S::List { .. } | S::Map { .. }
        )
    };
    for (ty, texts) in every_type() {
        let desc = RelationDesc {
            columns: vec![("c".into(), col(ty.clone(), true))],
            unique_keys: vec![],
        };
        let mut rows: Vec<Row> = texts
            .iter()
            .map(|t| vec![parse_datum(t, &ty).unwrap_or_else(|e| panic!("{t}: {e}"))])
            .collect();
        rows.push(vec![Datum::Null]);
        let encoded = encodings(&rows);
        let encoded: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        match encoded_rows_to_batch(&desc, &encoded) {
            Some(batch) => {
                assert!(direct(&ty), "{ty} is not converted directly");
                let batch = batch.unwrap_or_else(|e| panic!("{ty}: {e}"));
                assert_eq!(batch, rows_to_batch(&desc, &rows).unwrap(), "{ty}");
            }
            None => assert!(!direct(&ty), "{ty} is converted directly"),
        }
    }
}

#[test]
fn encoded_rows_of_another_shape_or_kind_go_through_rows() {
    let desc = RelationDesc {
        columns: vec![
            ("id".into(), col(S::Int64, false)),
            ("name".into(), col(S::Text, true)),
            (
                "amount".into(),
                col(
                    S::Numeric {
                        precision: Some(12),
                        max_scale: Some(2),
                    },
                    true,
                ),
            ),
        ],
        unique_keys: vec![],
    };
    // A row written before two columns were added reads them as NULL.
    let rows = vec![
        vec![
            Datum::Int64(1),
            Datum::Text("a".into()),
            Datum::Numeric("1.50".into()),
        ],
        vec![Datum::Int64(2)],
    ];
    let encoded = encodings(&rows);
    let encoded: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let batch = encoded_rows_to_batch(&desc, &encoded)
        .expect("direct")
        .unwrap();
    assert_eq!(batch, rows_to_batch(&desc, &rows).unwrap());
    // A value of a kind the rows' way would cast, a row too wide, corrupt bytes: none.
    for other in [
        vec![vec![Datum::Int32(1)]],
        vec![vec![
            Datum::Int64(1),
            Datum::Null,
            Datum::Null,
            Datum::Bool(true),
        ]],
    ] {
        let encoded = encodings(&other);
        let encoded: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        assert!(
            encoded_rows_to_batch(&desc, &encoded).is_none(),
            "{other:?}"
        );
    }
    assert!(encoded_rows_to_batch(&desc, &[&[1, 9, 9][..]]).is_none());
    // A numeric the column cannot hold exactly: the error the rows' way gives.
    let wide = vec![vec![
        Datum::Int64(1),
        Datum::Null,
        Datum::Numeric("0.125".into()),
    ]];
    let encoded = encodings(&wide);
    let encoded: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let error = encoded_rows_to_batch(&desc, &encoded)
        .expect("direct")
        .unwrap_err();
    assert_eq!(error, rows_to_batch(&desc, &wide).unwrap_err());
}

#[test]
fn encoded_columns_are_the_rows_columns() {
    let desc = RelationDesc {
        columns: vec![
            ("id".into(), col(S::Int64, false)),
            ("name".into(), col(S::Text, true)),
            ("at".into(), col(S::TimestampTz, true)),
            ("flag".into(), col(S::Bool, true)),
        ],
        unique_keys: vec![],
    };
    // The second row was written before the last two columns were added.
    let rows = vec![
        vec![
            Datum::Int64(1),
            Datum::Text("héllo".into()),
            Datum::TimestampTz(7),
            Datum::Bool(true),
        ],
        vec![Datum::Int64(2), Datum::Null],
        vec![
            Datum::Int64(3),
            Datum::Text(String::new()),
            Datum::Null,
            Datum::Bool(false),
        ],
    ];
    let encoded = encodings(&rows);
    let encoded: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    for wanted in [
        vec![],
        vec![0],
        vec![1],
        vec![2],
        vec![1, 3],
        vec![0, 1, 2, 3],
    ] {
        let direct = direct_columns(&desc, &encoded, &wanted);
        assert_eq!(
            direct,
            crate::rows_to_columns(&desc, &rows, &wanted).unwrap(),
            "{wanted:?}"
        );
    }
}

/// Text is gathered unchecked and checked at the end: a value that is not UTF-8 (on a
/// damaged disk) sends the whole batch through rows, which name the row's fault, and
/// never makes a string array of it.
#[test]
fn text_that_is_not_utf8_goes_through_rows() {
    let desc = RelationDesc {
        columns: vec![
            ("id".into(), col(S::Int64, false)),
            ("name".into(), col(S::Text, true)),
        ],
        unique_keys: vec![],
    };
    let rows = vec![
        vec![Datum::Int64(1), Datum::Text("ok".into())],
        vec![Datum::Int64(2), Datum::Text("\u{e9}t\u{e9}".into())],
        vec![Datum::Int64(3), Datum::Null],
    ];
    let mut encoded = encodings(&rows);
    let good: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let built = direct_columns(&desc, &good, &[1]);
    assert_eq!(built, crate::rows_to_columns(&desc, &rows, &[1]).unwrap());
    // Cut the second row's "é" in half: its bytes are no longer UTF-8, though each
    // row still has its length.
    let second = &mut encoded[1];
    let at = second.iter().position(|b| *b == 0xc3).expect("the é");
    second[at + 1] = b'x';
    let damaged: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    assert!(crate::encoded_columns(&desc, &damaged, &[0, 1]).is_none());
    assert!(floe_repr::codec::decode_row(damaged[1]).is_err());
}

fn direct_columns(desc: &RelationDesc, encoded: &[&[u8]], wanted: &[usize]) -> Vec<ArrayRef> {
    crate::encoded_columns(desc, encoded, wanted)
        .expect("direct")
        .expect("converts")
}

/// The fast path of `decimal_to_i128` gives what the general parse gives, for every
/// text it takes.
#[test]
fn plain_decimals_parse_as_the_general_parse_does() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |below: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % below
    };
    let alphabet = b"0123456789.-+e ";
    let mut taken = 0;
    for _ in 0..200_000 {
        let length = 1 + next(22) as usize;
        let text: String = (0..length)
            .map(|_| {
                // Mostly digits, so that many texts are plain.
                let index = if next(4) == 0 { next(15) } else { next(10) };
                char::from(alphabet[index as usize])
            })
            .collect();
        let precision = 1 + next(38) as u8;
        let scale = next(u64::from(precision) + 1) as i8;
        if let Some(fast) = crate::plain_decimal(text.as_bytes(), precision, scale) {
            taken += 1;
            assert_eq!(
                crate::parsed_decimal(&text, precision, scale),
                Ok(fast),
                "{text} as decimal({precision},{scale})"
            );
        }
    }
    assert!(taken > 10_000, "the fast path took {taken} texts");
}

/// What storage accepts into a column of bare `numeric` (`check_stored_numeric`) is
/// exactly what its Arrow form, decimal(38,10), holds: a write never leaves a value that
/// a read cannot convert, and nothing that would fit is refused.
#[test]
fn a_stored_bare_numeric_is_one_its_arrow_form_holds() {
    use floe_repr::strconv::check_stored_numeric;
    let texts = [
        "0",
        "-0",
        "-0.5",
        "+007.100",
        ".5",
        "5.",
        "1.50000000000000000000",
        "1234567890123456789012345678.0123456789",
        "-9999999999999999999999999999.9999999999",
        "12345678901234567890123456789",
        "0.00000000001",
        "0.12345678901",
        "0.66666666666666666667",
        "1e27",
        "1e28",
        "1.5e-10",
        "1.5e-11",
        "100000000000000000000000000000e-2",
        "NaN",
    ];
    for text in texts {
        assert_eq!(
            check_stored_numeric(text, None).is_ok(),
            decimal_to_i128(text, 38, 10).is_ok(),
            "{text}"
        );
    }
    // With a scale, the column's own type bounds the value; only NaN is refused.
    assert!(check_stored_numeric("0.66666666666666666667", Some(20)).is_ok());
    assert!(check_stored_numeric("NaN", Some(2)).is_err());
}

#[test]
fn stored_scales_of_numerics_and_of_arrays_of_them() {
    let numeric = |text: &str| Datum::Numeric(text.to_string());
    let values = [numeric("1.50"), Datum::Null, numeric("2")];
    let scales = stored_scales_of(values.iter().map(Some), &DataType::Int32);
    let scales = scales.as_primitive::<arrow::datatypes::Int32Type>();
    assert_eq!(scales.iter().collect::<Vec<_>>(), [Some(2), None, Some(0)]);

    let ty = S::Array {
        element: Box::new(S::Numeric {
            precision: None,
            max_scale: None,
        }),
    };
    assert!(keeps_display_scales(&ty));
    let arrays = [
        Datum::List(vec![numeric("0.10"), Datum::Null, numeric("3.000")]),
        Datum::List(Vec::new()),
        Datum::Null,
    ];
    let list_type = stored_scale_type(&arrow_data_type(&ty));
    let scales = stored_scales_of(arrays.iter().map(Some), &list_type);
    assert_eq!(scales.data_type(), &list_type);
    let lists = scales.as_list::<i32>();
    let items = |row: usize| {
        let items = lists.value(row);
        let items = items.as_primitive::<arrow::datatypes::Int32Type>();
        items.iter().collect::<Vec<_>>()
    };
    assert_eq!(items(0), [Some(2), None, Some(3)]);
    assert!(items(1).is_empty());
    assert!(lists.is_null(2));
}
