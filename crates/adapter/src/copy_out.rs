//! `COPY ... TO STDOUT`: rows encoded as Postgres' text or CSV format, one
//! line per row.

use floe_repr::{ColumnDesc, Datum};
use floe_sql::dml::{CopyFormat, CopyOptions};

/// The lines COPY TO sends, one per row; the CSV header, when asked for,
/// travels with the first (the wire's `COPY n` counts messages).
pub fn encode_rows(
    desc: &[ColumnDesc],
    rows: &[Vec<Datum>],
    options: &CopyOptions,
) -> Vec<Vec<u8>> {
    let mut lines = Vec::with_capacity(rows.len());
    let mut header = Vec::new();
    if options.header && options.format == CopyFormat::Csv {
        let names: Vec<Option<String>> = desc.iter().map(|c| Some(c.name.clone())).collect();
        header = encode_line(&names, options);
    }
    if rows.is_empty() && !header.is_empty() {
        lines.push(header);
        return lines;
    }
    for (i, row) in rows.iter().enumerate() {
        let values: Vec<Option<String>> = row
            .iter()
            .map(|datum| match datum {
                Datum::Null => None,
                other => Some(floe_repr::strconv::format_datum(other)),
            })
            .collect();
        let line = encode_line(&values, options);
        if i == 0 && !header.is_empty() {
            let mut first = std::mem::take(&mut header);
            first.extend(line);
            lines.push(first);
        } else {
            lines.push(line);
        }
    }
    lines
}

fn encode_line(values: &[Option<String>], options: &CopyOptions) -> Vec<u8> {
    let mut line = String::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            line.push(options.delimiter);
        }
        match (value, options.format) {
            (None, _) => line.push_str(&options.null),
            (Some(value), CopyFormat::Text) => escape_text(value, options.delimiter, &mut line),
            (Some(value), CopyFormat::Csv) => quote_csv(value, options, &mut line),
        }
    }
    line.push('\n');
    line.into_bytes()
}

/// Text format: backslash escapes for the backslash, the delimiter and
/// control characters, as Postgres writes them.
fn escape_text(value: &str, delimiter: char, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' if delimiter == '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if c == delimiter => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

/// CSV: a value is quoted (quotes doubled) when it holds the delimiter, a
/// quote or a line break, or reads as NULL unquoted.
fn quote_csv(value: &str, options: &CopyOptions, out: &mut String) {
    let needs_quotes = value == options.null
        || value
            .chars()
            .any(|c| c == options.delimiter || c == '"' || c == '\n' || c == '\r');
    if !needs_quotes {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(format: CopyFormat, header: bool) -> CopyOptions {
        CopyOptions {
            format,
            delimiter: if format == CopyFormat::Text {
                '\t'
            } else {
                ','
            },
            null: if format == CopyFormat::Text {
                "\\N".into()
            } else {
                String::new()
            },
            header,
        }
    }

    fn line(values: &[Option<&str>], options: &CopyOptions) -> String {
        let values: Vec<Option<String>> = values.iter().map(|v| v.map(str::to_string)).collect();
        String::from_utf8(encode_line(&values, options)).unwrap()
    }

    #[test]
    fn text_escapes_as_postgres_does() {
        let text = options(CopyFormat::Text, false);
        assert_eq!(
            line(&[Some("a\tb"), None, Some("back\\slash\nnew")], &text),
            "a\\tb\t\\N\tback\\\\slash\\nnew\n"
        );
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let csv = options(CopyFormat::Csv, true);
        assert_eq!(
            line(
                &[
                    Some("plain"),
                    Some("a,b"),
                    Some("say \"hi\""),
                    Some(""),
                    None
                ],
                &csv
            ),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"\",\n"
        );
    }
}
