// SPDX-License-Identifier: GPL-2.0

//! The fence after a deregistration on iWARP: every QP of the device is past the work it had
//! started before the pages are let go.
//!
//! C counterpart: none (C 6.12 ignores iWARP devices; `Documentation/rdma.md`, "Registrations
//! on iWARP", says why siw needs it).
//!
//! [`fence_device`], called by a deregistration ([`super::mr`]), and `listed_qps`, the QPs
//! listed on the device (`IbDev::qps`, by [`super::qp`]).

use super::send::Inflight;
use super::{IbDev, FENCE_MS};
use crate::bindings::ib::{Qp, Waiter};
use crate::bindings::sync::ProcessCtx;
use crate::bindings::sys;
use crate::bindings::testhooks;
use crate::proto::Stat;
use crate::stats;
use kernel::{prelude::*, sync::Arc};

/// Waits (process context) until every QP of the iWARP device `dev` is past the work it had
/// started: a fence on each ([`Qp::post_fence`]). A fence completes after everything queued
/// before it on its QP, which may take a while on a busy one; a QP that completed no send-side
/// request for [`FENCE_MS`] while its fence is out is stuck (a READ RESPONSE behind a peer that
/// takes nothing) and is moved to the error state, which flushes it (its connection resets:
/// `rs_ib_mr_fence_stalled`). A QP that refuses the fence because it is not in RTS is sending
/// nothing (siw: `ENOTCONN`); one refused for another reason, a closed one included (its
/// shutdown may not have stopped it yet), is moved to the error state too (which waits for a
/// shutdown under way).
pub(super) fn fence_device(dev: &IbDev, ctx: &ProcessCtx) {
    let idle = dev.idle.lock();
    let Some(idle) = idle.as_ref() else { return };
    let mut qps = listed_qps(dev, ctx);
    let Ok(waiter) = Waiter::new() else {
        // No memory for the waiter: the slow way, every QP to the error state.
        for (q, _) in qps.iter() {
            q.fail(ctx);
        }
        return;
    };
    // Fences are posted under `idle`, held until every one of them completed: no QP has
    // another's out (`EBUSY`), and one that is pending below is this round's.
    for (q, _) in qps.iter() {
        match q.post_fence(idle, &waiter, ctx) {
            Ok(()) => stats::inc(Stat::RsIbMrFence),
            Err(e) if e == crate::bindings::net::enotconn() => {}
            Err(_) => q.fail(ctx),
        }
    }
    waiter.arrive();
    // The test build's knob: as if a first bound had passed at once with no progress (not
    // even a zero-time wait, which sleeps a tick).
    let mut expire = testhooks::ib_fence_expire();
    let mut rounds = 0u32;
    loop {
        if !expire && waiter.wait(FENCE_MS, ctx) {
            return;
        }
        for (q, last) in qps.iter_mut() {
            if *last == u64::MAX || !q.fence_pending() {
                continue;
            }
            let now = q.send_progress();
            if expire || now == *last {
                stats::inc(Stat::RsIbMrFenceStalled);
                q.fail(ctx);
                // Its flush completes the fence.
                *last = u64::MAX;
            } else {
                *last = now;
            }
        }
        expire = false;
        rounds += 1;
        if rounds % 15 == 0 {
            pr_warn!(
                "fences on an iWARP device still out after {} s\n",
                rounds * FENCE_MS / 1000
            );
        }
    }
}

/// The QPs listed on `dev` now, each with its send-side progress (all of them: without memory
/// for the list, it tries again).
fn listed_qps(dev: &IbDev, ctx: &ProcessCtx) -> KVec<(Arc<Qp<Inflight>>, u64)> {
    let mut v = KVec::new();
    loop {
        let want = dev.qps.lock().iter().count();
        if v.reserve(want, GFP_KERNEL).is_err() {
            sys::sleep_ms(10, ctx);
            continue;
        }
        let qps = dev.qps.lock();
        if qps.iter().count() > want {
            continue;
        }
        for (_, q) in qps.iter() {
            // Room was reserved.
            let _ = v.push((q.clone(), q.send_progress()), GFP_ATOMIC);
        }
        return v;
    }
}
