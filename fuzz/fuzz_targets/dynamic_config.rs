//! The dynamic configuration node `/admin/configuration`: read as JSON (`get_json::<serde_json::Value>`,
//! as the agent and `explain --store` read it) and applied on top of the defaults with
//! `Settings::apply_dynamic_config`, then on top of settings loaded from a `broker.conf` that changes the
//! strategy pairing. A bad key is a warning; the settings must stay ones that validate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::config::{format_property, Settings};

fuzz_target!(|data: &[u8]| {
    let Ok(node) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let mut s = Settings::default();
    match s.apply_dynamic_config(&node) {
        Ok(_) => {
            // What was applied must load as a broker.conf.
            let written: String = s
                .entries()
                .iter()
                .map(|(k, v)| format_property(k, v) + "\n")
                .collect();
            if let Err(e) = Settings::from_text(&written, "dynamic.conf") {
                panic!("dynamic configuration applied settings that do not load: {e}\n{written}");
            }
        }
        Err(_) => assert_eq!(
            s,
            Settings::default(),
            "a rejected node changed the settings"
        ),
    }
    let mut other = Settings::from_text(
        "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\n",
        "base.conf",
    )
    .expect("a valid base")
    .settings;
    let _ = other.apply_dynamic_config(&node);
});
