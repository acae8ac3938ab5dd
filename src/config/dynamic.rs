//! Pulsar's dynamic configuration (`/admin/configuration`): a JSON object of key → string applied on top of
//! the file settings, key by key.

use super::Settings;

impl Settings {
    /// Applies the dynamic configuration `node` on top of these settings, key by key, returning a warning
    /// for every key that was skipped.
    ///
    /// Dynamic keys loadmgr knows are applied; a key whose value is not a JSON string, or whose text does
    /// not parse or validate for that setting, is skipped with a warning naming the key and the value, and
    /// the other keys still apply. A key that loadmgr knows but that is not dynamic is skipped with a
    /// warning; keys loadmgr does not know are ignored (the map also holds broker keys that are not about
    /// load balancing). A `node` that is not a JSON object is an error and leaves the settings unchanged.
    pub fn apply_dynamic_config(
        &mut self,
        node: &serde_json::Value,
    ) -> Result<Vec<String>, String> {
        let map = node
            .as_object()
            .ok_or_else(|| format!("not a JSON object of key → string (got {node}); ignored"))?;
        let mut warnings = Vec::new();
        for (key, value) in map {
            match Settings::is_dynamic(key) {
                Some(true) => {}
                Some(false) => {
                    warnings.push(format!(
                        "{key} is not a dynamic setting; change broker.conf and restart"
                    ));
                    continue;
                }
                None => continue,
            }
            let Some(text) = value.as_str() else {
                warnings.push(format!(
                    "{key}: value {value} is not a JSON string; {key} ignored"
                ));
                continue;
            };
            if let Err(e) = self.set_dynamic(key, text) {
                warnings.push(format!("{e}; {key} ignored"));
            }
        }
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn one_bad_key_does_not_reject_the_others() {
        let mut s = Settings::default();
        let warnings = s
            .apply_dynamic_config(&json!({
                "loadBalancerSheddingEnabled": "false",
                "loadBalancerBrokerOverloadedThresholdPercentage": 70,
                "maxUnloadPercentage": "7",
                "loadBalancerAvgShedderLowThreshold": "20",
                "loadBalancerEnabled": "false",
                "managedLedgerMaxEntriesPerLedger": 5,
            }))
            .unwrap();
        assert!(!s.load_balancer_shedding_enabled);
        assert_eq!(s.load_balancer_avg_shedder_low_threshold, 20);
        assert_eq!(s.load_balancer_broker_overloaded_threshold_percentage, 85);
        assert_eq!(s.max_unload_percentage, 0.5);
        assert!(s.load_balancer_enabled);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains(
            "loadBalancerBrokerOverloadedThresholdPercentage: value 70 is not a JSON string"
        )));
        assert!(warnings
            .iter()
            .any(|w| w.contains("invalid value '7.0' for maxUnloadPercentage")));
        assert!(warnings
            .iter()
            .any(|w| w.contains("loadBalancerEnabled is not a dynamic setting")));
    }

    #[test]
    fn a_node_that_is_not_an_object_changes_nothing() {
        let mut s = Settings::default();
        let e = s
            .apply_dynamic_config(&json!(["loadBalancerSheddingEnabled", "false"]))
            .unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        assert_eq!(s, Settings::default());
    }
}
