//! Resource quantities (`500m`, `2`, `1Gi`, `1e3`) as the admission rules need them: exact
//! comparison, addition, and the canonical text kube-apiserver prints (`1000m` is `1`, `2048Ki`
//! is `2Mi`, `1500` stays `1500`).

use std::cmp::Ordering;

/// How a quantity was written, which decides how its sums are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// `m`, `k`, `M`, ... or no suffix.
    DecimalSi,
    /// `Ki`, `Mi`, `Gi`, ...
    BinarySi,
    /// `1e3`.
    DecimalExponent,
}

/// A quantity, exact to the nano-unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quantity {
    /// The value in billionths.
    nanos: i128,
    format: Format,
}

const NANOS: i128 = 1_000_000_000;

const BINARY: [(&str, u32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

const DECIMAL: [(&str, i32); 9] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

impl Quantity {
    /// Parses a quantity; `None` when the text is not one.
    pub(crate) fn parse(text: &str) -> Option<Quantity> {
        let s = text.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let (negative, digits) = match number.as_bytes().first() {
            Some(b'-') => (true, &number[1..]),
            Some(b'+') => (false, &number[1..]),
            _ => (false, number),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if (whole.is_empty() && fraction.is_empty())
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !fraction.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        // The number in billionths, rounded up past the ninth decimal as kube-apiserver does.
        let mut nanos: i128 = 0;
        for b in whole.bytes() {
            nanos = nanos.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        nanos = nanos.checked_mul(NANOS)?;
        let mut scale = NANOS / 10;
        let mut rest = false;
        for b in fraction.bytes() {
            if scale == 0 {
                rest |= b != b'0';
                continue;
            }
            nanos += i128::from(b - b'0') * scale;
            scale /= 10;
        }
        let (nanos, format) = if suffix.is_empty() {
            (nanos, Format::DecimalSi)
        } else if let Some((_, shift)) = BINARY.iter().find(|(s, _)| *s == suffix) {
            (nanos.checked_mul(1i128 << shift)?, Format::BinarySi)
        } else if let Some((_, exp)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
            (scaled(nanos, *exp, &mut rest)?, Format::DecimalSi)
        } else if let Some(exp) = suffix.strip_prefix(['e', 'E']) {
            let exp: i32 = exp.parse().ok()?;
            (scaled(nanos, exp, &mut rest)?, Format::DecimalExponent)
        } else {
            return None;
        };
        let nanos = nanos + i128::from(rest);
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    /// Zero, printed as a plain number.
    pub(crate) fn zero() -> Quantity {
        Quantity {
            nanos: 0,
            format: Format::DecimalSi,
        }
    }

    /// The sum, printed the way `self` was written.
    pub(crate) fn add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            format: self.format,
        }
    }

    /// The difference, printed the way `self` was written.
    pub(crate) fn sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos),
            format: self.format,
        }
    }

    /// Whether the quantity is below zero.
    pub(crate) fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// Whether the quantity is zero.
    pub(crate) fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// The quantity rounded up to a whole milli-unit (`RoundUp(-3)`), written as before.
    pub(crate) fn round_up_milli(self) -> Quantity {
        const MILLI: i128 = NANOS / 1000;
        let rest = self.nanos.rem_euclid(MILLI);
        if rest == 0 {
            return self;
        }
        Quantity {
            nanos: self.nanos - rest + MILLI,
            format: self.format,
        }
    }

    /// The value as a float, for ratios.
    pub(crate) fn as_f64(self) -> f64 {
        self.nanos as f64 / NANOS as f64
    }
}

/// `nanos` times ten to `exp`; digits dropped below a nano set `rest`.
fn scaled(nanos: i128, exp: i32, rest: &mut bool) -> Option<i128> {
    if exp >= 0 {
        nanos.checked_mul(10i128.checked_pow(exp.unsigned_abs())?)
    } else {
        let div = 10i128.checked_pow(exp.unsigned_abs())?;
        *rest |= nanos % div != 0;
        Some(nanos / div)
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl std::fmt::Display for Quantity {
    /// The canonical text: the largest suffix that keeps the number whole.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let whole = self.nanos % NANOS == 0;
        if self.format == Format::BinarySi && whole && self.nanos.abs() >= 1024 * NANOS {
            let mut value = self.nanos / NANOS;
            let mut suffix = "";
            for (s, _) in BINARY {
                if value % 1024 != 0 {
                    break;
                }
                value /= 1024;
                suffix = s;
            }
            return write!(f, "{value}{suffix}");
        }
        // Decimal: the largest multiple of three as exponent that leaves a whole mantissa.
        let mut mantissa = self.nanos;
        let mut exp = -9;
        while exp < 18 && mantissa % 1000 == 0 {
            mantissa /= 1000;
            exp += 3;
        }
        if self.format == Format::DecimalExponent {
            return if exp == 0 {
                write!(f, "{mantissa}")
            } else {
                write!(f, "{mantissa}e{exp}")
            };
        }
        let suffix = DECIMAL
            .iter()
            .find(|(_, e)| *e == exp)
            .map(|(s, _)| *s)
            .unwrap_or("");
        write!(f, "{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    fn canonical(s: &str) -> String {
        Quantity::parse(s).unwrap().to_string()
    }

    #[test]
    fn prints_as_kube_apiserver_does() {
        assert_eq!(canonical("1"), "1");
        assert_eq!(canonical("1000m"), "1");
        assert_eq!(canonical("500m"), "500m");
        assert_eq!(canonical("0.5"), "500m");
        assert_eq!(canonical("1500"), "1500");
        assert_eq!(canonical("2000"), "2k");
        assert_eq!(canonical("2048Ki"), "2Mi");
        assert_eq!(canonical("1536Mi"), "1536Mi");
        assert_eq!(canonical("512Ki"), "512Ki");
        assert_eq!(canonical("1e3"), "1e3");
        assert_eq!(canonical("0"), "0");
        assert!(Quantity::parse("x").is_none());
        assert!(Quantity::parse("1Q").is_none());
    }

    #[test]
    fn rounds_up_to_milli_units() {
        let up = |s: &str| Quantity::parse(s).unwrap().round_up_milli().to_string();
        assert_eq!(up("0.0001"), "1m");
        assert_eq!(up("1.0001"), "1001m");
        assert_eq!(up("100u"), "1m");
        assert_eq!(up("2"), "2");
        assert_eq!(up("1Gi"), "1Gi");
    }

    #[test]
    fn sums_keep_the_first_format() {
        let sum = |a: &str, b: &str| {
            Quantity::parse(a)
                .unwrap()
                .add(Quantity::parse(b).unwrap())
                .to_string()
        };
        assert_eq!(sum("1", "1"), "2");
        assert_eq!(sum("500m", "500m"), "1");
        assert_eq!(sum("1Gi", "512Mi"), "1536Mi");
        assert_eq!(sum("250m", "1"), "1250m");
        assert!(Quantity::parse("2").unwrap() > Quantity::parse("1500m").unwrap());
    }
}
