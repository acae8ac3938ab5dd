//! The nodes loadmgr adds under `/loadmgr` (`model::records`): `BundleAssignment`
//! (`/loadmgr/assignments/<bundle>`), `AdminRequest` with its `RequestOp` and `RequestResponse`
//! (`/loadmgr/requests/request-<seq>`), a lookup's `LookupAnswer`, and `LeaderStatus`
//! (`/loadmgr/leader-status`). Each is read as the runtime reads it (`serde_json::from_slice`, as
//! `get_json`) and must round-trip through loadmgr's writer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::model::records::{
    AdminRequest, BundleAssignment, LeaderStatus, LookupAnswer, RequestResponse,
};
use loadmgr_fuzz::read_and_round_trip;

fuzz_target!(|data: &[u8]| {
    let _ = read_and_round_trip::<BundleAssignment>("BundleAssignment", data);
    if let Some(r) = read_and_round_trip::<AdminRequest>("AdminRequest", data) {
        let _ = r.op.describe();
    }
    let _ = read_and_round_trip::<RequestResponse>("RequestResponse", data);
    let _ = read_and_round_trip::<LookupAnswer>("LookupAnswer", data);
    let _ = read_and_round_trip::<LeaderStatus>("LeaderStatus", data);
});
