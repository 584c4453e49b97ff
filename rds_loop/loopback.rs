// SPDX-License-Identifier: GPL-2.0

//! The loopback transport: messages between sockets of one host.
//!
//! C counterpart: `net/rds/loop.c`.
//!
//! Transmitting a message is receiving it: [`Loopback::xmit`] hands the message to the receive
//! path of the same connection, with the connection's local address as the source and its
//! remote address as the destination, sharing the sender's payload, and then settles the
//! sender's side at once (there is nothing to acknowledge). Unlike C's loopback, congestion is
//! enforced and RDMA works (see `Documentation/differences-from-c.md`): the transport copies
//! between the pinned pages of the two sides, then delivers the message that completes the
//! operation.

use crate::conn::Conn;
use crate::message::Message;
use crate::rdma::{execute_loopback, Mr};
use crate::transport::{MrOps, Transport, XmitError};
use crate::{recv, send};
use kernel::{prelude::*, sync::Arc};

/// The loopback transport.
pub(crate) struct Loopback;

/// The one instance of the loopback transport.
pub(crate) static LOOPBACK: Loopback = Loopback;

/// C's `RDS_TRANS_LOOP`, what `SO_RDS_TRANSPORT` reports for a loopback socket.
pub(crate) const RDS_TRANS_LOOP: i32 = 3;

impl Transport for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn kind(&self) -> i32 {
        RDS_TRANS_LOOP
    }

    fn xmit(&self, conn: &Arc<Conn>, msg: &Arc<Message>) -> Result<(), XmitError> {
        if crate::bindings::sys::loop_hold() {
            return Err(XmitError::Held);
        }
        let inc = recv::make_incoming(conn, msg).map_err(|_| XmitError::NoMem)?;
        if let Some(op) = &msg.op {
            if let Err(status) =
                execute_loopback(&conn.shared.mrs, conn.key.net, conn.key.faddr, op)
            {
                // The data did not land: the message is not delivered.
                send::complete(msg, status);
                return Ok(());
            }
            // A silent operation with nothing else to say sends no message (C: `rds_send_xmit`
            // clears `data.op_active`).
            if op.silent && msg.len == 0 && msg.rdma_cookie == 0 {
                recv::delivered(msg);
                return Ok(());
            }
        }
        recv::deliver(conn, inc, msg.kind);
        recv::delivered(msg);
        Ok(())
    }

    fn mr_ops(&self) -> Option<&'static dyn MrOps> {
        Some(&LOOPBACK)
    }
}

/// Registrations need nothing from loopback: the core's pinned pages are all it touches, and
/// a freed registration is unreachable as soon as it leaves the core's index.
impl MrOps for Loopback {
    fn register(&self, _mr: &Mr) -> Result {
        Ok(())
    }

    fn invalidate(&self, _mr: &Mr) {}

    fn flush(&self) {}
}
