//! The windowed traffic nodes the leader reads and writes: `BundleData` (`/loadbalance/bundle-data/...`),
//! `TimeAverageBrokerData` (`/loadbalance/broker-time-average/<id>`), a `TimeAverageMessageData` window, and
//! `ResourceQuota` (`/loadbalance/resource-quota/...`). Every type is tried on every input (one input is often
//! valid for several, as every key is optional), each read as the store readers read it
//! (`serde_json::from_slice`), and each must round-trip through loadmgr's writer. A window read from outside
//! then takes one sample (`update`), which must not panic whatever `maxSamples`/`numSamples` hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::model::{
    BundleData, NamespaceBundleStats, ResourceQuota, TimeAverageBrokerData, TimeAverageMessageData,
};
use loadmgr_fuzz::read_and_round_trip;

fuzz_target!(|data: &[u8]| {
    if let Some(mut b) = read_and_round_trip::<BundleData>("BundleData", data) {
        b.update(&NamespaceBundleStats::pulsar_default());
        let mut t = TimeAverageBrokerData::default();
        t.add(&b);
    }
    if let Some(mut w) =
        read_and_round_trip::<TimeAverageMessageData>("TimeAverageMessageData", data)
    {
        w.update(1.0, 2.0, 3.0, 4.0);
    }
    let _ = read_and_round_trip::<TimeAverageBrokerData>("TimeAverageBrokerData", data);
    if let Some(q) = read_and_round_trip::<ResourceQuota>("ResourceQuota", data) {
        let _ = BundleData::from_quota(&q);
    }
});
