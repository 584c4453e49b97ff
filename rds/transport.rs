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
use kernel::{prelude::*, sync::Arc};

/// Why a transport could not take a message now; the core keeps it at the head of the queue
/// and tries again from the connection's worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum XmitError {
    /// Out of memory or another temporary shortage.
    NoMem,
}

/// A transport.
pub(crate) trait Transport: Send + Sync {
    /// The name `RDS_INFO_CONNECTIONS` reports (C: `t_name`).
    fn name(&self) -> &'static str;

    /// The number `SO_RDS_TRANSPORT` reports (C: `t_type`).
    fn kind(&self) -> i32;

    /// Sends `msg` over `conn`. When the transport returns `Ok`, it owns the delivery of the
    /// message and its completion (`crate::send::complete`) from then on.
    fn xmit(&self, conn: &Arc<Conn>, msg: &Arc<Message>) -> Result<(), XmitError>;
}
