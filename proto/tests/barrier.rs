//! The RDMA barrier (an rds-rs extension; include/uapi/linux/rds.h keeps
//! only "deprecated: RDS_BARRIER 4"): operation ids, the high-water mark,
//! and the barrier ABI.

use std::collections::BTreeSet;

use proptest::prelude::*;
use rds_proto::{
    BarrierArgs, BarrierState, OpTracker, SocketIds, BARRIER_ARGS_LEN, BARRIER_FLAGS,
    RDMA_ID_CMSG_LEN, RDS_BARRIER, RDS_CMSG_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_CSWP,
    RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_ID, RDS_CMSG_ZCOPY_COMPLETION, RDS_RDMA_DONTWAIT,
};

// --- ABI ------------------------------------------------------------------------

#[test]
fn abi_constants() {
    assert_eq!(RDS_BARRIER, 4, "C's deprecated option number");
    assert_eq!(RDS_CMSG_RDMA_ID, 64);
    // Clear of every C cmsg type.
    for c in [
        RDS_CMSG_RDMA_ARGS,
        RDS_CMSG_ATOMIC_CSWP,
        RDS_CMSG_MASKED_ATOMIC_CSWP,
        RDS_CMSG_ZCOPY_COMPLETION,
    ] {
        assert!(c < RDS_CMSG_RDMA_ID);
    }
    assert_eq!(RDMA_ID_CMSG_LEN, 8);
    assert_eq!(BARRIER_ARGS_LEN, 152);
    assert_eq!(BARRIER_FLAGS, RDS_RDMA_DONTWAIT);
}

#[test]
fn barrier_args_layout() {
    let mut dest = [0u8; 128];
    dest[0] = 10;
    dest[127] = 0x5a;
    let a = BarrierArgs {
        dest,
        wait_id: 0x0102_0304_0506_0708,
        mark_addr: 0x7fff_0000_1000,
        flags: RDS_RDMA_DONTWAIT,
    };
    let e = a.encode();
    assert_eq!(e.len(), BARRIER_ARGS_LEN);
    assert_eq!(&e[..128], &dest[..]);
    let at = |o: usize| u64::from_ne_bytes(e[o..o + 8].try_into().unwrap());
    assert_eq!(at(128), a.wait_id, "wait_id at 128");
    assert_eq!(at(136), a.mark_addr, "mark_addr at 136");
    assert_eq!(at(144), a.flags, "flags at 144");
    assert_eq!(BarrierArgs::decode(&e), Some(a));
    assert_eq!(BarrierArgs::decode(&e[..151]), None);
    let mut longer = e.to_vec();
    longer.push(1);
    assert_eq!(BarrierArgs::decode(&longer), Some(a));
    assert_eq!(BarrierArgs::decode(&[0; 152]), Some(BarrierArgs::default()));
}

// --- OpTracker ---------------------------------------------------------------------

#[test]
fn fresh_tracker() {
    let t = OpTracker::<1>::new();
    assert_eq!(t, OpTracker::default());
    assert_eq!(t.next_id(), 1);
    assert_eq!(t.mark(), 0);
    assert_eq!(t.outstanding(), 0);
    assert!(t.can_issue());
    assert_eq!(t.barrier(0), BarrierState::Reached);
    assert_eq!(t.barrier(1), BarrierState::NeverIssued);
}

#[test]
fn in_order_completion() {
    let mut t = OpTracker::<1>::new();
    assert_eq!(t.issue(), Some(1));
    assert_eq!(t.issue(), Some(2));
    assert_eq!(t.outstanding(), 2);
    assert_eq!(t.barrier(1), BarrierState::Pending);
    assert_eq!(t.barrier(3), BarrierState::NeverIssued);
    assert!(t.complete(1));
    assert_eq!(t.mark(), 1);
    assert_eq!(t.barrier(1), BarrierState::Reached);
    assert!(t.complete(2));
    assert_eq!(t.mark(), 2);
    assert_eq!(t.outstanding(), 0);
}

#[test]
fn out_of_order_completion() {
    let mut t = OpTracker::<1>::new();
    for want in 1..=4 {
        assert_eq!(t.issue(), Some(want));
    }
    // 3 and 2 complete first: the mark waits for 1.
    assert!(!t.complete(3));
    assert!(!t.complete(2));
    assert_eq!(t.mark(), 0);
    assert_eq!(t.outstanding(), 2);
    assert_eq!(t.barrier(2), BarrierState::Pending);
    // 1 completes: the mark jumps over 1, 2, 3.
    assert!(t.complete(1));
    assert_eq!(t.mark(), 3);
    assert_eq!(t.outstanding(), 1);
    assert_eq!(t.barrier(3), BarrierState::Reached);
    assert_eq!(t.barrier(4), BarrierState::Pending);
}

#[test]
fn bad_completions_are_ignored() {
    let mut t = OpTracker::<1>::new();
    t.issue();
    t.issue();
    assert!(!t.complete(0), "never issued");
    assert!(!t.complete(3), "never issued");
    assert!(!t.complete(u64::MAX), "never issued");
    assert!(!t.complete(2));
    assert!(!t.complete(2), "already complete");
    assert_eq!(t.outstanding(), 1);
    assert!(t.complete(1));
    assert_eq!(t.mark(), 2);
    assert!(!t.complete(1), "at or below the mark");
    assert!(!t.complete(2), "at or below the mark");
    assert_eq!(t.mark(), 2);
}

#[test]
fn window_bound() {
    // W = 1: ids up to mark + 64.
    let mut t = OpTracker::<1>::new();
    for want in 1..=64 {
        assert!(t.can_issue());
        assert_eq!(t.issue(), Some(want));
    }
    assert!(!t.can_issue());
    assert_eq!(t.issue(), None);
    assert_eq!(t.next_id(), 65, "a refused issue takes no id");
    // Completing 2..=64 does not free the window: 1 holds the mark.
    for id in 2..=64 {
        assert!(!t.complete(id));
    }
    assert!(!t.can_issue());
    assert_eq!(t.outstanding(), 1);
    assert!(t.complete(1));
    assert_eq!(t.mark(), 64);
    // Id 65 reuses id 1's bit, which the mark cleared.
    for want in 65..=128 {
        assert_eq!(t.issue(), Some(want));
    }
    assert_eq!(t.issue(), None);
    assert_eq!(t.outstanding(), 64);
    assert!(!t.complete(66));
    assert!(t.complete(65));
    assert_eq!(t.mark(), 66);
}

#[test]
fn zero_window_never_issues() {
    let mut t = OpTracker::<0>::new();
    assert!(!t.can_issue());
    assert_eq!(t.issue(), None);
    assert!(!t.complete(1));
    assert_eq!(t.barrier(1), BarrierState::NeverIssued);
}

#[test]
fn big_window() {
    let mut t = OpTracker::<64>::new();
    for want in 1..=4096 {
        assert_eq!(t.issue(), Some(want));
    }
    assert_eq!(t.issue(), None);
    for id in (1..=4096).rev() {
        assert_eq!(t.complete(id), id == 1);
    }
    assert_eq!(t.mark(), 4096);
    assert_eq!(t.outstanding(), 0);
}

// --- property: against a BTreeSet model ---------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Issue,
    /// Complete the outstanding id at this index (modulo their number).
    CompleteOutstanding(usize),
    /// Complete an arbitrary id (mostly bogus).
    CompleteAny(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Issue),
        4 => any::<usize>().prop_map(Op::CompleteOutstanding),
        1 => prop_oneof![0u64..300, any::<u64>()].prop_map(Op::CompleteAny),
    ]
}

struct Model {
    next: u64,
    completed: BTreeSet<u64>,
}

impl Model {
    /// The largest H with every id in 1..=H completed.
    fn mark(&self) -> u64 {
        let mut h = 0;
        while self.completed.contains(&(h + 1)) {
            h += 1;
        }
        h
    }

    fn outstanding(&self) -> Vec<u64> {
        (1..self.next)
            .filter(|id| !self.completed.contains(id))
            .collect()
    }
}

fn run_tracker<const W: usize>(ops: &[Op]) -> Result<(), TestCaseError> {
    let window = W as u64 * 64;
    let mut t = OpTracker::<W>::new();
    let mut m = Model {
        next: 1,
        completed: BTreeSet::new(),
    };
    let mut last_mark = 0;
    for op in ops {
        match *op {
            Op::Issue => {
                let can = m.next - m.mark() <= window;
                prop_assert_eq!(t.can_issue(), can);
                if can {
                    prop_assert_eq!(t.issue(), Some(m.next));
                    m.next += 1;
                } else {
                    prop_assert_eq!(t.issue(), None);
                }
            }
            Op::CompleteAny(id) => {
                let before = m.mark();
                let valid = id >= 1 && id < m.next && !m.completed.contains(&id);
                if valid {
                    m.completed.insert(id);
                }
                prop_assert_eq!(t.complete(id), m.mark() != before);
            }
            Op::CompleteOutstanding(i) => {
                let out = m.outstanding();
                if out.is_empty() {
                    continue;
                }
                let id = out[i % out.len()];
                let before = m.mark();
                m.completed.insert(id);
                prop_assert_eq!(t.complete(id), m.mark() != before);
            }
        }
        let mark = m.mark();
        prop_assert_eq!(t.mark(), mark);
        prop_assert!(t.mark() >= last_mark, "the mark never decreases");
        last_mark = t.mark();
        prop_assert_eq!(t.next_id(), m.next);
        prop_assert!(t.next_id() - t.mark() <= window + 1, "window bound");
        prop_assert_eq!(t.outstanding(), m.outstanding().len() as u64);
        for id in [0, mark, mark + 1, m.next - 1, m.next, m.next + 5] {
            let want = if id <= mark {
                BarrierState::Reached
            } else if id >= m.next {
                BarrierState::NeverIssued
            } else {
                BarrierState::Pending
            };
            prop_assert_eq!(t.barrier(id), want, "barrier({})", id);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn tracker_matches_model(ops in proptest::collection::vec(op(), 0..400)) {
        run_tracker::<1>(&ops)?;
        run_tracker::<2>(&ops)?;
        run_tracker::<0>(&ops)?;
    }

    #[test]
    fn barrier_args_round_trip(dest in proptest::collection::vec(any::<u8>(), 128),
                               f in any::<[u64; 3]>()) {
        let a = BarrierArgs {
            dest: dest.try_into().unwrap(),
            wait_id: f[0],
            mark_addr: f[1],
            flags: f[2],
        };
        let e = a.encode();
        prop_assert_eq!(BarrierArgs::decode(&e), Some(a));
        prop_assert_eq!(BarrierArgs::decode(&e).unwrap().encode(), e);
    }
}

// --- Forgetting idle trackers (SocketIds) ---------------------------------------

#[test]
fn starting_at_and_idle() {
    let mut t = OpTracker::<1>::starting_at(10);
    assert!(t.is_idle());
    assert_eq!((t.mark(), t.next_id()), (9, 10));
    assert_eq!(t.barrier(9), BarrierState::Reached);
    assert_eq!(t.barrier(10), BarrierState::NeverIssued);
    assert_eq!(t.issue(), Some(10));
    assert!(!t.is_idle());
    assert_eq!(t.barrier(10), BarrierState::Pending);
    assert!(t.complete(10));
    assert!(t.is_idle());
    assert_eq!(OpTracker::<1>::starting_at(0), OpTracker::<1>::new());
}

#[test]
fn socket_ids_rules() {
    let mut ids = SocketIds::new();
    // Nothing forgotten: trackers start at 1; an unknown destination has issued nothing.
    assert_eq!(ids.first_id(), 1);
    assert_eq!(ids.untracked(0), (0, BarrierState::Reached));
    assert_eq!(ids.untracked(1), (0, BarrierState::NeverIssued));
    ids.issued(5);
    ids.issued(3);
    assert_eq!(ids.first_id(), 1);
    ids.forgot();
    // Once forgotten, new trackers start above every id issued, and a destination without a
    // tracker has completed everything up to the floor.
    assert_eq!(ids.first_id(), 6);
    assert_eq!(ids.untracked(5), (5, BarrierState::Reached));
    assert_eq!(ids.untracked(6), (5, BarrierState::NeverIssued));
}

#[derive(Clone, Debug)]
enum MultiOp {
    Issue(u8),
    Complete(usize),
    Forget,
    Barrier(u8, u64),
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        4 => (0u8..4).prop_map(MultiOp::Issue),
        3 => any::<usize>().prop_map(MultiOp::Complete),
        1 => Just(MultiOp::Forget),
        2 => ((0u8..4), 0u64..40).prop_map(|(d, w)| MultiOp::Barrier(d, w)),
    ]
}

proptest! {
    /// The socket's trackers as the module keeps them (a tracker per busy destination, idle
    /// ones forgotten at any time), against a model of every op ever issued: ids increase per
    /// destination, and every barrier answer is true of the model.
    #[test]
    fn forgetting_trackers_keeps_the_barrier_true(ops in proptest::collection::vec(multi_op(), 0..300)) {
        use std::collections::BTreeMap;
        let mut ids = SocketIds::new();
        let mut trackers: BTreeMap<u8, OpTracker<1>> = BTreeMap::new();
        // Model: every op issued, (dest, id, done).
        let mut model: Vec<(u8, u64, bool)> = Vec::new();
        for op in ops {
            match op {
                MultiOp::Issue(d) => {
                    let t = trackers
                        .entry(d)
                        .or_insert_with(|| OpTracker::starting_at(ids.first_id()));
                    if let Some(id) = t.issue() {
                        ids.issued(id);
                        let last = model.iter().filter(|m| m.0 == d).map(|m| m.1).max();
                        prop_assert!(last.is_none_or(|l| id > l), "ids of {} go {:?} -> {}", d, last, id);
                        model.push((d, id, false));
                    }
                }
                MultiOp::Complete(k) => {
                    let open: Vec<usize> = (0..model.len()).filter(|&i| !model[i].2).collect();
                    if !open.is_empty() {
                        let i = open[k % open.len()];
                        model[i].2 = true;
                        let (d, id, _) = model[i];
                        let t = trackers.get_mut(&d);
                        prop_assert!(t.is_some(), "a busy destination lost its tracker");
                        if let Some(t) = t {
                            t.complete(id);
                        }
                    }
                }
                MultiOp::Forget => {
                    let idle: Vec<u8> = trackers.iter().filter(|(_, t)| t.is_idle()).map(|(d, _)| *d).collect();
                    for d in idle {
                        trackers.remove(&d);
                        ids.forgot();
                    }
                }
                MultiOp::Barrier(d, w) => {
                    let (mark, state) = match trackers.get(&d) {
                        Some(t) => (t.mark(), t.barrier(w)),
                        None => ids.untracked(w),
                    };
                    let to_d: Vec<(u64, bool)> = model.iter().filter(|m| m.0 == d).map(|m| (m.1, m.2)).collect();
                    // The mark is sound: every op to d up to it has completed.
                    prop_assert!(to_d.iter().all(|&(id, done)| id > mark || done), "mark {} of {} too high", mark, d);
                    match state {
                        BarrierState::Reached => {
                            prop_assert!(w <= mark);
                            prop_assert!(to_d.iter().all(|&(id, done)| id > w || done));
                        }
                        BarrierState::Pending => {
                            prop_assert!(to_d.iter().any(|&(id, done)| id <= w && !done));
                        }
                        BarrierState::NeverIssued => {
                            prop_assert!(w > 0);
                            prop_assert!(to_d.iter().all(|&(id, _)| id < w));
                        }
                    }
                    // Complete: everything to d done and w no higher than its last id: reached.
                    let last = to_d.iter().map(|m| m.0).max();
                    if to_d.iter().all(|m| m.1) && last.is_some_and(|l| w <= l) {
                        prop_assert_eq!(state, BarrierState::Reached);
                    }
                }
            }
        }
    }
}
