//! Store URLs (`--store`, `metadataStoreUrl`): `store::StoreUrl::parse`. What parses prints (`Display`) to a
//! URL that parses back to the same store.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::store::StoreUrl;
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    if let Ok(url) = StoreUrl::parse(text) {
        let shown = url.to_string();
        match StoreUrl::parse(&shown) {
            Ok(again) => assert_eq!(again, url, "{text:?} shows as {shown:?}"),
            Err(e) => panic!("{text:?} shows as {shown:?}, which does not parse: {e}"),
        }
    }
});
