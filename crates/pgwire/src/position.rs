//! Where in the query text an error points, as PostgreSQL's ErrorResponse
//! `P` field says (psql prints the line with a caret under that character).
//!
//! floe's planner does not carry positions through DataFusion, so the
//! position is found from the error: the unknown column, relation or
//! function it names, the literal a cast could not read, or the line and
//! column a syntax error reports. The first place in the text that fits is
//! taken; an error that names nothing findable has no position.

/// The 1-based character position `message` points at in `query`.
pub fn error_position(query: &str, message: &str) -> Option<usize> {
    let byte = if let Some(name) = quoted_after(message, "column \"", "\" does not exist")
        .or_else(|| quoted_after(message, "relation \"", "\" does not exist"))
    {
        qualified_start(query, find_name(query, name, false)?)
    } else if let Some(qualified) = quoted_after(message, "column ", " does not exist") {
        // `column t.a does not exist`: the qualified name as written.
        let (_, column) = qualified.rsplit_once('.')?;
        qualified_start(query, find_name(query, column, false)?)
    } else if let Some(qualified) = quoted_after(message, "column \"", UNGROUPED) {
        // PostgreSQL points at the column's first ungrouped reading; the
        // first reading of its name in the text is that where the query
        // reads it only outside the group.
        let column = qualified.rsplit_once('.').map_or(qualified, |(_, c)| c);
        qualified_start(query, find_name(query, column, false)?)
    } else if let Some(operator) = operator_name(message) {
        find_operator(query, operator)?
    } else if let Some(name) = function_name(message) {
        find_name(query, name, true)?
    } else if let Some(value) = message
        .strip_prefix("invalid input syntax for type ")
        .and_then(|rest| rest.split_once(": \""))
        .and_then(|(_, value)| value.strip_suffix('"'))
    {
        query.find(&format!("'{}'", value.replace('\'', "''")))?
    } else {
        line_and_column(query, message)?
    };
    Some(query[..byte].chars().count() + 1)
}

/// The end of the error of a column read outside its group.
const UNGROUPED: &str = "\" must appear in the GROUP BY clause or be used in an aggregate function";

/// The text between `prefix` and `suffix` when `message` is exactly that.
fn quoted_after<'a>(message: &'a str, prefix: &str, suffix: &str) -> Option<&'a str> {
    message.strip_prefix(prefix)?.strip_suffix(suffix)
}

/// The operator of `operator does not exist: type op type` (a type's name
/// may have spaces; the operator is the word of operator characters).
fn operator_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("operator does not exist: ")?;
    rest.split(' ')
        .find(|word| !word.is_empty() && word.chars().all(|c| "+-*/<>=~!@#%^&|`?".contains(c)))
}

/// The byte offset of the first `operator` outside string literals that is not
/// part of a longer operator.
fn find_operator(query: &str, operator: &str) -> Option<usize> {
    let strings = string_literals(query);
    let symbol = |c: Option<char>| c.is_some_and(|c| "+-*/<>=~!@#%^&|`?".contains(c));
    query.match_indices(operator).map(|(at, _)| at).find(|&at| {
        !strings.iter().any(|range| range.contains(&at))
            && !symbol(query[..at].chars().next_back())
            && !symbol(query[at + operator.len()..].chars().next())
    })
}

/// The name of `function f(types) does not exist` or `function f does not exist`.
fn function_name(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("function ")?
        .strip_suffix(" does not exist")?;
    Some(rest.split('(').next().unwrap_or(rest).trim())
}

/// The byte offset of the first whole-word occurrence of `name` (ignoring
/// case unless it needs quotes), followed by `(` when `call`.
fn find_name(query: &str, name: &str, call: bool) -> Option<usize> {
    // An empty name (`FROM ''`) is found everywhere and nowhere: no position.
    if name.is_empty() {
        return None;
    }
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    let lower_query = query.to_lowercase();
    let lower_name = name.to_lowercase();
    // Lowercasing keeps byte offsets for ASCII text only.
    let (haystack, needle) = if lower_query.len() == query.len() && lower_name.len() == name.len() {
        (lower_query.as_str(), lower_name.as_str())
    } else {
        (query, name)
    };
    let bytes = haystack.as_bytes();
    let strings = string_literals(query);
    let mut from = 0;
    while let Some(found) = haystack.get(from..)?.find(needle) {
        let start = from + found;
        if strings.iter().any(|range| range.contains(&start)) {
            from = start + needle.len();
            continue;
        }
        let end = start + needle.len();
        let quoted = start > 0 && bytes[start - 1] == b'"' && bytes.get(end) == Some(&b'"');
        let bounded = quoted
            || ((start == 0 || !word(bytes[start - 1]))
                && bytes.get(end).is_none_or(|b| !word(*b)));
        let after = if quoted { end + 1 } else { end };
        let called = !call || haystack[after..].trim_start().starts_with('(');
        if bounded && called {
            return Some(if quoted { start - 1 } else { start });
        }
        from = end;
    }
    None
}

/// The byte ranges of the query's single-quoted literals.
fn string_literals(query: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut open: Option<usize> = None;
    let bytes = query.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'\'' {
            match open {
                // A doubled quote inside a literal is a quote.
                Some(_) if bytes.get(at + 1) == Some(&b'\'') => at += 1,
                Some(start) => {
                    ranges.push(start..at + 1);
                    open = None;
                }
                None => open = Some(at),
            }
        }
        at += 1;
    }
    if let Some(start) = open {
        ranges.push(start..bytes.len());
    }
    ranges
}

/// The start of the qualified name (`t.a`, `"s"."t"`) ending at `at`.
fn qualified_start(query: &str, at: usize) -> usize {
    let bytes = query.as_bytes();
    let mut start = at;
    while start >= 2 && bytes[start - 1] == b'.' {
        let mut before = start - 1;
        while before > 0
            && (bytes[before - 1].is_ascii_alphanumeric()
                || bytes[before - 1] == b'_'
                || bytes[before - 1] == b'"')
        {
            before -= 1;
        }
        if before == start - 1 {
            break;
        }
        start = before;
    }
    start
}

/// The byte offset of a syntax error's `at line L, column C` (or `at Line:
/// L, Column: C`; both 1-based).
fn line_and_column(query: &str, message: &str) -> Option<usize> {
    let lower = message
        .to_lowercase()
        .replace("line:", "line")
        .replace("column:", "column");
    let (_, place) = lower.rsplit_once(" at line ")?;
    let (line, column) = place.split_once(", column ")?;
    let line: usize = line.trim().parse().ok()?;
    let column: usize = column
        .trim()
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    let line_start = if line <= 1 {
        0
    } else {
        query
            .match_indices('\n')
            .nth(line - 2)
            .map(|(at, _)| at + 1)?
    };
    let offset = query[line_start..]
        .char_indices()
        .nth(column.checked_sub(1)?)
        .map_or(query.len() - line_start, |(at, _)| at);
    Some(line_start + offset)
}

#[cfg(test)]
mod tests {
    use super::error_position;

    #[test]
    fn errors_point_where_postgres_points() {
        // Each position as PostgreSQL 15 reports it for the same text.
        let query = "SELECT a, nosuch FROM t1";
        assert_eq!(
            error_position(query, "column \"nosuch\" does not exist"),
            Some(11)
        );
        assert_eq!(
            error_position(
                "SELECT t1.nosuch FROM t1",
                "column \"nosuch\" does not exist"
            ),
            Some(8)
        );
        assert_eq!(
            error_position(
                "SELECT 1 FROM nowhere",
                "relation \"nowhere\" does not exist"
            ),
            Some(15)
        );
        assert_eq!(
            error_position(
                "SELECT nosuchfunc(1)",
                "function nosuchfunc(integer) does not exist"
            ),
            Some(8)
        );
        assert_eq!(
            error_position(
                "SELECT 'abc'::int",
                "invalid input syntax for type integer: \"abc\""
            ),
            Some(8)
        );
        // A name inside another word or a string is not the one.
        assert_eq!(
            error_position("SELECT 'x', xa, x FROM t", "column \"x\" does not exist"),
            Some(17)
        );
    }

    #[test]
    fn ungrouped_columns_point_at_their_reading() {
        // Each position as PostgreSQL 15 reports it for the same text.
        let message = |column: &str| format!("column \"{column}{}", super::UNGROUPED);
        assert_eq!(
            error_position("select x, count(*) from t", &message("t.x")),
            Some(8)
        );
        assert_eq!(
            error_position("select a.x, count(*) from t a", &message("a.x")),
            Some(8)
        );
        assert_eq!(
            error_position("select count(*) from t having x > 1", &message("t.x")),
            Some(31)
        );
    }

    #[test]
    fn missing_operators_point_at_the_operator() {
        // As PostgreSQL 15 reports them.
        assert_eq!(
            error_position(
                "select 5::float8 % 2",
                "operator does not exist: double precision % integer"
            ),
            Some(18)
        );
        assert_eq!(
            error_position(
                "select '%' || x, 5 % 2::real from t",
                "operator does not exist: integer % real"
            ),
            Some(20)
        );
    }

    #[test]
    fn an_empty_name_has_no_position() {
        // Found by the SQL fuzz test (seed 15464117237812568999): the search for
        // an empty name never moved on, and the connection's task spun forever.
        let query = "SELECT id FROM '', BY id";
        assert_eq!(error_position(query, "relation \"\" does not exist"), None);
        assert_eq!(error_position(query, "column \"\" does not exist"), None);
        assert_eq!(error_position(query, "function () does not exist"), None);
    }

    #[test]
    fn syntax_errors_point_at_their_line_and_column() {
        assert_eq!(
            error_position(
                "SELECT 1\nFROM t WHERE",
                "expected an expression, found: EOF at line 2, column 13"
            ),
            Some(22)
        );
        assert_eq!(
            error_position(
                "SELECT 3 BETWEEN SYMMETRIC 5 AND 1",
                "expected: AND, found: 5 at Line: 1, Column: 28"
            ),
            Some(28)
        );
        assert_eq!(error_position("SELECT 1", "division by zero"), None);
    }
}
