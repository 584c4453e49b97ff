// SPDX-License-Identifier: GPL-2.0

//! Messages on their way out, and messages that arrived.
//!
//! C counterpart: `net/rds/message.c` and the `rds_message` / `rds_incoming` structs of
//! `net/rds/rds.h`.
//!
//! A [`Message`] is built by `sendmsg` (or by the core, for pongs): the payload is copied from
//! user space once, into a [`Payload`] that is never written again. It sits on its
//! connection's send queue until the transport takes it. An [`Incoming`] is what a receiving
//! socket queues; over loopback it shares the sender's [`Payload`] (no second copy).

use crate::bindings::net::{emsgsize, SockRef};
use crate::proto::{Addr, FLAG_ACK_REQUIRED};
use crate::rdma::{Notifier, RdmaOp};
use crate::socket::Rds;
use core::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use kernel::{
    alloc::KVVec,
    list::{impl_has_list_links, impl_list_arc_safe, impl_list_item, ListArc, ListLinks},
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// The bytes of one message, immutable once built.
pub(crate) struct Payload {
    bytes: KVVec<u8>,
}

impl Payload {
    /// Wraps bytes already copied into the kernel.
    pub(crate) fn new(bytes: KVVec<u8>) -> Result<Arc<Self>> {
        Ok(Arc::new(Self { bytes }, GFP_KERNEL)?)
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// What a message is, which decides how the receiving side treats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MsgKind {
    /// Data from a socket (including pings to port 0).
    Data,
    /// The answer to a ping, from port 0.
    Pong,
}

/// A message queued for transmission.
///
/// # Invariants
///
/// `len == data.bytes().len()`.
#[pin_data]
pub(crate) struct Message {
    /// The links of the connection's send queue.
    #[pin]
    links: ListLinks,
    /// What the message is.
    pub(crate) kind: MsgKind,
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Payload length (`h_len`).
    pub(crate) len: u32,
    /// The payload.
    pub(crate) data: Arc<Payload>,
    /// The identity of the sending socket ([`crate::bindings::net::Sock::id`]), 0 for none.
    pub(crate) owner_id: usize,
    /// The destination address.
    pub(crate) daddr: Addr,
    /// The RDMA or atomic operation to perform before the message is delivered.
    pub(crate) op: Option<KBox<RdmaOp>>,
    /// A registration cookie for the receiver (`RDS_CMSG_RDMA_DEST`), 0 for none.
    pub(crate) rdma_cookie: u64,
    /// Sequence number, assigned when queued on the connection.
    seq: AtomicU64,
    /// Header flags (`RDS_FLAG_*`).
    flags: AtomicU8,
    /// The sending socket while the message counts against its send buffer (C: `m_rs`, under
    /// `m_rs_lock`), and the operation's notifier. Taken exactly once, by whoever completes or
    /// cancels the message.
    #[pin]
    owner: SpinLock<Owner>,
}

/// What [`Message::take_owner`] hands over.
pub(crate) struct Owner {
    /// The sending socket.
    pub(crate) sock: Option<SockRef<Rds>>,
    /// The notifier of the message's operation, if it may need one.
    pub(crate) notifier: Option<ListArc<Notifier>>,
}

/// The parts of a new [`Message`].
pub(crate) struct MessageParts {
    /// What the message is.
    pub(crate) kind: MsgKind,
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Destination address.
    pub(crate) daddr: Addr,
    /// The payload.
    pub(crate) data: Arc<Payload>,
    /// The sending socket (`None` for messages of the core).
    pub(crate) owner: Option<SockRef<Rds>>,
    /// The RDMA or atomic operation.
    pub(crate) op: Option<KBox<RdmaOp>>,
    /// Its notifier.
    pub(crate) notifier: Option<ListArc<Notifier>>,
    /// A cookie for the receiver.
    pub(crate) rdma_cookie: u64,
}

impl MessageParts {
    /// A message without RDMA.
    pub(crate) fn plain(
        kind: MsgKind,
        sport: u16,
        dport: u16,
        daddr: Addr,
        data: Arc<Payload>,
        owner: Option<SockRef<Rds>>,
    ) -> Self {
        Self {
            kind,
            sport,
            dport,
            daddr,
            data,
            owner,
            op: None,
            notifier: None,
            rdma_cookie: 0,
        }
    }
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for Message { untracked; }
}
impl_has_list_links! {
    impl HasListLinks<0> for Message { self.links }
}
impl_list_item! {
    impl ListItem<0> for Message { using ListLinks; }
}

impl Message {
    /// Builds a message.
    pub(crate) fn new(p: MessageParts) -> Result<ListArc<Self>> {
        let len = u32::try_from(p.data.bytes().len()).map_err(|_| emsgsize())?;
        let owner_id = p.owner.as_ref().map_or(0, |s| s.id());
        ListArc::pin_init(
            try_pin_init!(Message {
                links <- ListLinks::new(),
                kind: p.kind,
                sport: p.sport,
                dport: p.dport,
                // INVARIANT: `len` is the payload's length.
                len,
                data: p.data,
                owner_id,
                daddr: p.daddr,
                op: p.op,
                rdma_cookie: p.rdma_cookie,
                seq: AtomicU64::new(0),
                flags: AtomicU8::new(0),
                owner <- new_spinlock!(
                    Owner {
                        sock: p.owner,
                        notifier: p.notifier,
                    },
                    "Message::owner"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// The sequence number.
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// Sets the sequence number (when the message is queued on its connection).
    pub(crate) fn set_seq(&self, seq: u64) {
        self.seq.store(seq, Ordering::Relaxed);
    }

    /// Asks the receiver for an immediate ack.
    pub(crate) fn set_ack_required(&self) {
        self.flags.fetch_or(FLAG_ACK_REQUIRED, Ordering::Relaxed);
    }

    /// Takes the sending socket and the notifier, once: the caller then settles the message.
    pub(crate) fn take_owner(&self) -> Owner {
        let mut o = self.owner.lock();
        Owner {
            sock: o.sock.take(),
            notifier: o.notifier.take(),
        }
    }
}

/// A message received for a socket, on its receive queue.
#[pin_data]
pub(crate) struct Incoming {
    /// The links of the socket's receive queue.
    #[pin]
    links: ListLinks,
    /// Source address.
    pub(crate) saddr: Addr,
    /// Destination address.
    pub(crate) daddr: Addr,
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Sequence number on the connection it came over.
    pub(crate) seq: u64,
    /// Payload length.
    pub(crate) len: u32,
    /// The connection's type of service.
    pub(crate) tos: u8,
    /// The payload.
    pub(crate) data: Arc<Payload>,
    /// When it was queued (nanoseconds of real time), 0 when `SO_TIMESTAMP` was off.
    pub(crate) rx_tstamp: AtomicI64,
    /// When it was queued (`local_clock`), for `SO_RDS_MSG_RXPATH_LATENCY` (C:
    /// `i_rx_lat_trace[RDS_MSG_RX_END]`).
    pub(crate) rx_end: AtomicU64,
    /// The RDMA cookie of an `RDMA_DEST` extension header, 0 for none.
    pub(crate) rdma_cookie: u64,
    /// The r_key of the RDMA operation this message completes (`RDS_EXTHDR_RDMA`).
    pub(crate) rdma_rkey: Option<u32>,
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for Incoming { untracked; }
}
impl_has_list_links! {
    impl HasListLinks<0> for Incoming { self.links }
}
impl_list_item! {
    impl ListItem<0> for Incoming { using ListLinks; }
}

/// The addressing and identity of an incoming message (everything but its payload).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IncomingHeader {
    /// Source address.
    pub(crate) saddr: Addr,
    /// Destination address.
    pub(crate) daddr: Addr,
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Sequence number.
    pub(crate) seq: u64,
    /// The connection's type of service.
    pub(crate) tos: u8,
    /// The registration cookie the sender attached (`RDS_CMSG_RDMA_DEST`), 0 for none.
    pub(crate) rdma_cookie: u64,
    /// The r_key of the RDMA operation the message completes (C: `RDS_EXTHDR_RDMA`).
    pub(crate) rdma_rkey: Option<u32>,
}

impl Incoming {
    /// Builds an incoming message.
    pub(crate) fn new(hdr: IncomingHeader, data: Arc<Payload>) -> Result<ListArc<Self>> {
        let len = u32::try_from(data.bytes().len()).map_err(|_| emsgsize())?;
        ListArc::pin_init(
            try_pin_init!(Incoming {
                links <- ListLinks::new(),
                saddr: hdr.saddr,
                daddr: hdr.daddr,
                sport: hdr.sport,
                dport: hdr.dport,
                seq: hdr.seq,
                len,
                tos: hdr.tos,
                data,
                rx_tstamp: AtomicI64::new(0),
                rx_end: AtomicU64::new(0),
                rdma_cookie: hdr.rdma_cookie,
                rdma_rkey: hdr.rdma_rkey,
            }),
            GFP_KERNEL,
        )
    }
}
