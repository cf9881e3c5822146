//! Character types, `bytea` and `uuid`.

use super::*;

/// `varchar(n)` on assignment: a longer value is an error unless the excess
/// is spaces, which are cut (as Postgres does).
pub fn check_varchar(text: &str, max_length: Option<u32>) -> Result<String, ValueError> {
    let Some(n) = max_length else {
        return Ok(text.to_string());
    };
    let n = n as usize;
    match text.char_indices().nth(n) {
        None => Ok(text.to_string()),
        Some((at, _)) if text[at..].chars().all(|c| c == ' ') => Ok(text[..at].to_string()),
        Some(_) => Err(ValueError::new(
            SqlState::STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type character varying({n})"),
        )),
    }
}

/// `bytea` input: `\x` hex or the escape format.
pub fn parse_bytea(text: &str) -> Result<Vec<u8>, ValueError> {
    if let Some(hex) = text
        .strip_prefix("\\x")
        .or_else(|| text.strip_prefix("\\X"))
    {
        let mut out = Vec::with_capacity(hex.len() / 2);
        let mut chars = hex.chars().filter(|c| !c.is_ascii_whitespace());
        let digit = |c: char| {
            c.to_digit(16).map(|d| d as u8).ok_or_else(|| {
                ValueError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("invalid hexadecimal digit: \"{c}\""),
                )
            })
        };
        while let Some(high) = chars.next() {
            let high = digit(high)?;
            let Some(low) = chars.next() else {
                return Err(ValueError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "invalid hexadecimal data: odd number of digits",
                ));
            };
            out.push(high << 4 | digit(low)?);
        }
        return Ok(out);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
        } else if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if let Some(octal) = bytes.get(i + 1..i + 4)
            && octal[0] <= b'3'
            && octal.iter().all(|b| (b'0'..=b'7').contains(b))
        {
            out.push((octal[0] - b'0') * 64 + (octal[1] - b'0') * 8 + (octal[2] - b'0'));
            i += 4;
        } else {
            return Err(ValueError::syntax("bytea", text));
        }
    }
    Ok(out)
}

pub fn format_bytea(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("\\x");
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
    out
}

/// `uuid` input: 32 hex digits, optionally in braces, with a hyphen allowed
/// after any group of four digits.
pub fn parse_uuid(text: &str) -> Result<[u8; 16], ValueError> {
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(t);
    let mut digits = Vec::with_capacity(32);
    let mut since_hyphen = 0;
    for (i, c) in inner.chars().enumerate() {
        if c == '-' {
            if i == 0 || since_hyphen % 4 != 0 || since_hyphen == 0 {
                return Err(ValueError::syntax("uuid", text));
            }
            since_hyphen = 0;
            continue;
        }
        let d = c
            .to_digit(16)
            .ok_or_else(|| ValueError::syntax("uuid", text))?;
        digits.push(d as u8);
        since_hyphen += 1;
    }
    if digits.len() != 32 || inner.ends_with('-') {
        return Err(ValueError::syntax("uuid", text));
    }
    let mut out = [0u8; 16];
    for (i, pair) in digits.chunks(2).enumerate() {
        out[i] = pair[0] << 4 | pair[1];
    }
    Ok(out)
}

pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex = format_bytea(bytes);
    let hex = &hex[2..];
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
