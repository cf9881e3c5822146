use super::*;
use SqlScalarType as S;

fn round_trip(text: &str, ty: &SqlScalarType, expected: &str) {
    let datum = parse_datum(text, ty).unwrap_or_else(|e| panic!("{text}: {e}"));
    let printed = format_datum(&datum);
    assert_eq!(printed, expected, "{text} as {ty}");
    // The printed form reads back as the same value.
    let again = parse_datum(&printed, ty).unwrap();
    assert_eq!(format_datum(&again), printed, "{printed}");
}

fn error(text: &str, ty: &SqlScalarType) -> ValueError {
    parse_datum(text, ty).expect_err(text)
}

fn numeric(p: Option<u8>, s: Option<u8>) -> SqlScalarType {
    S::Numeric {
        precision: p,
        max_scale: s,
    }
}

#[test]
fn booleans() {
    for t in ["t", "TRUE", " yes ", "on", "1", "tr"] {
        assert_eq!(parse_datum(t, &S::Bool).unwrap(), Datum::Bool(true), "{t}");
    }
    for t in ["f", "false", "NO", "off", "0"] {
        assert_eq!(parse_datum(t, &S::Bool).unwrap(), Datum::Bool(false), "{t}");
    }
    let e = error("maybe", &S::Bool);
    assert_eq!(e.code, SqlState::INVALID_TEXT_REPRESENTATION);
    assert_eq!(
        e.message,
        "invalid input syntax for type boolean: \"maybe\""
    );
    assert!(parse_datum("o", &S::Bool).is_err());
}

#[test]
fn integers_and_their_limits() {
    round_trip(" 42 ", &S::Int32, "42");
    round_trip("-32768", &S::Int16, "-32768");
    round_trip("9223372036854775807", &S::Int64, "9223372036854775807");
    round_trip("-9223372036854775808", &S::Int64, "-9223372036854775808");
    round_trip("65535", &S::UInt16, "65535");
    round_trip("4294967295", &S::UInt32, "4294967295");
    round_trip("18446744073709551615", &S::UInt64, "18446744073709551615");
    let e = error("32768", &S::Int16);
    assert_eq!(e.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    assert_eq!(
        e.message,
        "value \"32768\" is out of range for type smallint"
    );
    assert_eq!(
        error("-1", &S::UInt64).code,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE
    );
    assert_eq!(
        error("12a", &S::Int32).message,
        "invalid input syntax for type integer: \"12a\""
    );
    assert!(parse_datum("", &S::Int32).is_err());
}

#[test]
fn floats_print_like_postgres() {
    round_trip("1.5", &S::Float64, "1.5");
    round_trip("1e20", &S::Float64, "1e+20");
    round_trip("1.5e-5", &S::Float64, "1.5e-05");
    round_trip("123456789012345", &S::Float64, "123456789012345");
    round_trip("0.1", &S::Float32, "0.1");
    round_trip("1000000", &S::Float32, "1e+06");
    round_trip("123456", &S::Float32, "123456");
    round_trip("NaN", &S::Float64, "NaN");
    round_trip("-Infinity", &S::Float64, "-Infinity");
    round_trip("inf", &S::Float32, "Infinity");
    round_trip("-0", &S::Float64, "-0");
    assert_eq!(
        error("1e400", &S::Float64).code,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE
    );
    assert_eq!(
        error("1e40", &S::Float32).code,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE
    );
    assert_eq!(
        error("1e-400", &S::Float64).code,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE
    );
    assert_eq!(
        error("abc", &S::Float64).code,
        SqlState::INVALID_TEXT_REPRESENTATION
    );
    assert!(parse_datum("infinityx", &S::Float64).is_err());
}

#[test]
fn numerics_round_to_scale_and_check_precision() {
    round_trip("1.5", &numeric(Some(10), Some(2)), "1.50");
    round_trip("1.005", &numeric(Some(10), Some(2)), "1.01");
    round_trip("-1.005", &numeric(Some(10), Some(2)), "-1.01");
    round_trip("-0.001", &numeric(Some(10), Some(2)), "0.00");
    round_trip("999.994", &numeric(Some(5), Some(2)), "999.99");
    round_trip("12.5", &numeric(Some(3), None), "13");
    // An unconstrained numeric keeps its written scale, as PostgreSQL prints it.
    round_trip("1.500", &numeric(None, None), "1.500");
    round_trip("1e3", &numeric(None, None), "1000");
    round_trip("-.5", &numeric(None, None), "-0.5");
    round_trip("00012.3400", &numeric(None, None), "12.3400");
    round_trip("1.50e1", &numeric(None, None), "15.0");
    round_trip("NaN", &numeric(Some(10), Some(2)), "NaN");
    round_trip(
        "123456789012345678901234567890123456789",
        &numeric(None, None),
        "123456789012345678901234567890123456789",
    );
    let e = error("999.995", &numeric(Some(5), Some(2)));
    assert_eq!(e.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    assert_eq!(e.message, "numeric field overflow");
    assert_eq!(
        e.detail.as_deref(),
        Some("A field with precision 5, scale 2 must round to an absolute value less than 10^3.")
    );
    assert!(parse_datum("1e1001", &numeric(None, None)).is_err());
    assert!(
        parse_datum(
            "1234567890123456789012345678901234567890",
            &numeric(None, None)
        )
        .is_err()
    );
    assert_eq!(
        error("1.2.3", &numeric(None, None)).code,
        SqlState::INVALID_TEXT_REPRESENTATION
    );
    assert!(parse_datum("", &numeric(None, None)).is_err());
    assert!(parse_datum("e5", &numeric(None, None)).is_err());
}

#[test]
fn decimals_compare_by_value() {
    let d = |s: &str| Decimal::parse(s).unwrap().unwrap();
    assert!(d("-2") < d("-1.5"));
    assert!(d("0.10") == d("0.1").clone() || d("0.10").cmp(&d("0.1")) == Ordering::Equal);
    assert!(d("10") > d("9.99"));
    assert_eq!(d("-0").cmp(&d("0")), Ordering::Equal);
}

#[test]
fn varchar_length_is_checked_on_assignment() {
    let ty = S::VarChar {
        max_length: Some(3),
    };
    round_trip("abc", &ty, "abc");
    round_trip("äöü", &ty, "äöü");
    assert_eq!(
        parse_datum("ab   ", &ty).unwrap(),
        Datum::Text("ab ".into())
    );
    let e = error("abcd", &ty);
    assert_eq!(e.code, SqlState::STRING_DATA_RIGHT_TRUNCATION);
    assert_eq!(e.message, "value too long for type character varying(3)");
    round_trip(
        "anything at all",
        &S::VarChar { max_length: None },
        "anything at all",
    );
}

#[test]
fn bytea_hex_and_escape() {
    round_trip("\\xDEADbeef", &S::Bytes, "\\xdeadbeef");
    round_trip("\\x", &S::Bytes, "\\x");
    round_trip("\\x de ad", &S::Bytes, "\\xdead");
    assert_eq!(
        parse_datum("a\\\\b\\001", &S::Bytes).unwrap(),
        Datum::Bytes(vec![b'a', b'\\', b'b', 1])
    );
    assert_eq!(
        error("\\xabc", &S::Bytes).message,
        "invalid hexadecimal data: odd number of digits"
    );
    assert_eq!(
        error("\\xzz", &S::Bytes).message,
        "invalid hexadecimal digit: \"z\""
    );
    assert!(parse_datum("a\\9", &S::Bytes).is_err());
}

#[test]
fn uuids() {
    let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
    round_trip(canonical, &S::Uuid, canonical);
    round_trip("A0EEBC999C0B4EF8BB6D6BB9BD380A11", &S::Uuid, canonical);
    round_trip("{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}", &S::Uuid, canonical);
    assert!(parse_datum("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", &S::Uuid).is_err());
    assert!(parse_datum("-a0eebc999c0b4ef8bb6d6bb9bd380a11", &S::Uuid).is_err());
    assert!(parse_datum("a0eebc999c0b4ef8bb6d6bb9bd380a11-", &S::Uuid).is_err());
    assert!(parse_datum("g0eebc999c0b4ef8bb6d6bb9bd380a11", &S::Uuid).is_err());
}

#[test]
fn dates_and_times() {
    round_trip("2024-02-29", &S::Date, "2024-02-29");
    round_trip("1970-01-01", &S::Date, "1970-01-01");
    round_trip("0044-03-15 BC", &S::Date, "0044-03-15 BC");
    round_trip("4714-11-24 BC", &S::Date, "4714-11-24 BC");
    round_trip("5874897-12-31", &S::Date, "5874897-12-31");
    round_trip("2024-01-02 10:00:00", &S::Date, "2024-01-02");
    assert_eq!(days_from_civil(-4713, 11, 24), i64::from(MIN_DATE_DAYS));
    assert_eq!(days_from_civil(5_874_897, 12, 31), i64::from(MAX_DATE_DAYS));
    assert_eq!(parse_datum("1970-01-02", &S::Date).unwrap(), Datum::Date(1));
    let february_29 = error("2023-02-29", &S::Date);
    assert_eq!(february_29.code, SqlState::DATETIME_FIELD_OVERFLOW);
    assert_eq!(
        february_29.message,
        "date/time field value out of range: \"2023-02-29\""
    );
    assert_eq!(
        error("2023-02-2x", &S::Date).code,
        SqlState::INVALID_DATETIME_FORMAT
    );
    assert_eq!(
        error("2024-01-01 24:00:01", &S::Timestamp).code,
        SqlState::DATETIME_FIELD_OVERFLOW
    );
    assert_eq!(
        error("5874898-01-01", &S::Date).code,
        SqlState::DATETIME_FIELD_OVERFLOW
    );
    assert!(parse_datum("2024-13-01", &S::Date).is_err());
    round_trip("infinity", &S::Date, "infinity");
    round_trip(" -Infinity", &S::Date, "-infinity");
    round_trip("infinity", &S::Timestamp, "infinity");
    round_trip("-infinity", &S::TimestampTz, "-infinity");
    assert!(parse_datum("+infinity", &S::Date).is_err());
    // Past the microseconds an i64 counts from 1970: out of range, not a panic.
    assert_eq!(
        error("294276-12-31 23:59:59", &S::Timestamp).code,
        SqlState::DATETIME_FIELD_OVERFLOW
    );
    assert!(parse_datum("0000-01-01", &S::Date).is_err());
    assert!(parse_datum("yesterday", &S::Date).is_err());

    round_trip("01:02:03.5", &S::Time, "01:02:03.5");
    round_trip("23:59", &S::Time, "23:59:00");
    round_trip("00:00:00.0000005", &S::Time, "00:00:00.000001");
    round_trip("24:00:00", &S::Time, "24:00:00");
    assert!(parse_datum("24:00:01", &S::Time).is_err());
    assert!(parse_datum("12:60", &S::Time).is_err());
    assert!(parse_datum("1:2:3:4", &S::Time).is_err());
}

#[test]
fn timestamps_in_iso_forms() {
    round_trip(
        "2025-11-30 00:00:00.123",
        &S::Timestamp,
        "2025-11-30 00:00:00.123",
    );
    round_trip("2025-11-30T12:34:56", &S::Timestamp, "2025-11-30 12:34:56");
    round_trip("2025-11-30", &S::Timestamp, "2025-11-30 00:00:00");
    round_trip(
        "2025-11-30 10:00:00+05",
        &S::Timestamp,
        "2025-11-30 10:00:00",
    );
    round_trip(
        "1969-12-31 23:59:59.999999",
        &S::Timestamp,
        "1969-12-31 23:59:59.999999",
    );
    round_trip(
        "0001-01-01 00:00:00 BC",
        &S::Timestamp,
        "0001-01-01 00:00:00 BC",
    );
    round_trip(
        "2025-11-30 10:00:00+02",
        &S::TimestampTz,
        "2025-11-30 08:00:00+00",
    );
    round_trip(
        "2025-11-30T10:00:00Z",
        &S::TimestampTz,
        "2025-11-30 10:00:00+00",
    );
    round_trip(
        "2025-11-30 10:00:00 UTC",
        &S::TimestampTz,
        "2025-11-30 10:00:00+00",
    );
    round_trip(
        "2025-11-30 10:00:00-05:30",
        &S::TimestampTz,
        "2025-11-30 15:30:00+00",
    );
    round_trip(
        "2025-11-30 10:00:00.5-0530",
        &S::TimestampTz,
        "2025-11-30 15:30:00.5+00",
    );
    assert_eq!(
        parse_datum("2025-11-30 00:00:00.123+00", &S::TimestampTz).unwrap(),
        Datum::TimestampTz(1_764_460_800_123_000)
    );
    assert!(parse_datum("2025-11-30X10:00", &S::Timestamp).is_err());
    assert!(parse_datum("2025-11-30 10:00 Mars/Olympus", &S::TimestampTz).is_err());
    assert_eq!(
        error("300000-01-01", &S::Timestamp).code,
        SqlState::DATETIME_FIELD_OVERFLOW
    );
}

#[test]
fn intervals_in_postgres_forms() {
    let iv = |m, d, us| Datum::Interval {
        months: m,
        days: d,
        micros: us,
    };
    round_trip("1 day 02:00:00", &S::Interval, "1 day 02:00:00");
    round_trip(
        "1 year 2 months 3 days 4 hours 5 minutes 6.789 seconds",
        &S::Interval,
        "1 year 2 mons 3 days 04:05:06.789",
    );
    round_trip("-1 year", &S::Interval, "-1 years");
    round_trip("-1 day 1 hour", &S::Interval, "-1 days +01:00:00");
    round_trip("1 day -00:00:01", &S::Interval, "1 day -00:00:01");
    round_trip("-1 month 1 day", &S::Interval, "-1 mons +1 day");
    round_trip("1.5 days", &S::Interval, "1 day 12:00:00");
    round_trip("1h 30m", &S::Interval, "01:30:00");
    round_trip("1h30m", &S::Interval, "01:30:00");
    round_trip("10", &S::Interval, "00:00:10");
    round_trip("@ 2 hours ago", &S::Interval, "-02:00:00");
    round_trip("0", &S::Interval, "00:00:00");
    round_trip(
        "P1Y2M3DT4H5M6S",
        &S::Interval,
        "1 year 2 mons 3 days 04:05:06",
    );
    round_trip("PT0.5S", &S::Interval, "00:00:00.5");
    round_trip("1 week", &S::Interval, "7 days");
    round_trip("1.5 months", &S::Interval, "1 mon 15 days");
    round_trip("100:00:00", &S::Interval, "100:00:00");
    assert_eq!(
        parse_datum("1m", &S::Interval).unwrap(),
        iv(0, 0, 60_000_000)
    );
    assert_eq!(parse_datum("2 mons", &S::Interval).unwrap(), iv(2, 0, 0));
    assert_eq!(
        error("1 fortnight", &S::Interval).code,
        SqlState::INVALID_DATETIME_FORMAT
    );
    assert!(parse_datum("", &S::Interval).is_err());
    assert!(parse_datum("P", &S::Interval).is_err());
    assert_eq!(
        error("999999999999 years", &S::Interval).code,
        SqlState::DATETIME_FIELD_OVERFLOW
    );
    assert!(parse_datum("9223372036854775807 hours", &S::Interval).is_err());
    assert!(format_interval(i32::MIN, i32::MIN, i64::MIN).len() > 10);
}

#[test]
fn jsonb_is_normalized() {
    round_trip(
        r#"{"b": 1, "a": [1, 2.50, "x"]}"#,
        &S::Jsonb,
        r#"{"a":[1,2.50,"x"],"b":1}"#,
    );
    round_trip(r#"{"a": 1, "a": 2}"#, &S::Jsonb, r#"{"a":2}"#);
    round_trip("1e2", &S::Jsonb, "100");
    round_trip("-0.0", &S::Jsonb, "0.0");
    round_trip("1.50e1", &S::Jsonb, "15.0");
    round_trip("0.00001e5", &S::Jsonb, "1");
    round_trip("-1E-2", &S::Jsonb, "-0.01");
    assert_eq!(parse_json("[1.5]").unwrap(), parse_json("[1.50]").unwrap());
    assert_ne!(parse_json("[1.5]").unwrap(), parse_json("[1.51]").unwrap());
    round_trip(" null ", &S::Jsonb, "null");
    round_trip(
        r#""\u00e9\n\"q\"\\ \ud83d\ude00""#,
        &S::Jsonb,
        "\"é\\n\\\"q\\\"\\\\ 😀\"",
    );
    round_trip(r#""\u0001""#, &S::Jsonb, r#""\u0001""#);
    round_trip("[]", &S::Jsonb, "[]");
    round_trip("{}", &S::Jsonb, "{}");
    round_trip(r#"{"ü": "ö"}"#, &S::Jsonb, r#"{"ü":"ö"}"#);
    for bad in [
        "{",
        "[1,]",
        "01",
        "1.",
        "tru",
        "\"a",
        "{\"a\" 1}",
        "[1] x",
        "\"\\ud800\"",
        "NaN",
        "\"\u{1}\"",
    ] {
        let e = error(bad, &S::Jsonb);
        assert_eq!(e.code, SqlState::INVALID_TEXT_REPRESENTATION, "{bad}");
    }
    for (bad, detail) in [
        ("", "The input string ended unexpectedly."),
        ("{\"a\":", "The input string ended unexpectedly."),
        ("[1,]", "Expected JSON value, but found \"]\"."),
        ("01", "Token \"01\" is invalid."),
        ("1.x", "Token \"1.x\" is invalid."),
        ("1.5.5", "Token \".\" is invalid."),
        ("truex", "Token \"truex\" is invalid."),
        ("\"ab", "Token \"\"ab\" is invalid."),
        ("{\"a\" 1}", "Expected \":\", but found \"1\"."),
        ("{1:2}", "Expected string or \"}\", but found \"1\"."),
        ("{\"a\":1,}", "Expected string, but found \"}\"."),
        (
            "{\"a\":1 \"b\":2}",
            "Expected \",\" or \"}\", but found \"\"b\"\".",
        ),
        ("[1 2]", "Expected \",\" or \"]\", but found \"2\"."),
        ("true false", "Expected end of input, but found \"false\"."),
        ("\"\\x\"", "Escape sequence \"\\x\" is invalid."),
        (
            "\"\\u12\"",
            "\"\\u\" must be followed by four hexadecimal digits.",
        ),
        (
            "\"\\ud800x\"",
            "Unicode low surrogate must follow a high surrogate.",
        ),
        (
            "\"\\ud800\\ud800\"",
            "Unicode high surrogate must not follow a high surrogate.",
        ),
        ("\"a\tb\"", "Character with value 0x09 must be escaped."),
    ] {
        let e = error(bad, &S::Jsonb);
        assert_eq!(e.message, "invalid input syntax for type json", "{bad}");
        assert_eq!(e.detail.as_deref(), Some(detail), "{bad}");
    }
    assert_eq!(
        error(r#""\u0000""#, &S::Jsonb).code,
        SqlState::UNTRANSLATABLE_CHARACTER
    );
    let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    assert_eq!(
        error(&deep, &S::Jsonb).code,
        SqlState::PROGRAM_LIMIT_EXCEEDED
    );
}

fn list(element: SqlScalarType) -> SqlScalarType {
    S::List {
        element: Box::new(element),
    }
}

fn map(value: SqlScalarType) -> SqlScalarType {
    S::Map {
        value: Box::new(value),
    }
}

fn range(element: SqlScalarType) -> SqlScalarType {
    S::Range {
        element: Box::new(element),
    }
}

#[test]
fn lists() {
    round_trip("{1,2,3}", &list(S::Int32), "{1,2,3}");
    round_trip(" { 1 , NULL , 3 } ", &list(S::Int32), "{1,NULL,3}");
    round_trip("{}", &list(S::Int32), "{}");
    round_trip(
        "{{1,2},{},{NULL}}",
        &list(list(S::Int32)),
        "{{1,2},{},{NULL}}",
    );
    round_trip(
        r#"{a,"b c","","NULL",NULL,"q\"uote","back\\slash",é}"#,
        &list(S::Text),
        r#"{a,"b c","","NULL",NULL,"q\"uote","back\\slash",é}"#,
    );
    round_trip(r#"{"{a=>1}"}"#, &list(map(S::Int32)), "{{a=>1}}");
    round_trip("{{a=>1}}", &list(map(S::Int32)), "{{a=>1}}");
    round_trip(
        r#"{"2024-01-01 10:00:00"}"#,
        &list(S::Timestamp),
        r#"{"2024-01-01 10:00:00"}"#,
    );
    assert!(parse_datum("{1,2", &list(S::Int32)).is_err());
    assert!(parse_datum("{1,,2}", &list(S::Int32)).is_err());
    assert!(parse_datum("1,2", &list(S::Int32)).is_err());
    assert!(parse_datum("{1} x", &list(S::Int32)).is_err());
    assert_eq!(
        error("{x}", &list(S::Int32)).code,
        SqlState::INVALID_TEXT_REPRESENTATION
    );
    assert!(parse_datum("{\"a}", &list(S::Text)).is_err());
    let mut nested = list(S::Int32);
    for _ in 0..200 {
        nested = list(nested);
    }
    let deep = format!("{}{}", "{".repeat(201), "}".repeat(201));
    assert_eq!(error(&deep, &nested).code, SqlState::PROGRAM_LIMIT_EXCEEDED);
}

#[test]
fn maps() {
    round_trip("{a=>1,b=>2}", &map(S::Int32), "{a=>1,b=>2}");
    round_trip(" { b => 2 , a => NULL } ", &map(S::Int32), "{a=>NULL,b=>2}");
    round_trip("{a=>1,a=>2}", &map(S::Int32), "{a=>2}");
    round_trip("{}", &map(S::Text), "{}");
    round_trip(
        r#"{"a b"=>"c,d","x=>y"=>"","n"=>"NULL"}"#,
        &map(S::Text),
        r#"{"a b"=>"c,d",n=>"NULL","x=>y"=>""}"#,
    );
    round_trip("{a=>{b=>1}}", &map(map(S::Int32)), "{a=>{b=>1}}");
    round_trip("{a=>{1,2}}", &map(list(S::Int32)), "{a=>{1,2}}");
    assert!(parse_datum("{a=1}", &map(S::Int32)).is_err());
    assert!(parse_datum("{=>1}", &map(S::Int32)).is_err());
    assert!(parse_datum("{a=>}", &map(S::Int32)).is_err());
    assert!(parse_datum("{a=>x}", &map(S::Int32)).is_err());
}

#[test]
fn records() {
    let ty = S::Record {
        fields: vec![
            ("a".into(), S::Int32, true),
            ("b".into(), S::Text, true),
            ("c".into(), S::Timestamp, true),
        ],
    };
    round_trip("(1,x,)", &ty, "(1,x,)");
    round_trip(r#"(,"",)"#, &ty, r#"(,"",)"#);
    round_trip(
        r#"(1,"a ""b"" \\c (d)","2024-01-01 00:00:00")"#,
        &ty,
        r#"(1,"a ""b"" \\c (d)","2024-01-01 00:00:00")"#,
    );
    assert!(parse_datum("(1,x)", &ty).is_err());
    assert!(parse_datum("(1,x,,)", &ty).is_err());
    assert!(parse_datum("1,x,", &ty).is_err());
    assert!(parse_datum("(1,x,) junk", &ty).is_err());
    let strict = S::Record {
        fields: vec![("a".into(), S::Int32, false)],
    };
    assert_eq!(error("()", &strict).code, SqlState::NOT_NULL_VIOLATION);
    let nested = S::Record {
        fields: vec![
            ("r".into(), ty.clone(), true),
            ("l".into(), list(S::Int32), true),
        ],
    };
    round_trip(r#"("(1,x,)","{1,2}")"#, &nested, r#"("(1,x,)","{1,2}")"#);
}

#[test]
fn ranges_canonicalize() {
    round_trip("[1,5)", &range(S::Int32), "[1,5)");
    round_trip("(1,5]", &range(S::Int32), "[2,6)");
    round_trip("[1,1)", &range(S::Int32), "empty");
    round_trip("(1,2)", &range(S::Int32), "empty");
    round_trip("EMPTY", &range(S::Int32), "empty");
    round_trip("[,5)", &range(S::Int64), "(,5)");
    round_trip("(,)", &range(S::Int64), "(,)");
    round_trip("[3,]", &range(S::Int64), "[3,)");
    round_trip("[1.5,2.5]", &range(numeric(None, None)), "[1.5,2.5]");
    round_trip("[1.5,1.5]", &range(numeric(None, None)), "[1.5,1.5]");
    round_trip("(1.5,1.5]", &range(numeric(None, None)), "empty");
    round_trip(
        "[2024-01-01,2024-01-31]",
        &range(S::Date),
        "[2024-01-01,2024-02-01)",
    );
    round_trip(
        "[2024-01-01 10:00, 2024-01-02)",
        &range(S::Timestamp),
        r#"["2024-01-01 10:00:00","2024-01-02 00:00:00")"#,
    );
    round_trip(
        r#"("2024-01-01 10:00+02",)"#,
        &range(S::TimestampTz),
        r#"("2024-01-01 08:00:00+00",)"#,
    );
    let e = error("[5,1)", &range(S::Int32));
    assert_eq!(e.code, SqlState::DATA_EXCEPTION);
    assert_eq!(
        e.message,
        "range lower bound must be less than or equal to range upper bound"
    );
    assert_eq!(
        error("[1,2147483647]", &range(S::Int32)).code,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE
    );
    assert!(parse_datum("[1,5", &range(S::Int32)).is_err());
    assert!(parse_datum("1,5", &range(S::Int32)).is_err());
    assert!(parse_datum("[1,5) x", &range(S::Int32)).is_err());
    assert!(parse_datum("[a,5)", &range(S::Int32)).is_err());
}

#[test]
fn garbage_never_panics() {
    let types = [
        S::Bool,
        S::Int32,
        S::Float64,
        numeric(Some(5), Some(2)),
        S::Date,
        S::Time,
        S::Timestamp,
        S::TimestampTz,
        S::Interval,
        S::Bytes,
        S::Uuid,
        S::Jsonb,
        range(S::Int32),
        range(S::Timestamp),
        list(list(S::Text)),
        map(list(S::Int32)),
        S::Record {
            fields: vec![("a".into(), S::Text, true)],
        },
    ];
    let inputs = [
        "",
        " ",
        "\\",
        "\"",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "{\"",
        "(\"",
        "[\"",
        "{\\",
        "(\\",
        "é",
        "😀",
        "-",
        "+",
        ".",
        "e",
        "1e",
        "::",
        "P",
        "PT",
        "\u{0}",
        "{a=>",
        "{a=>{",
        "[,",
        "(,\"",
        "2024-",
        "2024-01-01T",
        "10:",
        "-:",
        "@",
        "ago",
        "1 ago ago",
    ];
    for ty in &types {
        for input in inputs {
            let _ = parse_datum(input, ty);
        }
    }
}

/// Documents equal by value share a key, whatever their numbers' scale or
/// spelling; documents that differ do not.
#[test]
fn jsonb_keys_are_equal_for_documents_equal_by_value() {
    let key = |text: &str| jsonb_key_text(&parse_jsonb(text).unwrap()).unwrap();
    assert_eq!(key("1.50"), "1.5");
    assert_eq!(key("[1.0, {\"a\": 2.500}]"), key("[1, {\"a\": 2.5}]"));
    assert_eq!(key("-0.0"), key("0"));
    assert_eq!(key("1.5e1"), key("15"));
    assert_ne!(key("[1.5]"), key("[1.51]"));
    assert_ne!(key("\"1.50\""), key("\"1.5\""), "strings keep their text");
    // A float's conversion writes an exponent, which the key reads as a number.
    assert_eq!(
        jsonb_key_text("[1e+20]").unwrap(),
        key("[100000000000000000000]")
    );
    assert_eq!(jsonb_key_text("{\"a\":true}").unwrap(), "{\"a\":true}");
}

#[test]
fn json_steps_keep_the_input_spelling() {
    let object = r#"{"b": 2, "a" : {"x" :  1}, "a": [1 , 2]}"#;
    assert_eq!(
        json_step_text(object, JsonStep::Key("a")).unwrap(),
        Some("[1 , 2]")
    );
    assert_eq!(json_step_text(object, JsonStep::Key("z")).unwrap(), None);
    assert_eq!(json_step_text(object, JsonStep::Index(0)).unwrap(), None);
    let array = r#"[1, {"k" : null} ,"s"]"#;
    assert_eq!(
        json_step_text(array, JsonStep::Index(1)).unwrap(),
        Some(r#"{"k" : null}"#)
    );
    assert_eq!(
        json_step_text(array, JsonStep::Index(-1)).unwrap(),
        Some("\"s\"")
    );
    assert_eq!(json_step_text(array, JsonStep::Index(3)).unwrap(), None);
    assert_eq!(json_step_text(array, JsonStep::Index(-4)).unwrap(), None);
    assert_eq!(json_step_text("[]", JsonStep::Index(0)).unwrap(), None);
    assert_eq!(json_step_text("\"x\"", JsonStep::Key("a")).unwrap(), None);
}
