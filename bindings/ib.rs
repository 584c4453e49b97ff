// SPDX-License-Identifier: GPL-2.0

//! Verbs and rdma_cm for the IB/iWARP transport: the ib_client, devices, protection domains,
//! completion queues, rdma_cm ids and their events, queue pairs, work requests and DMA mapping.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h); the C glue is `ib_glue.c`.
//!
//! One concept per file, re-exported here: [`device`] (a device and its attributes),
//! [`client`] (the ib_client), [`pd`] (protection domains), [`mr`] (memory registrations),
//! [`cq`] (completion queues and completions), [`cm`] (rdma_cm ids and their events),
//! [`qp`] (queue pairs and the work requests they post), [`dma`] (DMA mapping) and
//! [`waiter`] (a count of parties to wait for).
//!
//! # Contexts and rules
//!
//! - The ib_client's `add` and `remove` ([`IbClient`]) run in process context with the
//!   device core's locks held: they may sleep, but must not register or unregister clients.
//!   A device is valid between its `add` and the return of its `remove`.
//! - rdma_cm event handlers ([`CmHandler::event`]) run in process context (rdma_cm's work
//!   queues) with the id's handler mutex held: they may sleep, must not create or destroy cm
//!   ids, and must not drop a [`CmId`] (its `Drop` destroys the id, which waits for the
//!   handler: a deadlock in its own handler). Returning [`CmAction::Destroy`] has rdma_cm
//!   destroy the id of the event, which is only allowed for an id the handler did not adopt.
//! - Completions ([`WcHandler::done`]) run in softirq context: the CQ's event schedules its
//!   `irq_poll` (`IB_POLL_SOFTIRQ`), which polls it with a budget, one CQ at a time on one
//!   CPU. A handler must not sleep (it gets no [`ProcessCtx`]), allocates with `GFP_ATOMIC`,
//!   and every lock it shares with process context is taken with bottom halves disabled
//!   ([`super::sync::SpinLockBh`]). Every work request names a [`WrCqe`], which must stay
//!   valid and pinned until its completion (a flush completes every outstanding request when
//!   the QP is drained).
//!
//! [`ProcessCtx`]: super::sync::ProcessCtx
//! [`WrCqe`]: cq::WrCqe

/// A Rust enum for a C enum: the variants with their C values, and a last variant `Other`
/// for any value not listed (a newer kernel's). Generates `from_raw` (the conversion from the
/// C value, for the glue callbacks of this module) and `raw` (the C value back). Defined here,
/// before the files that use it (`cq.rs`, `cm.rs`): a `macro_rules!` macro is in scope in the
/// modules declared after it.
macro_rules! c_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vm:meta])* $v:ident = $val:literal, )*
        }
    ) => {
        $(#[$m])*
        $vis enum $name {
            $( $(#[$vm])* $v, )*
            /// A value not listed here.
            Other(i32),
        }

        impl $name {
            /// The variant of the C value `v`.
            fn from_raw(v: i32) -> Self {
                match v {
                    $( $val => Self::$v, )*
                    v => Self::Other(v),
                }
            }

            /// The C value.
            pub(crate) fn raw(self) -> i32 {
                match self {
                    $( Self::$v => $val, )*
                    Self::Other(v) => v,
                }
            }
        }
    };
}

#[path = "ib/client.rs"]
mod client;
#[path = "ib/cm.rs"]
mod cm;
#[path = "ib/cq.rs"]
mod cq;
#[path = "ib/device.rs"]
mod device;
#[path = "ib/dma.rs"]
mod dma;
#[path = "ib/mr.rs"]
mod mr;
#[path = "ib/pd.rs"]
mod pd;
#[path = "ib/qp.rs"]
mod qp;
#[path = "ib/waiter.rs"]
mod waiter;

pub(crate) use client::{IbClient, IbRegistration};
pub(crate) use cm::{CmAction, CmEvent, CmEventKind, CmHandler, CmId, CmIdRef};
pub(crate) use cq::{Wc, WcHandler, WcStatus};
pub(crate) use device::{DevAttrs, Device};
pub(crate) use mr::{FastMr, IdleMr, UserMr};
pub(crate) use pd::Pd;
pub(crate) use qp::{
    BufRef, Piece, Qp, QpEvents, QpSpec, RdmaWr, SendSource, QP_EVENT_COMM_EST, SEND_FENCE,
    SEND_SIGNALED, SEND_SOLICITED, TAG_KIND, TAG_RECV, TAG_SEND,
};
pub(crate) use waiter::Waiter;
