// SPDX-License-Identifier: GPL-2.0

//! The fence after a deregistration on iWARP: every QP of the device is past the work it had
//! started before the pages are let go.
//!
//! C counterpart: none (C 6.12 ignores iWARP devices; `Documentation/rdma.md`, "Registrations
//! on iWARP", says why siw needs it).
//!
//! - [`fence_later`]: a deregistration ([`super::mr`]) hands its deregistered registration and
//!   pages ([`Unfenced`]) to its device and returns; the device's fence work ([`run_batch`])
//!   fences every QP of the device once for all the registrations handed over meanwhile, then
//!   lets them go. So `RDS_FREE_MR` and the other deferred drops never wait for a fence, a slow
//!   fence on one device holds up nothing of another, and a socket closing with many
//!   registrations pays one fence round, not one each.
//! - [`fence_device`], one fence round, and `listed_qps`, the QPs listed on the device
//!   (`IbDev::qps`, by [`super::qp`]).
//! - [`drain`]: the device's removal lets go of what waits (no QP is left).

use super::send::Inflight;
use super::{IbDev, FENCE_MS};
use crate::bindings::ib::{FastMr, Qp, Waiter};
use crate::bindings::sync::ProcessCtx;
use crate::bindings::sys::{self, Work};
use crate::bindings::testhooks;
use crate::proto::Stat;
use crate::rdma::RegPages;
use crate::stats;
use kernel::{prelude::*, sync::Arc};

/// A deregistered fast registration with its pages, which a READ RESPONSE that started before
/// the deregistration may still be reading: kept mapped and pinned until a fence round of the
/// device is over. Dropping it unmaps, then unpins.
pub(super) struct Unfenced {
    _mr: FastMr<RegPages>,
}

impl Unfenced {
    pub(super) fn new(mr: FastMr<RegPages>) -> Self {
        Self { _mr: mr }
    }
}

/// Hands `item` to `dev`'s fence work (process context), which lets it go after the device's
/// next fence round. After the device's removal took the batch (no QP is left), or without
/// memory to keep it, it is fenced here and let go at once.
pub(super) fn fence_later(dev: &Arc<IbDev>, item: Unfenced, ctx: &ProcessCtx) {
    let left = {
        let mut batch = dev.unfenced.lock();
        match batch.as_mut() {
            Some(v) => {
                if v.reserve(1, GFP_KERNEL).is_ok() {
                    // Room was reserved: `push` neither allocates nor drops the item.
                    let _ = v.push(item, GFP_KERNEL);
                    None
                } else {
                    Some(item)
                }
            }
            None => Some(item),
        }
    };
    match left {
        None => {
            // Already pending: that run takes this one too.
            Work::<IbDev, 0>::queue(&dev.shared.wq, dev.clone());
        }
        Some(item) => {
            fence_device(dev, ctx);
            drop(item);
        }
    }
}

/// The fence work of a device: one fence round for every registration handed over since the
/// last (`IbDev::unfenced`), then they go.
pub(super) fn run_batch(dev: Arc<IbDev>, ctx: &ProcessCtx) {
    let _run = dev.fence_run.lock();
    // The test build's knob: a slow round (as if a QP took that long to answer); what is
    // handed over meanwhile joins this round.
    let hold = testhooks::ib_fence_hold_ms();
    if hold > 0 {
        sys::sleep_ms(hold, ctx);
    }
    let batch = dev
        .unfenced
        .lock()
        .as_mut()
        .map(|v| core::mem::replace(v, KVec::new()));
    let Some(batch) = batch.filter(|b| !b.is_empty()) else {
        return;
    };
    stats::inc(Stat::RsIbMrFenceRound);
    fence_device(&dev, ctx);
    drop(batch);
}

/// The device's removal, once no QP is left on it: what waits for a fence goes now (a batch
/// being fenced finishes first), and later deregistrations are fenced by their owners.
pub(super) fn drain(dev: &IbDev) {
    let run = dev.fence_run.lock();
    let left = dev.unfenced.lock().take();
    drop(left);
    drop(run);
}

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
