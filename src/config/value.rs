//! How each setting type is read from and written to `broker.conf` text.

use std::collections::BTreeSet;

use crate::bundle::SplitAlgorithm;
use crate::model::json::format_java_double;

use super::strategy::{LoadManagerKind, PlacementKind, ShedderKind};

/// A type that a `broker.conf` value can hold.
pub trait SettingValue: Sized {
    /// Parses a trimmed, non-empty value; the error says what was expected.
    fn parse_setting(text: &str) -> Result<Self, String>;
    /// The value as `config check` prints it (Java's spelling for numbers).
    fn render_setting(&self) -> String;
}

impl SettingValue for bool {
    fn parse_setting(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("true or false".into()),
        }
    }

    fn render_setting(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for i32 {
    fn parse_setting(text: &str) -> Result<Self, String> {
        text.parse()
            .map_err(|_| "a whole number between -2147483648 and 2147483647".into())
    }

    fn render_setting(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for i64 {
    fn parse_setting(text: &str) -> Result<Self, String> {
        text.parse().map_err(|_| "a whole number (64-bit)".into())
    }

    fn render_setting(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for f64 {
    fn parse_setting(text: &str) -> Result<Self, String> {
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err("a finite decimal number".into()),
        }
    }

    fn render_setting(&self) -> String {
        format_java_double(*self)
    }
}

impl SettingValue for String {
    fn parse_setting(text: &str) -> Result<Self, String> {
        Ok(text.to_owned())
    }

    fn render_setting(&self) -> String {
        self.clone()
    }
}

impl<T: SettingValue> SettingValue for Option<T> {
    fn parse_setting(text: &str) -> Result<Self, String> {
        T::parse_setting(text).map(Some)
    }

    fn render_setting(&self) -> String {
        self.as_ref().map(T::render_setting).unwrap_or_default()
    }
}

/// Comma-separated set (`a,b,c`); blanks are dropped.
impl SettingValue for BTreeSet<String> {
    fn parse_setting(text: &str) -> Result<Self, String> {
        Ok(text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    }

    fn render_setting(&self) -> String {
        self.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

/// Comma-separated list (`a,b,c`), order kept; blanks are dropped.
impl SettingValue for Vec<String> {
    fn parse_setting(text: &str) -> Result<Self, String> {
        Ok(text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    }

    fn render_setting(&self) -> String {
        self.join(",")
    }
}

impl SettingValue for SplitAlgorithm {
    /// For `defaultNamespaceBundleSplitAlgorithm`: `specified_positions_divide` is refused.
    fn parse_setting(text: &str) -> Result<Self, String> {
        SplitAlgorithm::parse_default(text).map_err(|_| {
            "one of range_equally_divide, topic_count_equally_divide, flow_or_qps_equally_divide \
             (specified_positions_divide is admin-API only)"
                .into()
        })
    }

    fn render_setting(&self) -> String {
        self.name().to_owned()
    }
}

impl SettingValue for ShedderKind {
    fn parse_setting(text: &str) -> Result<Self, String> {
        ShedderKind::from_class_name(text).ok_or_else(|| ShedderKind::expected())
    }

    fn render_setting(&self) -> String {
        self.class_name().to_owned()
    }
}

impl SettingValue for PlacementKind {
    fn parse_setting(text: &str) -> Result<Self, String> {
        PlacementKind::from_class_name(text).ok_or_else(|| PlacementKind::expected())
    }

    fn render_setting(&self) -> String {
        self.class_name().to_owned()
    }
}

impl SettingValue for LoadManagerKind {
    fn parse_setting(text: &str) -> Result<Self, String> {
        LoadManagerKind::from_class_name(text).ok_or_else(|| LoadManagerKind::expected())
    }

    fn render_setting(&self) -> String {
        self.class_name().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_values() {
        assert_eq!(bool::parse_setting("TRUE"), Ok(true));
        assert!(bool::parse_setting("yes").unwrap_err().contains("true or false"));
        assert_eq!(i32::parse_setting("-5"), Ok(-5));
        assert!(i32::parse_setting("3000000000").is_err());
        assert!(i32::parse_setting("1.5").is_err());
        assert_eq!(f64::parse_setting("0.9"), Ok(0.9));
        assert!(f64::parse_setting("NaN").is_err());
        assert_eq!(1.0f64.render_setting(), "1.0");
        assert_eq!(1.0e7f64.render_setting(), "1.0E7");
        assert_eq!(None::<i32>.render_setting(), "");
        assert_eq!(Some(8080).render_setting(), "8080");
        let set = BTreeSet::<String>::parse_setting(" b, a ,,").unwrap();
        assert_eq!(set.render_setting(), "a,b");
        assert_eq!(Vec::<String>::parse_setting("z, y").unwrap().render_setting(), "z,y");
        assert!(SplitAlgorithm::parse_setting("specified_positions_divide").unwrap_err().contains("admin-API only"));
    }
}
