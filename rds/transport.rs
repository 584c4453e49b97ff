// SPDX-License-Identifier: GPL-2.0

//! The interface between the core and its transports, and the registry of the transports.
//!
//! C counterpart: `struct rds_transport` in `net/rds/rds.h` and `net/rds/transport.c`.
//!
//! A transport moves bytes and completions; the core keeps everything else (queues,
//! sequence numbers, acknowledgements, retransmission, congestion, the sockets). The checklist
//! a transport author follows is in `Documentation/design.md`; in short:
//!
//! - [`Transport`] is the transport itself, with the state it keeps for all its connections
//!   (devices, listeners, a model device): the local addresses it serves
//!   ([`Transport::laddr_check`], for `bind` and `SO_RDS_TRANSPORT`), the state it keeps per
//!   connection ([`Transport::conn_alloc`]), and, if it does RDMA, its memory registrations
//!   ([`MrOps`]), which belong to a device, not to a connection. A transport joins the
//!   [`Registry`] when the module loads ([`join`]) and leaves it when its [`Membership`] is
//!   dropped at unload; the core names no transport, it asks the registry.
//! - [`ConnTransport`] is its state of one connection, of the transport's own type: connect,
//!   shut down, and transmit. The transport gets it back by type from a connection of its own
//!   ([`Conn::tstate`]). The core calls `xmit` from one task at a time per connection, in
//!   queue order, in process context; a transport that cannot take (all of) a message now
//!   returns [`XmitError::Full`] with its progress recorded and kicks the connection
//!   ([`crate::conn::Conn::kick`]) when room appears, without sleeping in between.
//! - What arrives goes to [`crate::recv::incoming`] (header bytes, payload, a pre-allocated
//!   [`crate::message::RxSlot`]) in whatever context the transport receives in; an
//!   operation's completion to [`crate::send::op_complete`]; a connection's failure to
//!   [`crate::conn::Conn::drop_connection`]. All three may run in softirq context.

use crate::bindings::net::NetId;
use crate::bindings::sync::ProcessCtx;
use crate::conn::{Conn, ConnKey};
use crate::message::Message;
use crate::proto::{Addr, Region, SockAddr};
use crate::rdma::RegPages;
use crate::socket::Shared;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
};

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

/// A transport: one object per transport, made when the module loads and registered
/// ([`join`]), holding what the transport keeps for all its connections.
pub(crate) trait Transport: Send + Sync {
    /// The name `RDS_INFO_CONNECTIONS` reports (C: `t_name`).
    fn name(&self) -> &'static str;

    /// The number `SO_RDS_TRANSPORT` reports (C: `t_type`, `RDS_TRANS_*` of
    /// [`crate::proto`]).
    fn kind(&self) -> i32;

    /// Whether the transport serves the local address `addr` (with IPv6 scope `scope_id`) in
    /// `net`, so that a socket may bind it (C: `laddr_check`).
    fn laddr_check(&self, net: NetId, addr: &Addr, scope_id: u32, ctx: &ProcessCtx) -> bool;

    /// The transport's state for a new connection (C: `conn_alloc`), of the transport's own
    /// type (which [`Conn::tstate`] gives back); it may keep a reference to the transport.
    fn conn_alloc(
        self: ArcBorrow<'_, Self>,
        key: &ConnKey,
        ctx: &ProcessCtx,
    ) -> Result<Arc<dyn ConnTransport>>;

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

    /// Whether a connection to an address of this host goes over loopback instead (C:
    /// `t_prefer_loopback`, which TCP sets): a socket of this transport sending to a
    /// destination some transport serves locally gets a loopback connection.
    fn prefers_loopback(&self) -> bool {
        false
    }

    /// Whether a connection may have several paths (C: `t_mp_capable`, which TCP sets): up to
    /// [`crate::proto::MPATH_MAX`], negotiated by the probe ping, each a connection of its own
    /// ([`crate::conn::ConnKey::path`]) that the transport connects and accepts separately.
    fn mp_capable(&self) -> bool {
        false
    }

    /// Whether a connection's peer numbers its messages in increasing order within one
    /// incarnation of the connection (IB/iWARP: a QP), so that an old sequence number
    /// without `RDS_FLAG_RETRANSMITTED` is a replay, dropped and counted
    /// (`rs_recv_drop_replay`) rather than delivered again as C does. A reset starts a new
    /// incarnation, whose first message may start over (a restarted peer).
    fn refuses_replays(&self) -> bool {
        false
    }

    /// The transport's memory-registration operations; `None` when it cannot do RDMA.
    fn mr_ops(&self) -> Option<&dyn MrOps> {
        None
    }

    /// The type of service a socket's `SIOCRDSSETTOS` value `tos` maps to (C:
    /// `get_tos_map`); `None` when the transport has no TOS map (the ioctl then fails with
    /// `ENOIOCTLCMD`).
    fn tos_map(&self, _tos: u8) -> Option<u8> {
        None
    }

    /// Whether the transport sends `MSG_ZEROCOPY` messages (C lets TCP only).
    fn zerocopy(&self) -> bool {
        false
    }

    /// Whether the transport hands a payload's pages to the network by reference (TCP): a
    /// payload of more than a page sent by one of its sockets is then built in pages of its
    /// own, which it can hand over, rather than in kernel buffers, which it would copy.
    fn payload_in_pages(&self) -> bool {
        false
    }

    /// Whether `xmit` carries a message with operation `op` on `conn` (a transport may
    /// register memory for its peers, and run some operations, before it runs all of them; a
    /// device may lack some).
    fn runs_op(&self, _conn: &Conn, _op: &crate::rdma::RdmaOp, _ctx: &ProcessCtx) -> bool {
        self.mr_ops().is_some()
    }
}

/// A transport's state of one connection. The core keeps it as a trait object; the transport
/// gets its own type back with [`Conn::tstate`].
pub(crate) trait ConnTransport: Send + Sync + core::any::Any {
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

    /// Whether the connection is lossless now: a message handed over is with its receiver when
    /// the call returns, and nothing can be lost, reordered, duplicated or corrupted on the way
    /// (loopback, outside its fault modes). The core then delivers plain messages (no RDMA or
    /// atomic operation) itself ([`crate::recv::deliver`]), with no header, no
    /// acknowledgement and no retransmit list, settling each with its sender as it goes; a
    /// sender with nothing ahead of it on the connection delivers its message in `sendmsg`
    /// ([`Conn::send_now`]). Messages with an operation still go through `xmit`.
    fn lossless(&self) -> bool {
        false
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

    /// The multipath handshake of the connection whose path 0 is `base` completed (process
    /// context): the paths may be set straight.
    fn paths_known(&self, _base: &Arc<Conn>, _ctx: &ProcessCtx) {}

    /// What `RDS_INFO_TCP_SOCKETS` reports of the connection's socket (`None`: no TCP socket;
    /// process context: `getsockopt`).
    fn stream_info(&self) -> Option<crate::proto::TcpSockInfo> {
        None
    }
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
    /// KiB of receive pages kept spare for the receives (C: its frag cache's,
    /// `i_cache_allocs`).
    pub(crate) cache_kib: u32,
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
    /// Registers the pages of `req`; the handle owns them from now on.
    fn register(&self, req: RegRequest, ctx: &ProcessCtx) -> Result<Arc<dyn MrHandle>>;

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

/// How many transports the registry holds (loopback, IB, TCP, and one to spare).
const MAX_TRANSPORTS: usize = 4;

/// The transports the module has, in the order they joined (C: `transports[]` under
/// `rds_trans_sem`). A socket binds to the first that serves its address
/// ([`Registry::preferred`]); `SO_RDS_TRANSPORT` asks for one by number
/// ([`Registry::by_kind`]).
///
/// Lock order: `list` is a leaf, taken in process context only.
#[pin_data]
pub(crate) struct Registry {
    #[pin]
    list: Mutex<[Option<Arc<dyn Transport>>; MAX_TRANSPORTS]>,
    /// Some registered transport carries congestion maps (read in any context).
    cong_maps: AtomicBool,
}

impl Registry {
    /// No transports yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            list <- new_mutex!([const { None }; MAX_TRANSPORTS], "Registry::list"),
            cong_maps: AtomicBool::new(false),
        })
    }

    /// The transport of a socket bound to `addr` in `net` (C: `rds_trans_get_preferred`): the
    /// first one that serves the address. (C names loopback here; its `laddr_check` takes the
    /// loopback addresses, which no other transport serves.)
    pub(crate) fn preferred(
        &self,
        net: NetId,
        addr: &SockAddr,
        ctx: &ProcessCtx,
    ) -> Option<Arc<dyn Transport>> {
        self.list
            .lock()
            .iter()
            .flatten()
            .find(|t| t.laddr_check(net, &addr.addr, addr.scope_id, ctx))
            .cloned()
    }

    /// The transport numbered `kind` (C: `rds_trans_get`), if it is registered.
    pub(crate) fn by_kind(&self, kind: i32) -> Option<Arc<dyn Transport>> {
        self.list
            .lock()
            .iter()
            .flatten()
            .find(|t| t.kind() == kind)
            .cloned()
    }

    /// Whether some registered transport carries congestion maps (any context).
    pub(crate) fn ships_cong_maps(&self) -> bool {
        self.cong_maps.load(Ordering::Acquire)
    }

    fn update_locked(&self, list: &[Option<Arc<dyn Transport>>]) {
        let any = list.iter().flatten().any(|t| t.sends_cong_maps());
        self.cong_maps.store(any, Ordering::Release);
    }
}

/// A transport's membership in the core's [`Registry`]: it leaves when this is dropped
/// (module unload, once no socket and no connection uses it).
pub(crate) struct Membership {
    shared: Arc<Shared>,
    transport: Arc<dyn Transport>,
}

/// Adds `transport` to the core's registry (module load); `EBUSY` when the registry is full.
pub(crate) fn join(shared: &Arc<Shared>, transport: Arc<dyn Transport>) -> Result<Membership> {
    let reg = &shared.transports;
    let mut list = reg.list.lock();
    let free = list.iter_mut().find(|t| t.is_none()).ok_or(EBUSY)?;
    *free = Some(transport.clone());
    reg.update_locked(&*list);
    drop(list);
    Ok(Membership {
        shared: shared.clone(),
        transport,
    })
}

impl Drop for Membership {
    fn drop(&mut self) {
        let reg = &self.shared.transports;
        let mut list = reg.list.lock();
        let gone = list
            .iter_mut()
            .find(|t| {
                t.as_ref()
                    .is_some_and(|t| core::ptr::addr_eq(&**t, &*self.transport))
            })
            .and_then(Option::take);
        reg.update_locked(&*list);
        drop(list);
        drop(gone);
    }
}
