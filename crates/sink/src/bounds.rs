//! Column bounds of strings and binaries truncated as Iceberg's default metrics mode,
//! `truncate(16)`: a lower bound is the value's first 16 characters (bytes for binary), an
//! upper bound those with the last one incremented, so that it is still above every value
//! with that prefix. Why: a bound is a copy of a value in every manifest that lists the
//! file, and long strings (JSON documents, say) would make manifests, and every commit that
//! rewrites them, as large as the data. A value that cannot be bounded from above in 16
//! characters (all of them the largest code point) has no upper bound, as Iceberg writes it.

use std::collections::HashMap;

use iceberg::spec::{DataFile, Datum, PrimitiveLiteral};

/// Characters (bytes for binary) a bound keeps.
pub const TRUNCATE_LENGTH: usize = 16;

/// The bounds of `file` truncated, or `None` when none needed it.
#[allow(clippy::type_complexity)]
pub fn truncated_bounds(file: &DataFile) -> Option<(HashMap<i32, Datum>, HashMap<i32, Datum>)> {
    let long = |bounds: &HashMap<i32, Datum>| {
        bounds.values().any(|datum| match datum.literal() {
            PrimitiveLiteral::String(s) => s.chars().nth(TRUNCATE_LENGTH).is_some(),
            PrimitiveLiteral::Binary(b) => b.len() > TRUNCATE_LENGTH,
            _ => false,
        })
    };
    if !long(file.lower_bounds()) && !long(file.upper_bounds()) {
        return None;
    }
    let lower = file
        .lower_bounds()
        .iter()
        .map(|(id, datum)| (*id, truncate_lower(datum)))
        .collect();
    let upper = file
        .upper_bounds()
        .iter()
        .filter_map(|(id, datum)| truncate_upper(datum).map(|d| (*id, d)))
        .collect();
    Some((lower, upper))
}

fn truncate_lower(datum: &Datum) -> Datum {
    match datum.literal() {
        PrimitiveLiteral::String(s) if s.chars().nth(TRUNCATE_LENGTH).is_some() => {
            Datum::string(s.chars().take(TRUNCATE_LENGTH).collect::<String>())
        }
        PrimitiveLiteral::Binary(b) if b.len() > TRUNCATE_LENGTH => {
            Datum::binary(b[..TRUNCATE_LENGTH].to_vec())
        }
        _ => datum.clone(),
    }
}

/// `None`: no upper bound fits in [`TRUNCATE_LENGTH`].
fn truncate_upper(datum: &Datum) -> Option<Datum> {
    match datum.literal() {
        PrimitiveLiteral::String(s) if s.chars().nth(TRUNCATE_LENGTH).is_some() => {
            let mut chars: Vec<char> = s.chars().take(TRUNCATE_LENGTH).collect();
            while let Some(last) = chars.pop() {
                if let Some(next) = next_char(last) {
                    chars.push(next);
                    return Some(Datum::string(chars.into_iter().collect::<String>()));
                }
            }
            None
        }
        PrimitiveLiteral::Binary(b) if b.len() > TRUNCATE_LENGTH => {
            let mut bytes = b[..TRUNCATE_LENGTH].to_vec();
            while let Some(last) = bytes.pop() {
                if last < u8::MAX {
                    bytes.push(last + 1);
                    return Some(Datum::binary(bytes));
                }
            }
            None
        }
        _ => Some(datum.clone()),
    }
}

/// The next Unicode scalar value (skipping the surrogates), if any.
fn next_char(c: char) -> Option<char> {
    let next = u32::from(c) + 1;
    char::from_u32(next).or_else(|| char::from_u32(0xE000).filter(|_| next <= 0xE000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(d: &Option<Datum>) -> String {
        match d.as_ref().map(|d| d.literal()) {
            Some(PrimitiveLiteral::String(s)) => s.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn strings_keep_sixteen_characters_and_round_the_upper_bound_up() {
        let long = Datum::string("abcdefghijklmnopqrstuvwxyz");
        assert_eq!(string(&Some(truncate_lower(&long))), "abcdefghijklmnop");
        assert_eq!(string(&truncate_upper(&long)), "abcdefghijklmnoq");
        // Characters, not bytes: 17 two-byte characters keep 16 of them.
        let greek = Datum::string("αβγδεζηθικλμνξοπρ");
        assert_eq!(string(&Some(truncate_lower(&greek))), "αβγδεζηθικλμνξοπ");
        assert_eq!(string(&truncate_upper(&greek)), "αβγδεζηθικλμνξορ");
        // The largest code point cannot grow: the one before it does.
        let top = format!("{}{}", "a".repeat(15), char::MAX).repeat(2);
        assert_eq!(
            string(&truncate_upper(&Datum::string(top))),
            format!("{}b", "a".repeat(14))
        );
        let all_top = char::MAX.to_string().repeat(20);
        assert!(truncate_upper(&Datum::string(all_top)).is_none());
        // Just before the surrogates, the next character is after them.
        let before = format!("{}\u{D7FF}xyz", "a".repeat(15));
        assert_eq!(
            string(&truncate_upper(&Datum::string(before))),
            format!("{}\u{E000}", "a".repeat(15))
        );
        // Short values stay as they are.
        let short = Datum::string("short");
        assert_eq!(truncate_upper(&short), Some(short.clone()));
        assert_eq!(truncate_lower(&short), short);
    }

    #[test]
    fn binaries_keep_sixteen_bytes() {
        let mut value = vec![7u8; 15];
        value.extend([0xFF, 0xFF, 1]);
        let datum = Datum::binary(value);
        assert_eq!(
            truncate_lower(&datum),
            Datum::binary(vec![7u8; 15].into_iter().chain([0xFF]))
        );
        // 0xFF cannot grow: the byte before it does.
        let mut upper = vec![7u8; 14];
        upper.push(8);
        assert_eq!(truncate_upper(&datum), Some(Datum::binary(upper)));
        assert!(truncate_upper(&Datum::binary(vec![0xFF; 20])).is_none());
    }
}
