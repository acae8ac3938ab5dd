//! Tests of the multi planning: first plans, the recovery from each failure, and the splitting of batches.

use super::*;
use crate::store::{CreateOptions, Guard};

fn put(path: &str, expected_version: Option<i64>, options: CreateOptions) -> Op {
    Op::Put {
        path: path.into(),
        value: b"v".to_vec(),
        expected_version,
        options,
    }
}

fn check(path: &str, version: i64) -> Op {
    Op::Check(Guard {
        path: path.into(),
        version,
        creation_revision: 5,
    })
}

fn big_put(path: &str, bytes: usize) -> Op {
    Op::Put {
        path: path.into(),
        value: vec![0; bytes],
        expected_version: None,
        options: CreateOptions::PERSISTENT,
    }
}

#[test]
fn first_plans_follow_the_mapping() {
    let persistent = CreateOptions::PERSISTENT;
    assert_eq!(Plan::first(&put("/a", None, persistent)), Plan::Set(None));
    assert_eq!(
        Plan::first(&put("/a", Some(4), persistent)),
        Plan::Set(Some(4))
    );
    assert_eq!(
        Plan::first(&put("/a", Some(CREATE_ONLY), persistent)),
        Plan::Create(false)
    );
    assert_eq!(
        Plan::first(&put("/a", None, CreateOptions::SEQUENTIAL)),
        Plan::Create(false)
    );
    assert_eq!(
        Plan::first(&put("/a", None, CreateOptions::EPHEMERAL)),
        Plan::Set(None)
    );
    assert_eq!(Plan::first(&Op::delete("/a")), Plan::Delete(None));
    assert_eq!(
        Plan::first(&Op::Delete {
            path: "/a".into(),
            expected_version: Some(2)
        }),
        Plan::Delete(Some(2))
    );
    assert_eq!(Plan::first(&check("/lock", 7)), Plan::Check(7));
}

#[test]
fn an_unconditional_put_switches_between_set_and_create() {
    let op = put("/a/b", None, CreateOptions::EPHEMERAL);
    assert_eq!(
        recover(&op, Plan::Set(None), zk::Error::NoNode, true),
        Recovery::Replan(Plan::Create(false))
    );
    assert_eq!(
        recover(&op, Plan::Create(false), zk::Error::NodeExists, true),
        Recovery::Replan(Plan::Set(None))
    );
    assert_eq!(
        recover(&op, Plan::Create(true), zk::Error::NodeExists, true),
        Recovery::Replan(Plan::Set(None))
    );
    assert_eq!(
        recover(&op, Plan::Create(false), zk::Error::NoNode, true),
        Recovery::CreateParents
    );
    // Parents are made once: a second NONODE is the answer.
    assert_eq!(
        recover(&op, Plan::Create(true), zk::Error::NoNode, true),
        Recovery::Unexpected(zk::Error::NoNode)
    );
}

#[test]
fn without_retries_left_the_failure_is_the_answer() {
    let op = put("/a", None, CreateOptions::PERSISTENT);
    assert_eq!(
        recover(&op, Plan::Set(None), zk::Error::NoNode, false),
        Recovery::Unexpected(zk::Error::NoNode)
    );
    assert_eq!(
        recover(&op, Plan::Create(false), zk::Error::NodeExists, false),
        Recovery::Fail(Error::bad_version("/a", CREATE_ONLY))
    );
    assert_eq!(
        recover(&op, Plan::Create(false), zk::Error::NoNode, false),
        Recovery::Unexpected(zk::Error::NoNode)
    );
}

#[test]
fn conditions_that_fail_are_bad_version_or_fenced() {
    let create = put("/a", Some(CREATE_ONLY), CreateOptions::PERSISTENT);
    assert_eq!(
        recover(&create, Plan::Create(false), zk::Error::NodeExists, true),
        Recovery::Fail(Error::bad_version("/a", CREATE_ONLY))
    );
    // A sequential put never turns into a setData.
    let seq = put("/q/n-", None, CreateOptions::SEQUENTIAL);
    assert_eq!(
        recover(&seq, Plan::Create(false), zk::Error::NodeExists, true),
        Recovery::Fail(Error::bad_version("/q/n-", CREATE_ONLY))
    );
    let cas = put("/a", Some(3), CreateOptions::PERSISTENT);
    for e in [zk::Error::NoNode, zk::Error::BadVersion] {
        assert_eq!(
            recover(&cas, Plan::Set(Some(3)), e, true),
            Recovery::Fail(Error::bad_version("/a", 3))
        );
    }
    let delete = Op::Delete {
        path: "/d".into(),
        expected_version: Some(1),
    };
    assert_eq!(
        recover(&delete, Plan::Delete(Some(1)), zk::Error::BadVersion, true),
        Recovery::Fail(Error::bad_version("/d", 1))
    );
    assert_eq!(
        recover(
            &Op::delete("/d"),
            Plan::Delete(None),
            zk::Error::BadVersion,
            true
        ),
        Recovery::Fail(Error::bad_version("/d", -1))
    );
    // A missing node to delete is mapped as such (NotFound).
    assert_eq!(
        recover(
            &Op::delete("/d"),
            Plan::Delete(None),
            zk::Error::NoNode,
            true
        ),
        Recovery::Unexpected(zk::Error::NoNode)
    );
    let guard = check("/lock", 2);
    for e in [zk::Error::NoNode, zk::Error::BadVersion] {
        assert_eq!(
            recover(&guard, Plan::Check(2), e, true),
            Recovery::Fail(Error::Fenced {
                path: "/lock".into()
            })
        );
    }
    assert_eq!(
        recover(&guard, Plan::Check(2), zk::Error::ConnectionLoss, true),
        Recovery::Unexpected(zk::Error::ConnectionLoss)
    );
}

#[test]
fn a_small_batch_is_one_multi_in_the_callers_order() {
    let ops = vec![
        put("/a", None, CreateOptions::PERSISTENT),
        check("/lock", 1),
        Op::delete("/b"),
    ];
    let parts = split_by_size(&ops);
    assert_eq!(parts, vec![ops.iter().collect::<Vec<_>>()]);
    assert_eq!(split_by_size(&[]), vec![Vec::<&Op>::new()]);
}

#[test]
fn a_large_batch_is_split_under_the_limit_with_every_guard_in_each_part() {
    // Each op counts its path, its value and 64 bytes of overhead.
    let third = MAX_MULTI_BYTES / 3;
    let ops = vec![
        big_put("/a", third),
        check("/lock", 1),
        big_put("/b", third),
        big_put("/c", third),
        big_put("/d", 10),
    ];
    let parts = split_by_size(&ops);
    let paths: Vec<Vec<&str>> = parts
        .iter()
        .map(|p| p.iter().map(|op| op.path()).collect())
        .collect();
    assert_eq!(
        paths,
        vec![vec!["/lock", "/a", "/b"], vec!["/lock", "/c", "/d"]]
    );
    // One op above the limit still goes out alone.
    let ops = vec![big_put("/x", MAX_MULTI_BYTES), big_put("/y", 1)];
    let paths: Vec<Vec<&str>> = split_by_size(&ops)
        .iter()
        .map(|p| p.iter().map(|op| op.path()).collect())
        .collect();
    assert_eq!(paths, vec![vec!["/x"], vec!["/y"]]);
}
