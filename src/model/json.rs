//! JSON reading and writing with Pulsar's (Jackson's) conventions.
//!
//! Pulsar stores every metadata node as compact JSON written by Jackson (`ObjectMapperFactory`): no whitespace,
//! `null` members left out, unknown keys ignored on read, and `double` values printed the way Java's
//! `Double.toString` prints them. serde_json prints `10240000.0` where Java prints `1.024E7`; [`to_json_string`]
//! closes that gap with a custom [`serde_json::ser::Formatter`], so a node written by loadmgr reads, in
//! `zkCli.sh get`, exactly like one written by a Java broker.
//!
//! Non-finite doubles: Jackson writes them as the quoted strings `"NaN"`, `"Infinity"` and `"-Infinity"`
//! (`WRITE_NAN_AS_STRINGS` is on by default) and reads them back. Fields that can carry such values use
//! [`java_double`] with `#[serde(with = ...)]`.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// Formats a double exactly as `java.lang.Double.toString` does (JDK 19 and later, which print the shortest
/// decimal that reads back to the same double; earlier JDKs occasionally printed one digit more).
///
/// * magnitude in `[1e-3, 1e7)`: plain decimal with at least one fractional digit (`100.0`, `0.001`, `52428.8`);
/// * otherwise computerized scientific notation with a one-digit integer part and at least one fractional
///   digit (`1.024E7`, `1.0E-4`, `4.9E-324`);
/// * zero as `0.0` / `-0.0`; non-finite values as `NaN`, `Infinity`, `-Infinity` (unquoted; quoting is the
///   JSON writer's business).
pub fn format_java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let magnitude = value.abs();
    if (1e-3..1e7).contains(&magnitude) {
        // Rust's Display prints the shortest round-tripping digits in plain notation for this range.
        let mut text = value.to_string();
        if !text.contains('.') {
            text.push_str(".0");
        }
        text
    } else {
        // `{:e}` prints the shortest round-tripping digits as `d.ddde±x` (no `.` when there is one digit).
        let mut text = format!("{value:e}");
        if !text.split_once('e').expect("exponent").0.contains('.') {
            // Java prints at least two significant digits and, given two, picks the two-digit decimal
            // closest to the exact value: 4.9E-324 for the smallest subnormal, where the shortest
            // round-tripping single digit would be 5.
            text = format!("{value:.1e}");
        }
        let (mantissa, exponent) = text
            .split_once('e')
            .expect("LowerExp output always has an exponent");
        let mut out = String::with_capacity(text.len() + 3);
        out.push_str(mantissa);
        out.push('E');
        out.push_str(exponent);
        out
    }
}

/// A serde_json formatter that writes floating-point numbers with [`format_java_double`] and everything else
/// compactly, as Jackson's default pretty-printer-less writer does.
#[derive(Debug, Clone, Copy, Default)]
pub struct JavaFormatter;

impl Formatter for JavaFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(format_java_double(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        // Java's Float.toString follows the same layout rules with float precision.
        let text = format_java_double(value as f64);
        let shortest = if value.is_finite() && value != 0.0 {
            reformat_float(value)
        } else {
            text
        };
        writer.write_all(shortest.as_bytes())
    }
}

/// `Float.toString` layout with the shortest digits that round-trip through `f32`.
fn reformat_float(value: f32) -> String {
    let magnitude = value.abs();
    if (1e-3..1e7).contains(&magnitude) {
        let mut text = value.to_string();
        if !text.contains('.') {
            text.push_str(".0");
        }
        text
    } else {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').expect("exponent");
        let dot = if mantissa.contains('.') { "" } else { ".0" };
        format!("{mantissa}{dot}E{exponent}")
    }
}

/// Serialises `value` as compact JSON with Java double formatting. This is the form loadmgr stores.
pub fn to_json_string<T: Serialize + ?Sized>(value: &T) -> String {
    String::from_utf8(to_json_vec(value)).expect("serde_json writes UTF-8")
}

/// Serialises `value` as compact JSON bytes with Java double formatting.
pub fn to_json_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, JavaFormatter);
    value
        .serialize(&mut serializer)
        .expect("model types always serialise (string keys, no failing Serialize impls)");
    out
}

/// Pretty-printed JSON (two-space indent) with Java double formatting, for humans (`loadmgr store get`).
pub fn to_json_pretty<T: Serialize + ?Sized>(value: &T) -> String {
    // Serialise compactly with Java numbers, then re-indent the token stream; re-parsing through
    // serde_json::Value would lose the Java number spelling.
    reindent(&to_json_string(value))
}

/// Re-indents compact JSON text without touching its tokens.
pub fn reindent(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&close) {
                    out.push(chars.next().expect("peeked"));
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// `#[serde(with = "java_double")]` for `f64` fields: writes non-finite values as Jackson does (quoted
/// `"NaN"`, `"Infinity"`, `"-Infinity"`) and reads numbers as well as those strings.
pub mod java_double {
    use serde::{de, Deserializer, Serializer};
    use std::fmt;

    /// Writes `value` as a JSON number, or as Jackson's quoted spelling when it is not finite.
    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            serializer.serialize_f64(*value)
        } else {
            serializer.serialize_str(&super::format_java_double(*value))
        }
    }

    /// Reads a JSON number (integer or fractional) or one of Jackson's non-finite strings.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        deserializer.deserialize_any(DoubleVisitor)
    }

    struct DoubleVisitor;

    impl de::Visitor<'_> for DoubleVisitor {
        type Value = f64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number, or one of \"NaN\", \"Infinity\", \"-Infinity\"")
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            match v {
                "NaN" => Ok(f64::NAN),
                "Infinity" | "+Infinity" => Ok(f64::INFINITY),
                "-Infinity" => Ok(f64::NEG_INFINITY),
                other => other
                    .parse::<f64>()
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(other), &self)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_java() {
        let cases: &[(f64, &str)] = &[
            (100.0, "100.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.024e7, "1.024E7"),
            (1e7, "1.0E7"),
            (9_999_999.0, "9999999.0"),
            (1e-4, "1.0E-4"),
            (0.001, "0.001"),
            (0.000_999, "9.99E-4"),
            (52428.8, "52428.8"),
            (1.048576e7, "1.048576E7"),
            (0.09375, "0.09375"),
            (-12.5, "-12.5"),
            (1.0e21, "1.0E21"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (5e-324, "4.9E-324"),
            (1e-323, "9.9E-324"),
            (1e23, "1.0E23"),
            (2e-3, "0.002"),
            (3e-5, "3.0E-5"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(format_java_double(*value), *expected, "formatting {value:?}");
        }
    }

    #[test]
    fn writer_uses_java_numbers_and_compact_layout() {
        #[derive(Serialize)]
        struct Sample {
            a: f64,
            b: i64,
            c: Vec<f64>,
            d: Option<String>,
        }
        let text = to_json_string(&Sample {
            a: 1.024e7,
            b: 3,
            c: vec![1.0, 1e-4],
            d: None,
        });
        assert_eq!(text, r#"{"a":1.024E7,"b":3,"c":[1.0,1.0E-4],"d":null}"#);
        // serde_json reads Java's spelling back to the same value.
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["a"].as_f64(), Some(1.024e7));
    }

    #[test]
    fn non_finite_doubles_round_trip_as_jackson_strings() {
        #[derive(Serialize, serde::Deserialize, Debug)]
        struct Holder {
            #[serde(with = "java_double")]
            v: f64,
        }
        let text = to_json_string(&Holder { v: f64::INFINITY });
        assert_eq!(text, r#"{"v":"Infinity"}"#);
        let back: Holder = serde_json::from_str(&text).unwrap();
        assert_eq!(back.v, f64::INFINITY);
        let nan: Holder = serde_json::from_str(r#"{"v":"NaN"}"#).unwrap();
        assert!(nan.v.is_nan());
        let int: Holder = serde_json::from_str(r#"{"v":5}"#).unwrap();
        assert_eq!(int.v, 5.0);
        let err = serde_json::from_str::<Holder>(r#"{"v":"lots"}"#).unwrap_err();
        assert!(err.to_string().contains("lots"), "{err}");
    }

    #[test]
    fn reindent_keeps_tokens() {
        let pretty = reindent(r#"{"a":[1.0E7,{}],"b":"x,{y}","c":[]}"#);
        assert_eq!(
            pretty,
            "{\n  \"a\": [\n    1.0E7,\n    {}\n  ],\n  \"b\": \"x,{y}\",\n  \"c\": []\n}"
        );
    }
}
