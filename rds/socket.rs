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
    eaddrnotavail, enotconn, errno, esocktnosupport, Family, FamilyTables, NetId, GETNAME_LEN,
    SOCK_SEQPACKET,
};
use crate::proto::{
    check_bind_scope, encode_sockaddr, encode_unbound_local, parse_bind, parse_connect, AddrError,
    SockAddr,
};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
};

/// `AF_RDS` from `include/linux/socket.h`.
pub(crate) const AF_RDS: u16 = 21;

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
}
