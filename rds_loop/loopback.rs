// SPDX-License-Identifier: GPL-2.0

//! The loopback transport: messages between sockets of one host.
//!
//! C counterpart: `net/rds/loop.c`.
//!
//! Transmitting a message is receiving it: [`Loopback::xmit`] hands the message to the receive
//! path of the same connection, with the connection's local address as the source and its
//! remote address as the destination, sharing the sender's payload, and then settles the
//! sender's side at once (there is nothing to acknowledge). Unlike C's loopback, congestion is
//! enforced (see `Documentation/differences-from-c.md`).

use crate::conn::Conn;
use crate::message::{IncomingHeader, Message};
use crate::recv;
use crate::transport::{Transport, XmitError};
use kernel::sync::Arc;

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
        let hdr = IncomingHeader {
            saddr: conn.key.laddr,
            daddr: conn.key.faddr,
            sport: msg.sport,
            dport: msg.dport,
            seq: msg.seq(),
            tos: conn.key.tos,
        };
        recv::incoming(conn, hdr, msg).map_err(|_| XmitError::NoMem)?;
        recv::delivered(msg);
        Ok(())
    }
}
