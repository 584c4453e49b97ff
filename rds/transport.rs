// SPDX-License-Identifier: GPL-2.0

//! The interface between the core and its transports.
//!
//! C counterpart: `struct rds_transport` in `net/rds/rds.h` and `net/rds/transport.c`.
//!
//! A transport moves the messages queued on a [`Conn`] to the peer and hands what arrives to
//! the core ([`crate::recv::deliver`]). The core calls [`Transport::xmit`] from one task at a
//! time per connection, in queue order.

use crate::conn::Conn;
use crate::message::Message;
use crate::rdma::Mr;
use kernel::{prelude::*, sync::Arc};

/// Why a transport could not take a message now; the core keeps it at the head of the queue
/// and tries again from the connection's worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum XmitError {
    /// Out of memory or another temporary shortage: the connection's worker retries.
    NoMem,
    /// The transport holds messages back for now (a test hook); the next send retries.
    Held,
}

/// A transport.
pub(crate) trait Transport: Send + Sync {
    /// The name `RDS_INFO_CONNECTIONS` reports (C: `t_name`).
    fn name(&self) -> &'static str;

    /// The number `SO_RDS_TRANSPORT` reports (C: `t_type`).
    fn kind(&self) -> i32;

    /// Sends `msg` over `conn`: its RDMA or atomic operation first, if it has one, then the
    /// message itself (unless the operation is silent and there is nothing else to say). When
    /// the transport returns `Ok`, it owns the delivery of the message and its completion
    /// (`crate::send::complete`, with the operation's status) from then on.
    fn xmit(&self, conn: &Arc<Conn>, msg: &Arc<Message>) -> Result<(), XmitError>;

    /// The transport's memory-registration operations; `None` when it cannot do RDMA.
    fn mr_ops(&self) -> Option<&'static dyn MrOps> {
        None
    }
}

/// What a transport must do for memory registrations. The core pins and accounts the
/// memory, picks the r_key and keeps the registry; the transport makes the registration
/// usable by its hardware, and unusable again.
pub(crate) trait MrOps: Send + Sync {
    /// Makes a new registration usable for remote access (IB: map it in the device's protection
    /// domain under its r_key).
    fn register(&self, mr: &Mr) -> Result;

    /// Makes a freed registration unusable at once (`RDS_RDMA_INVALIDATE`; IB: post an
    /// invalidation on a queue pair of the registering device).
    fn invalidate(&self, mr: &Mr);

    /// Releases registrations that are freed but not yet recycled (`RDS_FREE_MR` with cookie
    /// 0).
    fn flush(&self);
}
