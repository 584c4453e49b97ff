// SPDX-License-Identifier: GPL-2.0

//! The `AF_RDS` socket family.
//!
//! C counterpart: `net/rds/af_rds.c` (`rds_create`, `rds_release`, `rds_connect`,
//! `rds_getname`, `rds_setsockopt`, `rds_getsockopt`, `rds_ioctl`) and `net/rds/bind.c`
//! (`rds_bind`).
//!
//! RDS sockets are `SOCK_SEQPACKET` with protocol 0; `socket(2)` with any other type or protocol
//! fails with `ESOCKTNOSUPPORT`, as in C RDS. Address checks and their errnos come from
//! [`crate::proto`], which mirrors C's. Sending is in [`crate::send`], receiving and `poll` in
//! [`crate::recv`], the `RDS_INFO_*` options in [`crate::info`].

use crate::bind::{BindKey, BindTable};
use crate::bindings::net::{
    eaddrnotavail, enoprotoopt, enotconn, eopnotsupp, eprototype, errno, esocktnosupport, Family,
    FamilyTables, MsgHdr, NetId, OptOut, OptVal, PollCtx, Sock, SockFlag, SockRef, WaitOutcome,
    GETNAME_LEN, SOCK_SEQPACKET,
};
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::bindings::sys::{self, impl_delayed_work_item, DelayedWork, NetExit, OwnedQueue, Work};
use crate::cong::{CongRef, CongTable, NetCong};
use crate::conn::{Conn, ConnTable};
use crate::message::{Message, MsgPool};
use crate::proto::{
    check_bind_scope, cookie_key, encode_sockaddr, encode_unbound_local, is_info_option,
    parse_bind, parse_connect, parse_send_dest, AddrError, BarrierArgs, BarrierState, FreeMrArgs,
    GetMrArgs, GetMrForDestArgs, RecvAccount, SockAddr, ZcRing, BARRIER_ARGS_LEN, BARRIER_FLAGS,
    FREE_MR_ARGS_LEN, GET_MR_ARGS_LEN, GET_MR_FOR_DEST_ARGS_LEN, RDS_BARRIER, RDS_CANCEL_SENT_TO,
    RDS_CONG_MONITOR, RDS_FREE_MR, RDS_GET_MR, RDS_GET_MR_FOR_DEST, RDS_RDMA_DONTWAIT, RDS_RECVERR,
    RDS_TRANS_COUNT, RDS_TRANS_NONE, RDS_TRANS_TCP, RX_TRACE_MAX, RX_TRACE_SO_LEN, SIOCRDSGETTOS,
    SIOCRDSSETTOS, SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY,
    SO_RDS_TRANSPORT, SO_TIMESTAMP_NEW, SO_TIMESTAMP_OLD,
};
use crate::rdma::{Mr, Notifier, RdmaOwner, Trackers};
use crate::transport::{Registry, Transport};
use crate::{info, recv, send};
use core::sync::atomic::{AtomicBool, AtomicU64};
use kernel::{
    c_str,
    list::List,
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, ArcBorrow, Mutex},
    uaccess::{UserPtr, UserSlice},
};

pub(crate) use crate::proto::AF_RDS;

/// The RDS socket family.
pub(crate) struct Rds;

/// State shared by all RDS sockets and the core.
///
/// Lock order: `sockets` before `RdsSocket::inner`; the tables' own locks are described on
/// their types.
#[pin_data]
pub(crate) struct Shared {
    /// Bound sockets.
    #[pin]
    pub(crate) binds: BindTable,
    /// Connections.
    #[pin]
    pub(crate) conns: ConnTable,
    /// Congestion maps and monitors.
    #[pin]
    pub(crate) cong: CongTable,
    /// Spare memory for incoming messages.
    #[pin]
    pub(crate) rx_slots: crate::message::SlotCache,
    /// The transports.
    #[pin]
    pub(crate) transports: Registry,
    /// Every open socket, by identity (for `RDS_INFO_SOCKETS` and friends).
    #[pin]
    pub(crate) sockets: Mutex<RBTree<usize, SockRef<Rds>>>,
    /// The workqueue of the connections' and the core's work items.
    pub(crate) wq: OwnedQueue,
    /// The congestion work ([`crate::cong`]).
    #[pin]
    pub(crate) cong_work: Work<Shared, 0>,
    /// The reaper of idle connections and unused congestion maps.
    #[pin]
    reap_work: DelayedWork<Shared>,
}

impl_delayed_work_item!(Shared, reap_work, Shared::reap);

impl Shared {
    /// Creates the shared state of the family.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let wq = OwnedQueue::new(c_str!("rds_rs"))?;
        Arc::pin_init(
            pin_init!(Self {
                binds <- BindTable::new(),
                conns <- ConnTable::new(),
                cong <- CongTable::new(),
                rx_slots <- crate::message::SlotCache::new(),
                transports <- Registry::new(),
                sockets <- new_mutex!(RBTree::new(), "Shared::sockets"),
                wq,
                cong_work <- crate::cong::new_cong_work(),
                reap_work <- DelayedWork::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Starts the reaper.
    pub(crate) fn start_reaper(self: &Arc<Self>) {
        DelayedWork::queue(&self.wq, self.clone(), sys::reap_interval());
    }

    /// Stops the reaper (module unload).
    pub(crate) fn stop_reaper(self: &Arc<Self>, ctx: &ProcessCtx) {
        DelayedWork::cancel(self, ctx);
    }

    /// The reaper (a delayed work that requeues itself): connections idle for the idle time
    /// go, connections stuck connecting start over, then congestion maps nobody uses go.
    fn reap(this: Arc<Self>, ctx: &ProcessCtx) {
        let now = sys::jiffies();
        let before = now.wrapping_sub(sys::conn_idle_jiffies());
        this.conns.reap(before, ctx);
        this.conns
            .stuck(now.wrapping_sub(sys::ms_to_jiffies(CONNECT_TIMEOUT_MS)));
        this.cong.reap();
        let delay = sys::reap_interval();
        let shared = this.clone();
        DelayedWork::queue(&shared.wq, this, delay);
    }
}

/// How long a connection may stay connecting before it starts over (rdma_cm's address and
/// route resolution take at most 5 s each; a live peer answers a request within seconds).
const CONNECT_TIMEOUT_MS: u32 = 30_000;

impl NetExit for Shared {
    fn net_exit(&self, net: NetId, ctx: &ProcessCtx) {
        self.conns.net_exit(net, ctx);
        self.cong.net_exit(net);
    }
}

/// The state of one RDS socket.
///
/// Lock order: `inner` before `data`; `data` and `mrs` are leaves (nothing is taken inside
/// them). Dropping the state never sleeps (it may happen in softirq context, when a message's
/// reference to its sender is the last).
#[pin_data]
pub(crate) struct RdsSocket {
    /// The core's shared state.
    pub(crate) shared: Arc<Shared>,
    /// The congestion events of the socket's namespace.
    pub(crate) netcong: Arc<NetCong>,
    /// What the socket's RDMA operations and registrations share with it.
    pub(crate) rdma: RdmaOwner,
    /// The spares of the messages the socket sends.
    pub(crate) pool: Arc<MsgPool>,
    /// Bytes of messages sent and not yet settled (C: `rs_snd_bytes`); changed under `data`,
    /// read without it by a send that checks for room.
    pub(crate) snd_bytes: AtomicU64,
    /// A send saw congestion; `poll` also waits on the congestion queue (C:
    /// `rs_seen_congestion`, read without a lock there too).
    pub(crate) seen_congestion: AtomicBool,
    /// Addressing and configuration (C: what `lock_sock` protects).
    #[pin]
    pub(crate) inner: Mutex<SockInner>,
    /// The data path (C: `rs_lock` and `rs_recv_lock`); softirq context takes it too.
    #[pin]
    pub(crate) data: SpinLockBh<SockData>,
    /// The socket's memory registrations by r_key (C: `rs_rdma_keys`); the receive path frees
    /// use-once registrations from softirq context.
    #[pin]
    pub(crate) mrs: SpinLockBh<RBTree<u32, KBox<Mr>>>,
    /// The registry node, reserved at create and used once the socket exists.
    #[pin]
    registry_node: Mutex<Option<RBTreeNodeReservation<usize, SockRef<Rds>>>>,
}

/// The fields of [`RdsSocket`] protected by its mutex (C's `lock_sock`).
pub(crate) struct SockInner {
    /// The binding, once bound (C: `rs_bound_addr`, `rs_bound_port`).
    pub(crate) bound: Option<BindKey>,
    /// The default destination set by `connect` (C: `rs_conn_addr`, `rs_conn_port`).
    pub(crate) conn: Option<SockAddr>,
    /// The IPv6 scope id of the bound address, or of a link-local destination set before
    /// binding (C: `rs_bound_scope_id`).
    pub(crate) scope_id: u32,
    /// The transport, chosen at bind (C: `rs_transport`).
    pub(crate) transport: Option<Arc<dyn Transport>>,
    /// The type of service (C: `rs_tos`); only a transport with a TOS map can set it.
    pub(crate) tos: u8,
    /// The connection of the last send (C: `rs_conn`); over a transport with multipath, the
    /// path it took.
    pub(crate) conn_cache: Option<Arc<Conn>>,
    /// The destination (address, type of service) whose path 0 the socket took before the
    /// path count was known, its port hashing elsewhere: it stays on path 0 for it, so that
    /// its later messages never overtake those on another path (C moves to the hashed path,
    /// and they may). One destination is remembered, the last.
    pub(crate) mpath_fallback: Option<(crate::proto::Addr, u8)>,
}

impl SockInner {
    fn new() -> Self {
        Self {
            bound: None,
            conn: None,
            scope_id: 0,
            transport: None,
            tos: 0,
            conn_cache: None,
            mpath_fallback: None,
        }
    }
}

/// The fields of [`RdsSocket`] protected by its spinlock.
pub(crate) struct SockData {
    /// Messages received and not yet read (C: `rs_recv_queue`).
    pub(crate) recv_queue: List<Message, 1>,
    /// Completion notifications not yet read (C: `rs_notify_queue`).
    pub(crate) notify_queue: List<Notifier>,
    /// Operation ids and high-water marks per destination.
    pub(crate) trackers: Trackers,
    /// The bytes on the receive queue and whether they congest the port (C: `rs_rcv_bytes`,
    /// `rs_congested`).
    pub(crate) account: RecvAccount,
    /// The socket is closing: nothing more is queued on it (C: `SOCK_DEAD`).
    pub(crate) dead: bool,
    /// `RDS_RECVERR` (C: `rs_recverr`).
    pub(crate) recverr: bool,
    /// `RDS_CONG_MONITOR` (C: `rs_cong_monitor`).
    pub(crate) cong_monitor: bool,
    /// Monitor bits of ports that became uncongested, to report (C: `rs_cong_notify`).
    pub(crate) cong_notify: u64,
    /// Monitor bits of ports a send was refused on (C: `rs_cong_mask`).
    pub(crate) cong_mask: u64,
    /// The congestion generation `poll` last reported (C: `rs_cong_track`).
    pub(crate) cong_track: u64,
    /// The congestion map of the bound address and the bound port.
    pub(crate) cong: Option<(CongRef, u16)>,
    /// `SO_RDS_MSG_RXPATH_LATENCY`: how many trace points to report (C: `rs_rx_traces`).
    pub(crate) rx_traces: u8,
    /// Which trace points (C: `rs_rx_trace`).
    pub(crate) rx_trace_pos: [u8; 3],
    /// A copy of `SockInner::scope_id`, for the sender addresses `recvmsg` reports.
    pub(crate) scope_id: u32,
    /// Zero-copy completions to report, and the places zero-copy sends in flight took (C:
    /// `rs_zcookie_queue`); the ring's storage is `zc_buf`, allocated by the first zero-copy
    /// send.
    pub(crate) zc: ZcRing,
    /// The storage of `zc`: empty, or [`ZC_MAX`] entries.
    pub(crate) zc_buf: KVec<u32>,
}

/// How many zero-copy sends a socket may have in flight or completed and not yet reported
/// (C keeps any number): one more fails with `ENOBUFS` until `recvmsg` reads completions.
pub(crate) const ZC_MAX: usize = 1024;

impl SockData {
    fn new() -> Self {
        Self {
            recv_queue: List::new(),
            notify_queue: List::new(),
            trackers: Trackers::new(),
            account: RecvAccount::default(),
            dead: false,
            recverr: false,
            cong_monitor: false,
            cong_notify: 0,
            cong_mask: 0,
            cong_track: 0,
            cong: None,
            rx_traces: 0,
            rx_trace_pos: [0; 3],
            zc: ZcRing::new(),
            zc_buf: KVec::new(),
            scope_id: 0,
        }
    }
}

/// Reads a boolean option as C's `rds_set_bool_option`: at least an `int`, non-zero is true.
fn read_bool(val: &OptVal) -> Result<bool> {
    if val.len() < core::mem::size_of::<i32>() {
        return Err(EINVAL);
    }
    Ok(val.read_int()? != 0)
}

static RDS_TABLES: FamilyTables = FamilyTables::new();

/// The errno of an address rule.
pub(crate) fn addr_error(e: AddrError) -> Error {
    errno(e.errno())
}

impl Family for Rds {
    type Shared = Shared;
    type Socket = RdsSocket;
    const FAMILY: u16 = AF_RDS;
    const NAME: &'static CStr = c_str!("RDS_RS");

    fn tables() -> &'static FamilyTables {
        &RDS_TABLES
    }

    fn create(
        shared: ArcBorrow<'_, Shared>,
        net: NetId,
        sock_type: i32,
        protocol: i32,
        _kern: bool,
        ctx: &ProcessCtx,
    ) -> Result<Pin<KBox<RdsSocket>>> {
        if sock_type != SOCK_SEQPACKET || protocol != 0 {
            return Err(esocktnosupport());
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let netcong = shared.cong.net(net)?;
        let rdma = RdmaOwner::new(ctx)?;
        let pool = MsgPool::new()?;
        KBox::pin_init(
            pin_init!(RdsSocket {
                shared: shared.into(),
                netcong,
                rdma,
                pool,
                snd_bytes: AtomicU64::new(0),
                seen_congestion: AtomicBool::new(false),
                inner <- new_mutex!(SockInner::new(), "RdsSocket::inner"),
                data <- new_spinlock_bh!(SockData::new(), "RdsSocket::data"),
                mrs <- new_spinlock_bh!(RBTree::new(), "RdsSocket::mrs"),
                registry_node <- new_mutex!(Some(node), "RdsSocket::registry_node"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    fn created(sock: &Sock<Rds>, _ctx: &ProcessCtx) {
        let s = sock.state();
        if let Some(node) = s.registry_node.lock().take() {
            let old = s
                .shared
                .sockets
                .lock()
                .insert(node.into_node(sock.id(), sock.to_ref()));
            drop(old);
        }
    }

    fn release(sock: &Sock<Rds>, ctx: &ProcessCtx) {
        let s = sock.state();
        s.data.lock().dead = true;
        s.clear_recv_queue(ctx);
        s.netcong.remove_monitor(sock.id());
        let (bound, cache) = {
            let mut inner = s.inner.lock();
            let bound = inner.bound.take();
            if let Some(key) = &bound {
                s.shared.binds.unbind(key);
            }
            (bound, inner.conn_cache.take())
        };
        drop(cache);
        if let Some(key) = bound {
            send::drop_to(sock, key.addr.addr, None);
        }
        s.drop_mrs(ctx);
        let notes = core::mem::replace(&mut s.data.lock().notify_queue, List::new());
        drop(notes);
        // The messages it sent and that come back later are freed.
        s.pool.close();
        let me = s.shared.sockets.lock().remove(&sock.id());
        drop(me);
    }

    fn bind(sock: &Sock<Rds>, addr: &[u8], ctx: &ProcessCtx) -> Result {
        let s = sock.state();
        let addr = parse_bind(addr).map_err(addr_error)?;
        let mut inner = s.inner.lock();
        // No rebinding.
        if inner.bound.is_some() {
            return Err(EINVAL);
        }
        // A connected socket binds only within the scope of its destination.
        check_bind_scope(addr.scope_id, inner.conn.is_some(), inner.scope_id)
            .map_err(addr_error)?;
        // The transport: the one `SO_RDS_TRANSPORT` chose, if it serves the address, else
        // the preferred one (C: `rds_trans_get_preferred`).
        let transport = match &inner.transport {
            Some(t) if t.laddr_check(sock.net(), &addr.addr, addr.scope_id, ctx) => t.clone(),
            Some(_) => return Err(eaddrnotavail()),
            None => s
                .shared
                .transports
                .preferred(sock.net(), &addr, ctx)
                .ok_or_else(eaddrnotavail)?,
        };
        let map = s.shared.cong.get(sock.net(), addr.addr)?;
        let key = s.shared.binds.bind(sock.net(), addr, sock.to_ref())?;
        inner.bound = Some(key);
        inner.scope_id = addr.scope_id;
        inner.transport = Some(transport);
        let mut d = s.data.lock();
        d.cong = Some((map, key.addr.port));
        d.scope_id = addr.scope_id;
        Ok(())
    }

    fn connect(sock: &Sock<Rds>, addr: &[u8], _ctx: &ProcessCtx) -> Result {
        let s = sock.state();
        let mut inner = s.inner.lock();
        let bound = inner.bound.map(|k| k.addr);
        let conn = parse_connect(addr, bound).map_err(addr_error)?;
        if conn.scope_id != 0 {
            inner.scope_id = conn.scope_id;
            s.data.lock().scope_id = conn.scope_id;
        }
        inner.conn = Some(conn);
        Ok(())
    }

    fn getname(sock: &Sock<Rds>, peer: bool, out: &mut [u8; GETNAME_LEN]) -> Result<usize> {
        let inner = sock.state().inner.lock();
        let len = if peer {
            let conn = inner.conn.ok_or_else(enotconn)?;
            encode_sockaddr(
                &SockAddr {
                    scope_id: inner.scope_id,
                    ..conn
                },
                out,
            )
        } else {
            match inner.bound {
                Some(key) => encode_sockaddr(&key.addr, out),
                None => encode_unbound_local(inner.conn, out),
            }
        };
        len.ok_or(EINVAL)
    }

    fn setsockopt(
        sock: &Sock<Rds>,
        level: i32,
        optname: i32,
        val: &OptVal,
        ctx: &ProcessCtx,
    ) -> Result {
        let s = sock.state();
        if level != SOL_RDS {
            return Err(enoprotoopt());
        }
        match optname {
            RDS_CANCEL_SENT_TO => cancel_sent_to(sock, val),
            RDS_GET_MR => {
                if val.len() != GET_MR_ARGS_LEN {
                    return Err(EINVAL);
                }
                let mut raw = [0u8; GET_MR_ARGS_LEN];
                val.read_bytes(&mut raw)?;
                let args = GetMrArgs::decode(&raw).ok_or(EINVAL)?;
                s.get_mr(sock, &args, ctx).map(|_| ())
            }
            RDS_GET_MR_FOR_DEST => {
                if val.len() != GET_MR_FOR_DEST_ARGS_LEN {
                    return Err(EINVAL);
                }
                let mut raw = [0u8; GET_MR_FOR_DEST_ARGS_LEN];
                val.read_bytes(&mut raw)?;
                let args = GetMrForDestArgs::decode(&raw).ok_or(EINVAL)?;
                // As in C, the destination is not used: a registration serves every peer.
                s.get_mr(sock, &args.as_get_mr_args(), ctx).map(|_| ())
            }
            RDS_FREE_MR => {
                if val.len() != FREE_MR_ARGS_LEN {
                    return Err(EINVAL);
                }
                let mut raw = [0u8; FREE_MR_ARGS_LEN];
                val.read_bytes(&mut raw)?;
                let args = FreeMrArgs::decode(&raw).ok_or(EINVAL)?;
                if args.cookie == 0 {
                    return s.flush_mrs(ctx);
                }
                // Every free revokes the registration at once (`RDS_RDMA_INVALIDATE` or not):
                // rds-rs keeps no pool of mapped registrations.
                s.free_mr(cookie_key(args.cookie), ctx)
            }
            RDS_BARRIER => barrier(sock, val, ctx),
            RDS_RECVERR => {
                let on = read_bool(val)?;
                s.data.lock().recverr = on;
                Ok(())
            }
            RDS_CONG_MONITOR => {
                let on = read_bool(val)?;
                if on {
                    s.netcong.add_monitor(sock.to_ref())?;
                    s.data.lock().cong_monitor = true;
                } else {
                    s.netcong.remove_monitor(sock.id());
                    let mut d = s.data.lock();
                    d.cong_monitor = false;
                    d.cong_mask = 0;
                    d.cong_notify = 0;
                }
                Ok(())
            }
            SO_RDS_TRANSPORT => {
                let mut inner = s.inner.lock();
                if inner.transport.is_some() {
                    return Err(eopnotsupp());
                }
                if val.len() != core::mem::size_of::<i32>() {
                    return Err(EINVAL);
                }
                let t = val.read_int()?;
                if !(0..RDS_TRANS_COUNT).contains(&t) {
                    return Err(EINVAL);
                }
                // RDS/IB is restricted to the initial network namespace.
                if t != RDS_TRANS_TCP && sock.net() != NetId::init() {
                    return Err(eprototype());
                }
                // C: rds_trans_get (rds-rs has no TCP transport yet).
                let t = s.shared.transports.by_kind(t).ok_or_else(enoprotoopt)?;
                inner.transport = Some(t);
                Ok(())
            }
            SO_TIMESTAMP_OLD | SO_TIMESTAMP_NEW => {
                // C: rds_enable_recvtstamp (note the EFAULT for a wrong length).
                if val.len() != core::mem::size_of::<i32>() {
                    return Err(EFAULT);
                }
                let on = val.read_int()? != 0;
                // `sk_flags` changes under the socket lock, as the socket layer's own do.
                let locked = sock.lock_sock(ctx);
                if optname == SO_TIMESTAMP_NEW {
                    sock.set_flag(&locked, SockFlag::TstampNew, true);
                }
                sock.set_flag(&locked, SockFlag::RcvTstamp, on);
                Ok(())
            }
            SO_RDS_MSG_RXPATH_LATENCY => {
                // C: rds_recv_track_latency, with its EFAULTs for bad arguments (a bad
                // position also switches tracing off).
                if val.len() != RX_TRACE_SO_LEN {
                    return Err(EFAULT);
                }
                let mut trace = [0u8; RX_TRACE_SO_LEN];
                val.read_bytes(&mut trace)?;
                let [n, pos @ ..] = trace;
                if n > RX_TRACE_MAX {
                    return Err(EFAULT);
                }
                let mut d = s.data.lock();
                if pos.iter().take(n as usize).any(|&p| p >= RX_TRACE_MAX) {
                    d.rx_traces = 0;
                    return Err(EFAULT);
                }
                d.rx_traces = n;
                d.rx_trace_pos = pos;
                Ok(())
            }
            _ => Err(enoprotoopt()),
        }
    }

    fn getsockopt(
        sock: &Sock<Rds>,
        level: i32,
        optname: i32,
        out: &OptOut,
        _ctx: &ProcessCtx,
    ) -> Result<i32> {
        let s = sock.state();
        if level != SOL_RDS {
            return Err(enoprotoopt());
        }
        let len = out.len()?;
        if is_info_option(optname) {
            return info::getsockopt(sock, optname, len, out);
        }
        let value = match optname {
            RDS_RECVERR => i32::from(s.data.lock().recverr),
            SO_RDS_TRANSPORT => s
                .inner
                .lock()
                .transport
                .as_ref()
                .map_or(RDS_TRANS_NONE, |t| t.kind()),
            _ => return Err(enoprotoopt()),
        };
        // C compares the signed length with a `size_t`: a negative length passes.
        if (0..core::mem::size_of::<i32>() as i32).contains(&len) {
            return Err(EINVAL);
        }
        out.put_int(value)?;
        Ok(0)
    }

    fn ioctl(sock: &Sock<Rds>, cmd: u32, arg: UserPtr, _ctx: &ProcessCtx) -> Result {
        match cmd {
            SIOCRDSSETTOS => {
                let tos: u8 = UserSlice::new(arg, 1).reader().read()?;
                // Only transports with a TOS map (IB, TCP: the identity) accept a TOS; loopback
                // has none, and an unattached socket has no transport (C: -ENOIOCTLCMD). Once
                // set, or once the socket has a connection, it stays (C: EINVAL).
                let mut inner = sock.state().inner.lock();
                let tos = inner
                    .transport
                    .as_ref()
                    .and_then(|t| t.tos_map(tos))
                    .ok_or(ENOIOCTLCMD)?;
                if inner.tos != 0 || inner.conn_cache.is_some() {
                    return Err(EINVAL);
                }
                inner.tos = tos;
                Ok(())
            }
            SIOCRDSGETTOS => {
                let tos = sock.state().inner.lock().tos;
                UserSlice::new(arg, 1).writer().write(&tos)
            }
            _ => Err(ENOIOCTLCMD),
        }
    }

    fn sendmsg(
        sock: &Sock<Rds>,
        msg: &mut MsgHdr<'_>,
        len: usize,
        ctx: &ProcessCtx,
    ) -> Result<usize> {
        send::sendmsg(sock, msg, len, ctx)
    }

    fn recvmsg(
        sock: &Sock<Rds>,
        msg: &mut MsgHdr<'_>,
        len: usize,
        flags: i32,
        ctx: &ProcessCtx,
    ) -> Result<usize> {
        recv::recvmsg(sock, msg, len, flags, ctx)
    }

    fn poll(sock: &Sock<Rds>, poll: &PollCtx<'_>) -> u32 {
        recv::poll(sock, poll)
    }
}

/// `RDS_CANCEL_SENT_TO` (C: `rds_cancel_sent_to`): drops the socket's queued messages to a
/// `sockaddr_in` or `sockaddr_in6` (the length decides which).
fn cancel_sent_to(sock: &Sock<Rds>, val: &OptVal) -> Result {
    let Some(bound) = sock.state().inner.lock().bound else {
        return Err(enotconn());
    };
    let len = val.len();
    let mut buf = [0u8; SOCKADDR_IN6_LEN];
    let (addr, port) = if len < SOCKADDR_IN_LEN {
        return Err(EINVAL);
    } else if len < SOCKADDR_IN6_LEN {
        let sin = buf.get_mut(..SOCKADDR_IN_LEN).ok_or(EINVAL)?;
        val.read_bytes(sin)?;
        let [_, _, p0, p1, a0, a1, a2, a3, ..] = buf;
        (
            crate::proto::Addr::from_v4([a0, a1, a2, a3]),
            u16::from_be_bytes([p0, p1]),
        )
    } else {
        val.read_bytes(&mut buf)?;
        let [_, _, p0, p1, _, _, _, _, rest @ ..] = buf;
        let mut a = [0u8; 16];
        for (d, s) in a.iter_mut().zip(rest.iter()) {
            *d = *s;
        }
        (crate::proto::Addr(a), u16::from_be_bytes([p0, p1]))
    };
    send::drop_to(sock, bound.addr.addr, Some((addr, port)));
    Ok(())
}

/// `RDS_BARRIER` (rds-rs's extension): reports the high-water mark of the socket's completed
/// RDMA operations to a destination, after waiting (on a blocking socket, without
/// `RDS_RDMA_DONTWAIT`) until it reaches `wait_id`. See `Documentation/rdma.md`.
fn barrier(sock: &Sock<Rds>, val: &OptVal, ctx: &ProcessCtx) -> Result {
    if val.len() != BARRIER_ARGS_LEN {
        return Err(EINVAL);
    }
    let mut raw = [0u8; BARRIER_ARGS_LEN];
    val.read_bytes(&mut raw)?;
    let args = BarrierArgs::decode(&raw).ok_or(EINVAL)?;
    if args.flags & !BARRIER_FLAGS != 0 {
        return Err(EINVAL);
    }
    let dest = parse_send_dest(&args.dest).map_err(addr_error)?;
    let key = (dest.addr, dest.port);
    let s = sock.state();
    let state = |id: u64| -> (u64, BarrierState) { s.data.lock().trackers.barrier(&key, id) };
    let (mut mark, st) = state(args.wait_id);
    let mut result = Ok(());
    match st {
        BarrierState::Reached => {}
        BarrierState::NeverIssued => return Err(EINVAL),
        BarrierState::Pending => {
            if args.flags & RDS_RDMA_DONTWAIT != 0 || sock.nonblocking() {
                result = Err(EAGAIN);
            } else {
                let outcome = sock.wait(
                    sock.rcvtimeo(false),
                    || !matches!(state(args.wait_id).1, BarrierState::Pending),
                    ctx,
                );
                mark = state(args.wait_id).0;
                result = match outcome {
                    WaitOutcome::Ready(_) => Ok(()),
                    WaitOutcome::TimedOut => Err(crate::bindings::net::etimedout()),
                    WaitOutcome::Interrupted => Err(crate::bindings::net::erestartsys()),
                };
            }
        }
    }
    if args.mark_addr != 0 {
        let addr = usize::try_from(args.mark_addr).map_err(|_| EFAULT)?;
        UserSlice::new(addr, 8).writer().write(&mark)?;
    }
    result
}
