// SPDX-License-Identifier: GPL-2.0

//! The interface between the core and its transports.
//!
//! C counterpart: `struct rds_transport` in `net/rds/rds.h` and `net/rds/transport.c`.
//!
//! A transport moves bytes and completions; the core keeps everything else (queues,
//! sequence numbers, acknowledgements, retransmission, congestion, the sockets). The checklist
//! a transport author follows is in `Documentation/design.md`; in short:
//!
//! - [`Transport`] is the transport itself (a `'static` object): the local addresses it
//!   serves ([`Transport::laddr_check`], for `bind` and `SO_RDS_TRANSPORT`), the state it
//!   keeps per connection ([`Transport::conn_alloc`]), and, if it does RDMA, its memory
//!   registrations ([`MrOps`]), which belong to a device, not to a connection.
//! - [`ConnTransport`] is its state of one connection: connect, shut down, and transmit.
//!   The core calls `xmit` from one task at a time per connection, in queue order, in process
//!   context; a transport that cannot take (all of) a message now returns
//!   [`XmitError::Full`] with its progress recorded and kicks the connection
//!   ([`crate::conn::Conn::kick`]) when room appears, without sleeping in between.
//! - What arrives goes to [`crate::recv::incoming`] (header bytes, payload, a pre-allocated
//!   [`crate::message::RxSlot`]) in whatever context the transport receives in; an
//!   operation's completion to [`crate::send::op_complete`]; a connection's failure to
//!   [`crate::conn::Conn::drop_connection`]. All three may run in softirq context.

use crate::bindings::net::NetId;
use crate::bindings::sync::ProcessCtx;
use crate::conn::{Conn, ConnKey};
use crate::message::Message;
use crate::proto::{Addr, Region};
use crate::rdma::RegPages;
use crate::socket::Shared;
use kernel::{prelude::*, sync::Arc};

/// Why a transport did not take (all of) a message; the core keeps it as the connection's
/// message in transmission, with the progress the transport recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum XmitError {
    /// The transport is full (send ring, credits): it kicks the connection when room
    /// appears.
    Full,
    /// Out of memory or another temporary shortage: the core retries after a pause.
    NoMem,
}

/// How far a transport got with a message (C: `cp_xmit_rdma_sent`, `cp_xmit_hdr_off`,
/// `cp_xmit_data_off`); zero for a message not started. The transport advances it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct XmitProgress {
    /// The message's RDMA or atomic operation has been posted.
    pub(crate) op_sent: bool,
    /// Payload bytes (or header-and-fragment units, as the transport counts) sent so far.
    pub(crate) sent: usize,
}

/// A transport.
pub(crate) trait Transport: Send + Sync {
    /// The name `RDS_INFO_CONNECTIONS` reports (C: `t_name`).
    fn name(&self) -> &'static str;

    /// The number `SO_RDS_TRANSPORT` reports (C: `t_type`).
    fn kind(&self) -> i32;

    /// Whether the transport serves the local address `addr` (with IPv6 scope `scope_id`) in
    /// `net`, so that a socket may bind it (C: `laddr_check`).
    fn laddr_check(&self, net: NetId, addr: &Addr, scope_id: u32, ctx: &ProcessCtx) -> bool;

    /// The transport's state for a new connection (C: `conn_alloc`).
    fn conn_alloc(&self, key: &ConnKey, ctx: &ProcessCtx) -> Result<Arc<dyn ConnTransport>>;

    /// Whether the core sends congestion-map updates over the transport's connections
    /// (loopback shares the maps and needs none).
    fn sends_cong_maps(&self) -> bool;

    /// Whether frames a connection receives were sent by its own local side (loopback: one
    /// connection carries a pair of addresses both ways, and a frame arriving on (L, F) goes
    /// from L to F); otherwise they come from the peer (F to L), as on a network.
    fn loops_back(&self) -> bool {
        false
    }

    /// Whether a connection created by an arriving peer also connects by itself (to send,
    /// and to reconnect after a reset), as C's IB connections do; otherwise only the peer
    /// connects it.
    fn reconnects_passive(&self) -> bool {
        false
    }

    /// The transport's memory-registration operations; `None` when it cannot do RDMA.
    fn mr_ops(&self) -> Option<&'static dyn MrOps> {
        None
    }

    /// Whether `xmit` carries a message with operation `op` on `conn` (a transport may
    /// register memory for its peers, and run some operations, before it runs all of them; a
    /// device may lack some).
    fn runs_op(
        &self,
        _conn: &crate::conn::Conn,
        _op: &crate::rdma::RdmaOp,
        _ctx: &ProcessCtx,
    ) -> bool {
        self.mr_ops().is_some()
    }
}

/// A transport's state of one connection.
pub(crate) trait ConnTransport: Send + Sync {
    /// Starts connecting (process context). The transport then calls
    /// [`Conn::connect_complete`] (possibly before returning) or
    /// [`Conn::drop_connection`]; an error here means the attempt did not start (the core
    /// schedules a reconnect).
    fn connect(&self, conn: &Arc<Conn>, ctx: &ProcessCtx) -> Result;

    /// Takes the connection down (process context, no `xmit` running or starting): stop
    /// posting, wait for the transport's work on the connection to finish (completions
    /// flushed, frames in flight given up), so that afterwards nothing of it is in flight.
    /// The core then resets the path.
    fn shutdown(&self, conn: &Arc<Conn>, ctx: &ProcessCtx);

    /// Whether new messages may be handed to `xmit` now (a test hook holds them back).
    fn xmit_ready(&self) -> bool {
        true
    }

    /// Sends `msg` (process context): its RDMA or atomic operation first (once, noted in
    /// `progress.op_sent`), then the header and payload, unless the operation is silent and
    /// there is nothing else to say. `Ok` when all of it was handed over; the message stays on
    /// the retransmit list until acknowledged.
    fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        ctx: &ProcessCtx,
    ) -> Result<(), XmitError>;

    /// The end of a drain (C: `xmit_path_complete`).
    fn xmit_complete(&self, _conn: &Arc<Conn>, _ctx: &ProcessCtx) {}

    /// What `RDS_INFO_IB_CONNECTIONS` reports of the connection (`None`: not an IB
    /// connection).
    fn rdma_info(&self) -> Option<RdmaInfo> {
        None
    }

    /// The transport's own type, for its callbacks to find their state.
    fn as_any(&self) -> &dyn core::any::Any;
}

/// An RDMA connection's facts for `RDS_INFO_IB_CONNECTIONS` (C: `rds_ib_conn_info_visitor`);
/// the sizes and GIDs are zero while it is not connected.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RdmaInfo {
    /// Source GID.
    pub(crate) src_gid: [u8; 16],
    /// Destination GID.
    pub(crate) dst_gid: [u8; 16],
    /// Send work requests.
    pub(crate) max_send_wr: u32,
    /// Receive work requests.
    pub(crate) max_recv_wr: u32,
    /// Scatter/gather entries of a send (the device's, at most 8, as C reports).
    pub(crate) max_send_sge: u32,
    /// Service level.
    pub(crate) sl: u8,
    /// Registrations the connection's device can hold (C: its 1 MiB pool's size).
    pub(crate) mr_max: u32,
    /// Pages one registration may span (C: the 1 MiB pool's).
    pub(crate) mr_size: u32,
}

/// A request to register user memory for remote access.
pub(crate) struct RegRequest {
    /// The owner's namespace.
    pub(crate) net: NetId,
    /// The owner's bound address: RDMA to the registration must come for it.
    pub(crate) laddr: Addr,
    /// The pinned pages (the user range rounded out to whole pages) and their charge.
    pub(crate) pages: RegPages,
    /// The user range.
    pub(crate) addr: u64,
    /// Its length.
    pub(crate) len: u64,
    /// Peers may write it (`RDS_RDMA_READWRITE`); otherwise only read it.
    pub(crate) remote_write: bool,
}

/// What a transport must do for memory registrations. The core pins and accounts the
/// memory and keeps the sockets' registries; the transport (its device) makes the
/// registration usable by peers, under an r_key it chooses, and unusable again. A
/// registration belongs to the device, not to a connection: it is usable on every connection
/// of the transport, and survives reconnects.
pub(crate) trait MrOps: Send + Sync {
    /// Registers the pages of `req`; the handle owns them from now on. `shared` is the core's
    /// state, which holds the transports' own.
    fn register(
        &self,
        shared: &Shared,
        req: RegRequest,
        ctx: &ProcessCtx,
    ) -> Result<Arc<dyn MrHandle>>;

    /// Releases registrations that are freed but not yet recycled (`RDS_FREE_MR` with cookie
    /// 0).
    fn flush(&self, ctx: &ProcessCtx);
}

/// A registration, as its transport keeps it. Dropping the handle revokes it: when the drop
/// returns, no new remote access can reach the memory (an access already executing may
/// finish); the pages are unpinned once nothing can reach them any more, which may be later
/// (an invalidation completing asynchronously). Any context may drop it.
pub(crate) trait MrHandle: Send + Sync {
    /// The r_key.
    fn rkey(&self) -> u32;

    /// The zero-based addresses a peer uses (`region.offset` is the cookie's offset).
    fn region(&self) -> Region;
}
