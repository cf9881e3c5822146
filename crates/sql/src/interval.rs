//! Parsing of duration strings such as `'1m'`, `'10s'`, `'1 minute 30 seconds'`
//! or `'00:01:00'`, as used by `COMMIT INTERVAL` and `TICK INTERVAL`.

use std::time::Duration;

/// Parses a duration; `None` if the text is not one.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.contains(':') {
        return parse_clock(text);
    }
    let mut total_ms: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = rest[..unit_len].to_ascii_lowercase();
        rest = &rest[unit_len..];
        let unit_ms: f64 = match unit.as_str() {
            "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 1.0,
            // A bare number is seconds, as Postgres reads `'10'::interval`.
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
            "d" | "day" | "days" => 86_400_000.0,
            _ => return None,
        };
        let ms = number * unit_ms;
        if !ms.is_finite() || !(0.0..=1e15).contains(&ms) {
            return None;
        }
        total_ms += ms.round() as u128;
        rest = rest.trim_start();
    }
    Some(Duration::from_millis(u64::try_from(total_ms).ok()?))
}

fn parse_clock(text: &str) -> Option<Duration> {
    let parts: Vec<&str> = text.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m, s] => (
            h.parse::<u64>().ok()?,
            m.parse::<u64>().ok()?,
            s.parse::<f64>().ok()?,
        ),
        [h, m] => (h.parse::<u64>().ok()?, m.parse::<u64>().ok()?, 0.0),
        _ => return None,
    };
    if !(0.0..60.0).contains(&seconds) || minutes >= 60 || hours > 1_000_000 {
        return None;
    }
    let ms = (hours * 3_600 + minutes * 60) * 1_000 + (seconds * 1_000.0).round() as u64;
    Some(Duration::from_millis(ms))
}

/// Formats a duration as the shortest of Materialize's unit strings that
/// represents it exactly: `1m`, `90s`, `1500ms`.
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_materialize_style_intervals() {
        let cases = [
            ("1m", 60_000),
            ("10s", 10_000),
            ("1s", 1_000),
            ("500ms", 500),
            ("1 minute", 60_000),
            ("1m 30s", 90_000),
            ("2 hours", 7_200_000),
            ("00:01:00", 60_000),
            ("1.5s", 1_500),
            ("5", 5_000),
        ];
        for (text, ms) in cases {
            assert_eq!(
                parse_duration(text),
                Some(Duration::from_millis(ms)),
                "{text}"
            );
        }
        for bad in ["", "abc", "1 fortnight", "-1s", "1e400s", "::", "1:99"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_the_shortest_exact_unit() {
        assert_eq!(format_duration(Duration::from_secs(60)), "1m");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }
}
