//! Names from outside (command lines, store paths, request nodes, snapshots): `bundle::parse_hash`
//! (Java's `Long.decode`), `BundleRange::parse`, `BundleName::parse`, `NamespaceName::parse`,
//! `TopicName::parse` and the split algorithm names.
//!
//! Invariants: a parsed hash is at most 0xffffffff and prints (`format_hash`) to text that parses back to it;
//! a parsed range has lower < upper <= 0xffffffff, contains its lower end and not (unless closed) its upper
//! one; every name's `Display` parses back equal; a topic's full name parses to the same topic, and its hash
//! falls in exactly one bundle of a namespace's initial bundles.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::bundle::{
    format_hash, parse_hash, topic_hash, BundleName, BundleRange, NamespaceBundles, NamespaceName,
    SplitAlgorithm, TopicName,
};
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    if let Ok(h) = parse_hash(text) {
        assert!(h <= 0xffff_ffff, "{text} parsed to {h:#x}");
        assert_eq!(parse_hash(&format_hash(h)).ok(), Some(h), "{text}");
    }
    if let Ok(r) = BundleRange::parse(text) {
        assert!(
            r.lower() < r.upper() && r.upper() <= 0xffff_ffff,
            "{text}: {r:?}"
        );
        assert!(r.contains(r.lower()));
        assert_eq!(r.contains(r.upper()), r.upper_closed());
        assert_eq!(BundleRange::parse(&r.to_string()).ok(), Some(r), "{text}");
        assert_eq!(BundleRange::new(r.lower(), r.upper()).ok(), Some(r));
    }
    if let Ok(b) = BundleName::parse(text) {
        assert_eq!(
            BundleName::parse(&b.to_string()).ok(),
            Some(b.clone()),
            "{text}"
        );
    }
    if let Ok(n) = NamespaceName::parse(text) {
        assert_eq!(
            NamespaceName::parse(&n.to_string()).ok(),
            Some(n.clone()),
            "{text}"
        );
    }
    if let Ok(t) = TopicName::parse(text) {
        let again = TopicName::parse(t.full_name())
            .unwrap_or_else(|e| panic!("{text}: full name {} does not parse: {e}", t.full_name()));
        assert_eq!(again, t, "{text}");
        assert_eq!(t.to_string(), t.full_name());
        let bundles = NamespaceBundles::initial(7).expect("7 bundles");
        let hash = topic_hash(&t);
        let holding = bundles.ranges().filter(|r| r.contains(hash)).count();
        assert_eq!(holding, 1, "{text}: hash {hash:#x} is in {holding} bundles");
        assert!(bundles.find_topic(&t).contains(hash));
    }
    if let Ok(a) = text.parse::<SplitAlgorithm>() {
        assert_eq!(a.name().parse::<SplitAlgorithm>().ok(), Some(a));
    }
    let _ = SplitAlgorithm::parse_default(text);
});
