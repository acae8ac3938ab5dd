//! Tests of the txn planner: exact compares, writes and reads for every kind of op, the txn they become,
//! the splitting of large batches, and the diagnosis of failed txns.

use super::*;
use crate::store::{CreateOptions, Guard};

const V: &[u8] = b"v";

fn put(path: &str, expected_version: Option<i64>, options: CreateOptions) -> Op {
    Op::Put {
        path: path.into(),
        value: V.to_vec(),
        expected_version,
        options,
    }
}

fn guard(path: &str, version: i64, creation_revision: i64) -> Op {
    Op::Check(Guard {
        path: path.into(),
        version,
        creation_revision,
    })
}

fn delete(path: &str, expected_version: Option<i64>) -> Op {
    Op::Delete {
        path: path.into(),
        expected_version,
    }
}

fn created(key: &str, cmp: Cmp, revision: i64, prefix: bool) -> Cond {
    Cond::Created {
        key: key.into(),
        cmp,
        revision,
        prefix,
    }
}

fn version(key: &str, version: i64) -> Cond {
    Cond::Version {
        key: key.into(),
        version,
    }
}

fn create(key: &str, lease: Option<i64>) -> Write {
    Write::Create {
        key: key.into(),
        value: V.to_vec(),
        lease,
    }
}

fn update(key: &str) -> Write {
    Write::Update {
        key: key.into(),
        value: V.to_vec(),
    }
}

fn key(k: &str) -> Read {
    Read::Key(k.into())
}

fn count(prefix: &str, created_since: Option<i64>) -> Read {
    Read::Count {
        prefix: prefix.into(),
        created_since,
    }
}

fn lease_7() -> Result<i64> {
    Ok(7)
}

fn no_lease() -> Result<i64> {
    Err(Error::SessionLost {
        reason: "no lease yet".into(),
    })
}

fn plan(ops: &[Op], known: Option<&HashMap<String, bool>>) -> Plan {
    let refs: Vec<&Op> = ops.iter().collect();
    Plan::build(&refs, known, 42, &lease_7).unwrap()
}

#[test]
fn a_mixed_batch_becomes_exact_compares_writes_and_reads() {
    let ops = vec![
        guard("/lock", 2, 9),
        put("/a", None, CreateOptions::PERSISTENT),
        put("/b", Some(CREATE_ONLY), CreateOptions::EPHEMERAL),
        put("/c", Some(4), CreateOptions::PERSISTENT),
        delete("/d", Some(1)),
        put("/q/n-", None, CreateOptions::SEQUENTIAL),
    ];
    assert_eq!(
        plan(&ops, None),
        Plan {
            compares: vec![
                // The guard: this incarnation at this version (etcd counts versions from 1).
                created("/lock", Cmp::Equal, 9, false),
                version("/lock", 3),
                // The unconditional put of unknown existence has no compare.
                created("/b", Cmp::Equal, 0, false),
                version("/c", 5),
                created("/d", Cmp::Greater, 0, false),
                created("/d/", Cmp::Equal, 0, true),
                version("/d", 2),
                created("/q/n-0000000042", Cmp::Equal, 0, false),
                created("/q/n-", Cmp::Less, 42, true),
            ],
            then: vec![
                update("/a"),
                create("/b", Some(7)),
                update("/c"),
                Write::Delete { key: "/d".into() },
                create("/q/n-0000000042", None),
            ],
            otherwise: vec![
                key("/lock"),
                key("/b"),
                key("/c"),
                key("/d"),
                count("/d/", None),
                key("/q/n-0000000042"),
                count("/q/n-", Some(42)),
            ],
            keys: vec![
                "/lock".into(),
                "/a".into(),
                "/b".into(),
                "/c".into(),
                "/d".into(),
                "/q/n-0000000042".into(),
            ],
            success_index: vec![None, Some(0), Some(1), Some(2), Some(3), Some(4)],
            failure_index: vec![Some(0), None, Some(1), Some(2), Some(3), Some(5)],
            assumed_exists: vec![None; 6],
            created: vec![false, false, true, false, false, true],
        }
    );
}

#[test]
fn unconditional_puts_with_known_existence_get_an_existence_compare() {
    let known: HashMap<String, bool> = [("/a".to_string(), true), ("/e".to_string(), false)]
        .into_iter()
        .collect();
    let ops = vec![
        put("/a", None, CreateOptions::EPHEMERAL),
        put("/e", None, CreateOptions::EPHEMERAL),
        put("/p", None, CreateOptions::PERSISTENT),
    ];
    let p = plan(&ops, Some(&known));
    assert_eq!(
        p.compares,
        vec![
            created("/a", Cmp::Greater, 0, false),
            created("/e", Cmp::Equal, 0, false)
        ]
    );
    // An existing ephemeral is updated in place (its lease kept); a missing one is created on the lease;
    // a key missing from `known` is still sent optimistically.
    assert_eq!(
        p.then,
        vec![update("/a"), create("/e", Some(7)), update("/p")]
    );
    assert_eq!(p.otherwise, vec![key("/a"), key("/e")]);
    assert_eq!(p.failure_index, vec![Some(0), Some(1), None]);
    assert_eq!(p.assumed_exists, vec![Some(true), Some(false), None]);
    assert_eq!(p.created, vec![false, true, false]);
}

#[test]
fn ephemeral_creates_need_the_lease_and_updates_do_not() {
    let create_only = [&put("/e", Some(CREATE_ONLY), CreateOptions::EPHEMERAL)];
    assert_eq!(
        Plan::build(&create_only, None, 42, &no_lease),
        Err(Error::SessionLost {
            reason: "no lease yet".into()
        })
    );
    let sequential = put(
        "/q/n-",
        None,
        CreateOptions {
            ephemeral: true,
            sequential: true,
        },
    );
    assert!(Plan::build(&[&sequential], None, 42, &no_lease).is_err());
    let p = Plan::build(&[&sequential], None, 42, &lease_7).unwrap();
    assert_eq!(p.then, vec![create("/q/n-0000000042", Some(7))]);
    // Updates keep whatever lease the key has.
    let update_ops = [
        &put("/e", None, CreateOptions::EPHEMERAL),
        &put("/e2", Some(3), CreateOptions::EPHEMERAL),
    ];
    let p = Plan::build(&update_ops, None, 42, &no_lease).unwrap();
    assert_eq!(p.then, vec![update("/e"), update("/e2")]);
    // A persistent create never asks for the lease.
    let persistent = [&put("/p", Some(CREATE_ONLY), CreateOptions::PERSISTENT)];
    let p = Plan::build(&persistent, None, 42, &no_lease).unwrap();
    assert_eq!(p.then, vec![create("/p", None)]);
}

#[test]
fn sequential_names_come_from_the_candidate_revision() {
    let seq = put("/q/n-", None, CreateOptions::SEQUENTIAL);
    assert_eq!(path_key(&seq, 42), "/q/n-0000000042");
    assert_eq!(path_key(&seq, 1 << 40), "/q/n-0000001099511627776");
    assert_eq!(
        path_key(&put("/a", None, CreateOptions::PERSISTENT), 42),
        "/a"
    );
    assert_eq!(path_key(&delete("/d", None), 42), "/d");
}

#[test]
fn the_plan_becomes_the_txn_the_builder_would_make() {
    let ops = vec![
        guard("/lock", 2, 9),
        put("/b", Some(CREATE_ONLY), CreateOptions::EPHEMERAL),
        put("/c", Some(4), CreateOptions::PERSISTENT),
        delete("/d", None),
        put("/q/n-", None, CreateOptions::SEQUENTIAL),
    ];
    let expected = Txn::new()
        .when([
            Compare::create_revision("/lock", CompareOp::Equal, 9),
            Compare::version("/lock", CompareOp::Equal, 3),
            Compare::create_revision("/b", CompareOp::Equal, 0),
            Compare::version("/c", CompareOp::Equal, 5),
            Compare::create_revision("/d", CompareOp::Greater, 0),
            Compare::create_revision("/d/", CompareOp::Equal, 0).with_prefix(),
            Compare::create_revision("/q/n-0000000042", CompareOp::Equal, 0),
            Compare::create_revision("/q/n-", CompareOp::Less, 42).with_prefix(),
        ])
        .and_then([
            TxnOp::put("/b", V, Some(PutOptions::new().with_lease(7))),
            TxnOp::put(
                "/c",
                V,
                Some(PutOptions::new().with_ignore_lease().with_prev_key()),
            ),
            TxnOp::delete("/d", None),
            TxnOp::put("/q/n-0000000042", V, None),
        ])
        .or_else([
            TxnOp::get("/lock", Some(GetOptions::new().with_keys_only())),
            TxnOp::get("/b", Some(GetOptions::new().with_keys_only())),
            TxnOp::get("/c", Some(GetOptions::new().with_keys_only())),
            TxnOp::get("/d", Some(GetOptions::new().with_keys_only())),
            TxnOp::get(
                "/d/",
                Some(GetOptions::new().with_prefix().with_count_only()),
            ),
            TxnOp::get("/q/n-0000000042", Some(GetOptions::new().with_keys_only())),
            TxnOp::get(
                "/q/n-",
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_count_only()
                        .with_min_create_revision(42),
                ),
            ),
        ]);
    assert_eq!(
        format!("{:?}", plan(&ops, None).txn()),
        format!("{expected:?}")
    );
}

fn paths(parts: &[Vec<&Op>]) -> Vec<Vec<String>> {
    parts
        .iter()
        .map(|p| p.iter().map(|op| op.path().to_string()).collect())
        .collect()
}

#[test]
fn a_batch_within_the_limits_is_one_txn_in_the_callers_order() {
    let ops = vec![
        put("/a", None, CreateOptions::PERSISTENT),
        guard("/lock", 0, 1),
        delete("/b", None),
    ];
    assert_eq!(paths(&split(&ops)), vec![vec!["/a", "/lock", "/b"]]);
    // Sequential puts on one path write different keys.
    let seq = vec![
        put("/q/n-", None, CreateOptions::SEQUENTIAL),
        put("/q/n-", None, CreateOptions::SEQUENTIAL),
    ];
    assert_eq!(split(&seq).len(), 1);
}

#[test]
fn a_key_written_twice_starts_a_new_txn_led_by_the_guards() {
    let ops = vec![
        put("/a", None, CreateOptions::PERSISTENT),
        guard("/lock", 0, 1),
        put("/b", None, CreateOptions::PERSISTENT),
        delete("/a", None),
    ];
    assert_eq!(
        paths(&split(&ops)),
        vec![vec!["/lock", "/a", "/b"], vec!["/lock", "/a"]]
    );
}

#[test]
fn a_batch_over_the_op_limit_is_split_counting_the_guards_in_each_part() {
    // A put costs 2 compares and 2 reads; the guard 2 compares and 1 read, in every part: 63 puts fit.
    let mut ops = vec![guard("/lock", 0, 1)];
    ops.extend((0..130).map(|i| put(&format!("/k{i}"), None, CreateOptions::PERSISTENT)));
    let parts = split(&ops);
    assert_eq!(
        parts.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![64, 64, 5]
    );
    for part in &parts {
        assert_eq!(part[0].path(), "/lock");
    }
    assert_eq!(parts[0][1].path(), "/k0");
    assert_eq!(parts[1][1].path(), "/k63");
    assert_eq!(parts[2][4].path(), "/k129");
}

#[test]
fn a_batch_over_the_byte_limit_is_split() {
    let big = |path: &str| Op::Put {
        path: path.into(),
        value: vec![0; MAX_TXN_BYTES / 2],
        expected_version: None,
        options: CreateOptions::PERSISTENT,
    };
    let ops = vec![big("/x"), big("/y"), big("/z")];
    assert_eq!(
        paths(&split(&ops)),
        vec![vec!["/x"], vec!["/y"], vec!["/z"]]
    );
}

fn found(create_revision: i64, version: i64) -> ReadBack {
    ReadBack {
        first: Some(Found {
            create_revision,
            version,
        }),
        count: 1,
    }
}

fn nothing() -> ReadBack {
    ReadBack::default()
}

fn diagnosed(
    ops: &[Op],
    known: Option<&HashMap<String, bool>>,
    reads: &[ReadBack],
) -> Result<Retry> {
    let refs: Vec<&Op> = ops.iter().collect();
    let p = Plan::build(&refs, known, 42, &lease_7).unwrap();
    diagnose(&refs, &p, reads)
}

#[test]
fn a_guard_that_no_longer_holds_fences_the_batch() {
    let ops = vec![
        guard("/lock", 2, 9),
        put("/a", Some(0), CreateOptions::PERSISTENT),
    ];
    let fenced = Err(Error::Fenced {
        path: "/lock".into(),
    });
    assert_eq!(diagnosed(&ops, None, &[nothing(), found(5, 1)]), fenced);
    // Deleted and created again: another incarnation.
    assert_eq!(diagnosed(&ops, None, &[found(10, 3), found(5, 1)]), fenced);
    // Written since.
    assert_eq!(diagnosed(&ops, None, &[found(9, 4), found(5, 1)]), fenced);
    // The guard holds: the put's version is what failed.
    assert_eq!(
        diagnosed(&ops, None, &[found(9, 3), found(5, 2)]),
        Err(Error::bad_version("/a", 0))
    );
}

#[test]
fn a_delete_names_why_it_failed() {
    let ops = vec![delete("/d", Some(1))];
    assert_eq!(
        diagnosed(&ops, None, &[nothing(), nothing()]),
        Err(Error::not_found("/d"))
    );
    assert_eq!(
        diagnosed(&ops, None, &[found(3, 5), nothing()]),
        Err(Error::bad_version("/d", 1))
    );
    let children = ReadBack {
        first: None,
        count: 2,
    };
    assert_eq!(
        diagnosed(&ops, None, &[found(3, 2), children]),
        Err(Error::NotEmpty { path: "/d".into() })
    );
    // Everything holds when read back: a concurrent change, plan again.
    assert_eq!(
        diagnosed(&ops, None, &[found(3, 2), nothing()]),
        Ok(Retry::Replan)
    );
}

#[test]
fn failed_puts_are_bad_version_or_a_retry() {
    let create_only = vec![put("/b", Some(CREATE_ONLY), CreateOptions::PERSISTENT)];
    assert_eq!(
        diagnosed(&create_only, None, &[found(4, 1)]),
        Err(Error::bad_version("/b", CREATE_ONLY))
    );
    let cas = vec![put("/c", Some(4), CreateOptions::PERSISTENT)];
    assert_eq!(
        diagnosed(&cas, None, &[nothing()]),
        Err(Error::bad_version("/c", 4))
    );
    assert_eq!(
        diagnosed(&cas, None, &[found(4, 4)]),
        Err(Error::bad_version("/c", 4))
    );
    assert_eq!(diagnosed(&cas, None, &[found(4, 5)]), Ok(Retry::Replan));
    // A sequential name taken, or a sibling created since the candidate: another candidate.
    let seq = vec![put("/q/n-", None, CreateOptions::SEQUENTIAL)];
    assert_eq!(
        diagnosed(&seq, None, &[found(42, 1), nothing()]),
        Ok(Retry::Sequence)
    );
    let sibling = ReadBack {
        first: None,
        count: 1,
    };
    assert_eq!(
        diagnosed(&seq, None, &[nothing(), sibling]),
        Ok(Retry::Sequence)
    );
    // An existence assumption that no longer holds: re-plan.
    let known: HashMap<String, bool> = [("/a".to_string(), true)].into_iter().collect();
    let unconditional = vec![put("/a", None, CreateOptions::PERSISTENT)];
    assert_eq!(
        diagnosed(&unconditional, Some(&known), &[nothing()]),
        Ok(Retry::Replan)
    );
}

#[test]
fn the_first_failing_op_in_batch_order_wins_over_a_sequence_retry() {
    let ops = vec![
        put("/q/n-", None, CreateOptions::SEQUENTIAL),
        put("/c", Some(4), CreateOptions::PERSISTENT),
    ];
    // The sequential put met a sibling, but the compare-and-set failed for good.
    assert_eq!(
        diagnosed(&ops, None, &[found(42, 1), nothing(), found(1, 9)]),
        Err(Error::bad_version("/c", 4))
    );
    let ops = vec![delete("/d", None), guard("/lock", 2, 9)];
    assert_eq!(
        diagnosed(&ops, None, &[nothing(), nothing(), nothing()]),
        Err(Error::not_found("/d"))
    );
}
