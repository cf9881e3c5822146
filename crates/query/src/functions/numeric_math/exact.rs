//! Exact decimals of any length (`digits * 10^-scale`) and the fixed-point
//! kernels of square root, logarithm and exponential over them.
//!
//! PostgreSQL computes these in its own numeric type with guard digits and
//! rounds at the result scale it chose; floe computes each with more guard
//! digits than it needs (a kernel's error is a few units of its working scale)
//! and rounds at the same scale, which gives PostgreSQL's digits.

use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};

/// `digits * 10^-scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Exact {
    pub digits: BigInt,
    pub scale: u32,
}

pub fn ten_to(exponent: u32) -> BigInt {
    BigInt::from(10u8).pow(exponent)
}

/// `n / d` rounded half away from zero (`d` nonzero).
pub fn divide_rounded(n: &BigInt, d: &BigInt) -> BigInt {
    let (quotient, remainder) = (n / d, n % d);
    if remainder.abs() * 2u8 >= d.abs() {
        if n.is_negative() != d.is_negative() {
            quotient - 1u8
        } else {
            quotient + 1u8
        }
    } else {
        quotient
    }
}

impl Exact {
    pub fn integer(value: i128) -> Exact {
        Exact {
            digits: BigInt::from(value),
            scale: 0,
        }
    }

    /// A numeric's text as floe prints it (`-12.340`); its scale is its
    /// fraction's length.
    pub fn parse(text: &str) -> Option<Exact> {
        let (negative, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction)
        {
            return None;
        }
        let magnitude: BigInt = format!("0{whole}{fraction}").parse().ok()?;
        Some(Exact {
            digits: if negative { -magnitude } else { magnitude },
            scale: u32::try_from(fraction.len()).ok()?,
        })
    }

    pub fn is_zero(&self) -> bool {
        self.digits.is_zero()
    }

    pub fn is_negative(&self) -> bool {
        self.digits.is_negative()
    }

    /// The digits at `scale`, rounded half away from zero when fewer.
    pub fn at(&self, scale: u32) -> BigInt {
        if scale >= self.scale {
            &self.digits * ten_to(scale - self.scale)
        } else {
            divide_rounded(&self.digits, &ten_to(self.scale - scale))
        }
    }

    /// Its digits at `places` after the point (before it, when negative),
    /// rounded half away from zero or truncated, at scale `places` (0 when
    /// negative).
    pub fn to_places(&self, places: i64, truncate: bool) -> Exact {
        let kept = places.clamp(-1000, 1000);
        let scale = kept.max(0) as u32;
        let dropped = i64::from(self.scale) - kept;
        if dropped <= 0 {
            return self.rounded(scale);
        }
        let unit = ten_to(dropped as u32);
        let units = if truncate {
            &self.digits / &unit
        } else {
            divide_rounded(&self.digits, &unit)
        };
        Exact {
            digits: units * ten_to((scale as i64 - kept) as u32),
            scale,
        }
    }

    /// Its text with all `scale` places (`-0.50`).
    pub fn to_text(&self) -> String {
        let digits = self.digits.abs().to_string();
        let scale = self.scale as usize;
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (whole, fraction) = padded.split_at(padded.len() - scale);
        let sign = if self.digits.is_negative() { "-" } else { "" };
        if scale == 0 {
            format!("{sign}{whole}")
        } else {
            format!("{sign}{whole}.{fraction}")
        }
    }

    pub fn rounded(&self, scale: u32) -> Exact {
        Exact {
            digits: self.at(scale),
            scale,
        }
    }

    /// Whether it has no fraction.
    pub fn is_integral(&self) -> bool {
        (&self.digits % ten_to(self.scale)).is_zero()
    }

    pub fn to_f64(&self) -> f64 {
        let digits = self.digits.to_f64().unwrap_or(f64::NAN);
        digits / 10f64.powi(i32::try_from(self.scale).unwrap_or(i32::MAX))
    }

    /// The power of ten of its leading digit (`floor(log10 |x|)`), nonzero.
    pub fn exponent(&self) -> i64 {
        let length = self.digits.abs().to_string().len() as i64;
        length - 1 - i64::from(self.scale)
    }

    /// Its magnitude's base-10000 digits from `weight` down, as PostgreSQL
    /// stores a numeric: `floor(|x| / 10000^weight)`, and whether any digit
    /// is left below those.
    fn base_digits(&self, weight: i64) -> (BigInt, bool) {
        let shift = i64::from(self.scale) + 4 * weight;
        let magnitude = self.digits.abs();
        let power = ten_to(u32::try_from(shift.unsigned_abs()).unwrap_or(u32::MAX));
        if shift >= 0 {
            let rest = !(&magnitude % &power).is_zero();
            (magnitude / power, rest)
        } else {
            (magnitude * power, false)
        }
    }
}

/// PostgreSQL's `estimate_ln_dweight`: the power of ten of `ln(x)`'s leading
/// digit, estimated as PostgreSQL does (its result scales follow from it).
pub fn ln_weight(x: &Exact) -> i64 {
    if !x.digits.is_positive() {
        return 0;
    }
    // Between 0.9 and 1.1, ln(x) is about x - 1.
    let (value, one) = (x.at(x.scale.max(1)), ten_to(x.scale.max(1)));
    let tenth = &one / 10u8;
    if value >= &one - &tenth && value <= &one + &tenth {
        let difference = Exact {
            digits: &x.digits - ten_to(x.scale),
            scale: x.scale,
        };
        return if difference.is_zero() {
            0
        } else {
            difference.exponent()
        };
    }
    let weight = x.exponent().div_euclid(4);
    let (first, rest) = x.base_digits(weight);
    let (digits, decimal_weight) = if rest {
        let (two, _) = x.base_digits(weight - 1);
        (two, 4 * weight - 4)
    } else {
        (first, 4 * weight)
    };
    let ln = digits.to_f64().unwrap_or(1.0).ln() + decimal_weight as f64 * std::f64::consts::LN_10;
    ln.abs().log10() as i64
}

/// `sqrt(x)` at `scale` (x >= 0), rounded half away from zero.
pub fn sqrt(x: &Exact, scale: u32) -> Exact {
    // floor(sqrt(x * 10^(2 * fine))) is the root at `fine` places, never above it.
    let fine = (scale + 2).max(x.scale.div_ceil(2));
    let radicand = &x.digits * ten_to(2 * fine - x.scale);
    Exact {
        digits: radicand.sqrt(),
        scale: fine,
    }
    .rounded(scale)
}

/// `ln(x)` (x > 0) to within a few units at `scale` places.
pub fn ln(x: &Exact, scale: u32) -> BigInt {
    let working = scale + 12;
    let one = ten_to(working);
    let exponent = x.exponent();
    // x = m * 10^exponent with m in [1, 10).
    let shift = i64::from(working) - i64::from(x.scale) - exponent;
    let power = ten_to(u32::try_from(shift.unsigned_abs()).unwrap_or(u32::MAX));
    let m = if shift >= 0 {
        &x.digits * power
    } else {
        &x.digits / power
    };
    let ln_m = ln_near_one(m, &one);
    let ln_ten = ln_near_one(&one * 10u8, &one);
    (ln_m + ln_ten * exponent) / ten_to(12)
}

/// `ln(m)` of `m` in [1, 10] at the scale of `one`: square roots bring it
/// within 1% of 1, where `2 atanh((m - 1) / (m + 1))` converges fast.
fn ln_near_one(mut m: BigInt, one: &BigInt) -> BigInt {
    let limit = one + one / 100u8;
    let mut halvings = 0u32;
    while m > limit {
        m = (m * one).sqrt();
        halvings += 1;
    }
    let z = (&m - one) * one / (&m + one);
    let z_squared = &z * &z / one;
    let (mut power, mut sum, mut k) = (z.clone(), z, 1u32);
    loop {
        power = power * &z_squared / one;
        k += 2;
        let term = &power / k;
        if term.is_zero() {
            break;
        }
        sum += term;
    }
    sum * 2u8 * (BigInt::one() << halvings)
}

/// `exp(x)` of `x` at the scale of `one`, to within a few units of its
/// leading digits' precision: halvings bring it below 0.01, where Taylor's
/// series converges fast, and squarings undo them.
pub fn exp(x: &BigInt, one: &BigInt) -> BigInt {
    let small = one / 100u8;
    let mut halvings = 0u32;
    let mut r = x.clone();
    while r.abs() > small {
        r /= 2u8;
        halvings += 1;
    }
    let (mut term, mut sum, mut k) = (one.clone(), one.clone(), 1u32);
    loop {
        term = term * &r / one / k;
        if term.is_zero() {
            break;
        }
        sum += &term;
        k += 1;
    }
    for _ in 0..halvings {
        sum = &sum * &sum / one;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(text: &str) -> Exact {
        Exact::parse(text).unwrap()
    }

    #[test]
    fn parses_and_rounds() {
        assert_eq!(exact("-12.340").scale, 3);
        assert_eq!(exact("2.5").rounded(0).digits, BigInt::from(3));
        assert_eq!(exact("-2.5").rounded(0).digits, BigInt::from(-3));
        assert!(Exact::parse("1e5").is_none());
        assert!(Exact::parse("NaN").is_none());
        assert_eq!(exact("2.5").to_places(3, false).to_text(), "2.500");
        assert_eq!(exact("-2.567").to_places(2, true).to_text(), "-2.56");
        assert_eq!(exact("1250").to_places(-2, false).to_text(), "1300");
        assert_eq!(exact("1250").to_places(-2, true).to_text(), "1200");
        assert_eq!(exact("0.5").to_places(0, false).to_text(), "1");
    }

    #[test]
    fn ln_weights_are_postgres_estimates() {
        assert_eq!(ln_weight(&exact("2")), 0);
        assert_eq!(ln_weight(&exact("1")), 0);
        assert_eq!(ln_weight(&exact("1.0000001")), -7);
        assert_eq!(ln_weight(&exact("100000")), 1);
    }

    #[test]
    fn kernels_have_the_digits() {
        assert_eq!(sqrt(&exact("2"), 15), exact("1.414213562373095"));
        let ln10 = ln(&exact("10"), 16);
        assert_eq!(
            Exact {
                digits: ln10,
                scale: 16
            }
            .rounded(14),
            exact("2.30258509299405")
        );
        let one = ten_to(30);
        let e = exp(&one, &one);
        assert_eq!(
            Exact {
                digits: e,
                scale: 30
            }
            .rounded(16),
            exact("2.7182818284590452")
        );
    }
}
