// SPDX-License-Identifier: GPL-2.0

//! The `AF_RDS` socket family.
//!
//! C counterpart: `net/rds/af_rds.c` (`rds_create`, `rds_release`, `rds_connect`,
//! `rds_getname`) and `net/rds/bind.c` (`rds_bind`).
//!
//! RDS sockets are `SOCK_SEQPACKET` with protocol 0; `socket(2)` with any other type or protocol
//! fails with `ESOCKTNOSUPPORT`, as in C RDS. Address checks and their errnos come from
//! [`crate::proto`], which mirrors C's.

use crate::bind::{BindKey, BindTable};
use crate::bindings::net::{
    eaddrnotavail, enoprotoopt, enotconn, eopnotsupp, eprototype, errno, esocktnosupport, Family,
    FamilyTables, NetId, OptOut, OptVal, GETNAME_LEN, SOCK_SEQPACKET,
};
use crate::proto::{
    check_bind_scope, encode_sockaddr, encode_unbound_local, parse_bind, parse_connect, AddrError,
    SockAddr,
};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    uaccess::{UserPtr, UserSlice},
};

/// `AF_RDS` from `include/linux/socket.h`.
pub(crate) const AF_RDS: u16 = 21;

/// `SOL_RDS`, the socket option level of RDS (`linux/socket.h`).
const SOL_RDS: i32 = 276;
/// `RDS_RECVERR` (`linux/rds.h`): report send failures as notifications.
const RDS_RECVERR: i32 = 5;
/// `RDS_CONG_MONITOR` (`linux/rds.h`): ask for congestion updates.
const RDS_CONG_MONITOR: i32 = 6;
/// `SO_RDS_TRANSPORT` (`linux/rds.h`): pin the socket to a transport before binding.
const SO_RDS_TRANSPORT: i32 = 8;
/// `RDS_TRANS_TCP`; `RDS_TRANS_IB` is 0 and `RDS_TRANS_GAP` 1.
const RDS_TRANS_TCP: i32 = 2;
/// `RDS_TRANS_COUNT`: transport numbers user space may ask for are below this.
const RDS_TRANS_COUNT: i32 = 3;
/// `RDS_TRANS_NONE` (`~0`): what `SO_RDS_TRANSPORT` reads on a socket with no transport.
const RDS_TRANS_NONE: i32 = -1;
/// `SIOCRDSSETTOS` (`SIOCPROTOPRIVATE`) and `SIOCRDSGETTOS`: the socket's type of service.
const SIOCRDSSETTOS: u32 = 0x89e0;
/// See [`SIOCRDSSETTOS`].
const SIOCRDSGETTOS: u32 = 0x89e1;

/// The transports a socket can be attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TransportKind {
    /// Loopback (`rds_loop`), for loopback addresses. C's `t_type` for it is
    /// `RDS_TRANS_LOOP` (3).
    Loop,
}

impl TransportKind {
    /// The number `getsockopt(SO_RDS_TRANSPORT)` reports (C's `t_type`).
    fn number(self) -> i32 {
        match self {
            TransportKind::Loop => 3,
        }
    }
}

/// The RDS socket family.
pub(crate) struct Rds;

/// State shared by all RDS sockets.
#[pin_data]
pub(crate) struct Shared {
    #[pin]
    binds: BindTable,
}

impl Shared {
    /// Creates the shared state of the family.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(pin_init!(Self { binds <- BindTable::new() }), GFP_KERNEL)
    }
}

/// The state of one RDS socket.
#[pin_data]
pub(crate) struct RdsSocket {
    shared: Arc<Shared>,
    /// Lock order: before `BindTable::bound`.
    #[pin]
    inner: Mutex<SockInner>,
}

/// The fields of [`RdsSocket`] protected by its mutex (C's `lock_sock`).
#[derive(Default)]
struct SockInner {
    /// The binding, once bound (C: `rs_bound_addr`, `rs_bound_port`).
    bound: Option<BindKey>,
    /// The default destination set by `connect` (C: `rs_conn_addr`, `rs_conn_port`).
    conn: Option<SockAddr>,
    /// The IPv6 scope id of the bound address, or of a link-local destination set before
    /// binding (C: `rs_bound_scope_id`).
    scope_id: u32,
    /// The transport, chosen at bind (C: `rs_transport`).
    transport: Option<TransportKind>,
    /// `RDS_RECVERR` (C: `rs_recverr`).
    recverr: bool,
    /// `RDS_CONG_MONITOR` (C: `rs_cong_monitor`).
    cong_monitor: bool,
    /// The type of service (C: `rs_tos`); only a transport with a TOS map can set it.
    tos: u8,
}

/// Reads a boolean option as C's `rds_set_bool_option`: at least an `int`, non-zero is true.
fn read_bool(val: &OptVal) -> Result<bool> {
    if val.len() < core::mem::size_of::<i32>() {
        return Err(EINVAL);
    }
    Ok(val.read_int()? != 0)
}

static RDS_TABLES: FamilyTables = FamilyTables::new();

fn addr_error(e: AddrError) -> Error {
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
        sock_type: i32,
        protocol: i32,
        _kern: bool,
    ) -> Result<Pin<KBox<RdsSocket>>> {
        if sock_type != SOCK_SEQPACKET || protocol != 0 {
            return Err(esocktnosupport());
        }
        KBox::pin_init(
            pin_init!(RdsSocket {
                shared: shared.into(),
                inner <- new_mutex!(SockInner::default(), "RdsSocket::inner"),
            }),
            GFP_KERNEL,
        )
    }

    fn release(socket: Pin<&RdsSocket>) {
        let mut inner = socket.inner.lock();
        if let Some(key) = inner.bound.take() {
            socket.shared.binds.unbind(&key);
        }
    }

    fn bind(socket: Pin<&RdsSocket>, net: NetId, addr: &[u8]) -> Result {
        let addr = parse_bind(addr).map_err(addr_error)?;
        let mut inner = socket.inner.lock();
        // No rebinding.
        if inner.bound.is_some() {
            return Err(EINVAL);
        }
        // A connected socket binds only within the scope of its destination.
        check_bind_scope(addr.scope_id, inner.conn.is_some(), inner.scope_id)
            .map_err(addr_error)?;
        // The transports: loopback serves loopback addresses (as C's rds_trans_get_preferred
        // picks rds_loop for them); no other transport is loaded yet.
        if !addr.addr.is_loopback() {
            return Err(eaddrnotavail());
        }
        let key = socket.shared.binds.bind(net, addr)?;
        inner.bound = Some(key);
        inner.scope_id = addr.scope_id;
        inner.transport = Some(TransportKind::Loop);
        Ok(())
    }

    fn connect(socket: Pin<&RdsSocket>, addr: &[u8]) -> Result {
        let mut inner = socket.inner.lock();
        let bound = inner.bound.map(|k| k.addr);
        let conn = parse_connect(addr, bound).map_err(addr_error)?;
        if conn.scope_id != 0 {
            inner.scope_id = conn.scope_id;
        }
        inner.conn = Some(conn);
        Ok(())
    }

    fn getname(socket: Pin<&RdsSocket>, peer: bool, out: &mut [u8; GETNAME_LEN]) -> Result<usize> {
        let inner = socket.inner.lock();
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
        socket: Pin<&RdsSocket>,
        net: NetId,
        level: i32,
        optname: i32,
        val: &OptVal,
    ) -> Result {
        if level != SOL_RDS {
            return Err(enoprotoopt());
        }
        match optname {
            RDS_RECVERR => {
                let on = read_bool(val)?;
                socket.inner.lock().recverr = on;
                Ok(())
            }
            RDS_CONG_MONITOR => {
                let on = read_bool(val)?;
                socket.inner.lock().cong_monitor = on;
                Ok(())
            }
            SO_RDS_TRANSPORT => {
                let inner = socket.inner.lock();
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
                if t != RDS_TRANS_TCP && net != NetId::init() {
                    return Err(eprototype());
                }
                // No IB or TCP transport is loaded in rds_rs yet (C: rds_trans_get fails).
                Err(enoprotoopt())
            }
            _ => Err(enoprotoopt()),
        }
    }

    fn getsockopt(socket: Pin<&RdsSocket>, level: i32, optname: i32, out: &OptOut) -> Result {
        if level != SOL_RDS {
            return Err(enoprotoopt());
        }
        let len = out.len()?;
        let value = {
            let inner = socket.inner.lock();
            match optname {
                RDS_RECVERR => i32::from(inner.recverr),
                SO_RDS_TRANSPORT => inner
                    .transport
                    .map_or(RDS_TRANS_NONE, TransportKind::number),
                _ => return Err(enoprotoopt()),
            }
        };
        if len < core::mem::size_of::<i32>() as i32 {
            return Err(EINVAL);
        }
        out.put_int(value)
    }

    fn ioctl(socket: Pin<&RdsSocket>, cmd: u32, arg: UserPtr) -> Result {
        match cmd {
            SIOCRDSSETTOS => {
                let _tos: u8 = UserSlice::new(arg, 1).reader().read()?;
                // Only transports with a TOS map (IB, TCP) accept a TOS; loopback has none,
                // and an unattached socket has no transport (C: -ENOIOCTLCMD).
                Err(ENOIOCTLCMD)
            }
            SIOCRDSGETTOS => {
                let tos = socket.inner.lock().tos;
                UserSlice::new(arg, 1).writer().write(&tos)
            }
            _ => Err(ENOIOCTLCMD),
        }
    }
}
