// SPDX-License-Identifier: GPL-2.0

//! The `RDS_INFO_*` getsockopts: counters, connections, queued messages, sockets.
//!
//! C counterpart: `net/rds/info.c` (`rds_info_getsockopt`) and the info functions of
//! `af_rds.c`, `connection.c` and `stats.c`.
//!
//! Protocol, as in C: `optlen` is the caller's buffer size; a buffer too small for every record
//! fails with `ENOSPC` and sets `optlen` to the size needed (a probe with `optlen` 0 does the
//! same, or succeeds when there is nothing to report); otherwise the records are copied,
//! `optlen` is set to their total size and the call returns the size of one record. The
//! records are C's packed structs ([`crate::proto`] encodes them). Only the caller's network
//! namespace is reported. The connection flags come from each connection's state; the
//! retransmit lists are the messages sent and not yet acknowledged. The TCP socket tables are
//! empty (rds-rs has no TCP transport yet;
//! C reports them once `rds_tcp` is loaded, which C RDS needs for its address checks); the
//! IB/iWARP tables belong to transports rds-rs does not have yet, so they answer
//! `ENOPROTOOPT`, as C does when those transports are not loaded.

use crate::bindings::net::{enoprotoopt, errno, NetId, OptOut, Sock};
use crate::conn::Conn;
use crate::message::Message;
use crate::proto::{
    check_info_request, encode_counter, info_outcome, Addr, ConnInfo, InfoOutcome, MsgInfo,
    RdmaConnInfo, SockInfo, TcpSockInfo, INFO6_CONNECTION_LEN, INFO6_MESSAGE_LEN,
    INFO6_RDMA_CONNECTION_LEN, INFO6_SOCKET_LEN, INFO6_TCP_SOCKET_LEN, INFO_CONNECTION_LEN,
    INFO_COUNTER_LEN, INFO_MESSAGE_LEN, INFO_RDMA_CONNECTION_LEN, INFO_SOCKET_LEN,
    INFO_TCP_SOCKET_LEN, RDS6_INFO_CONNECTIONS, RDS6_INFO_IB_CONNECTIONS, RDS6_INFO_RECV_MESSAGES,
    RDS6_INFO_RETRANS_MESSAGES, RDS6_INFO_SEND_MESSAGES, RDS6_INFO_SOCKETS, RDS6_INFO_TCP_SOCKETS,
    RDS_INFO_CONNECTIONS, RDS_INFO_COUNTERS, RDS_INFO_IB_CONNECTIONS, RDS_INFO_RECV_MESSAGES,
    RDS_INFO_RETRANS_MESSAGES, RDS_INFO_SEND_MESSAGES, RDS_INFO_SOCKETS, RDS_INFO_TCP_SOCKETS,
};
use crate::socket::{Rds, Shared};
use crate::stats;
use kernel::{
    alloc::{Flags, KVVec},
    prelude::*,
};

/// `ENOSPC`.
fn enospc() -> Error {
    errno(28)
}

/// The records of one info request.
///
/// # Invariants
///
/// Unless `short`, `bytes` holds exactly the first `min(nr, room)` records, `each` bytes each.
struct Records {
    /// Size of one record.
    each: usize,
    /// How many records are kept; more are only counted.
    room: usize,
    /// How many records exist (more than `bytes` holds when the buffer was too small).
    nr: usize,
    /// The encoded records that fit (`kvmalloc`ed: a namespace can have many of them).
    bytes: KVVec<u8>,
    /// A record that had room in the caller's buffer was not kept, because it was counted
    /// under a spinlock ([`Records::add`] without `grow`) and `bytes` had no capacity left.
    short: bool,
}

impl Records {
    /// Records of `each` bytes for a buffer of `len` bytes: as many as fit are kept.
    fn new(each: usize, len: usize) -> Self {
        Self {
            each,
            room: len / each,
            nr: 0,
            bytes: KVVec::new(),
            short: false,
        }
    }

    /// Makes room for `records` records (at most as many as the caller's buffer holds), so
    /// that [`Records::add`] can keep them without allocating.
    fn reserve(&mut self, records: usize) -> Result {
        let n = records.min(self.room).saturating_mul(self.each);
        self.bytes.reserve(n, GFP_KERNEL)?;
        Ok(())
    }

    /// Counts a record and keeps it if there is room: allocating with `grow` as needed, or,
    /// with `None` (under a spinlock), only within the capacity [`Records::reserve`] made; a
    /// record that would need more marks the records `short`.
    fn add(&mut self, record: &[u8], grow: Option<Flags>) -> Result {
        self.nr += 1;
        if self.nr > self.room {
            return Ok(());
        }
        match grow {
            Some(flags) => self.bytes.extend_from_slice(record, flags)?,
            None if self.bytes.capacity() - self.bytes.len() < record.len() => self.short = true,
            // Within capacity: `extend_from_slice` does not allocate.
            None => self.bytes.extend_from_slice(record, GFP_ATOMIC)?,
        }
        Ok(())
    }

    /// Counts and keeps a record in its IPv4 or IPv6 form ([`Records::add`]).
    fn add_rec(&mut self, rec: &impl Record, v6: bool, grow: Option<Flags>) -> Result {
        if v6 {
            self.add(rec.v6().as_ref(), grow)
        } else {
            self.add(rec.v4().as_ref(), grow)
        }
    }
}

/// Gathers records that are found under spinlocks: `fill` counts and keeps them with
/// [`Records::add`] (no allocation) into capacity reserved beforehand; when more turned up than were
/// reserved for, it runs again with room for what the last pass counted. Lists that keep
/// changing faster than that give up with `EAGAIN`.
fn gather(
    each: usize,
    len: usize,
    mut fill: impl FnMut(&mut Records) -> Result,
) -> Result<Records> {
    let mut want = 64usize;
    for _ in 0..8 {
        let mut r = Records::new(each, len);
        r.reserve(want)?;
        fill(&mut r)?;
        if !r.short {
            return Ok(r);
        }
        want = r.nr.saturating_add(r.nr / 4).saturating_add(64);
    }
    Err(EAGAIN)
}

/// A record with an IPv4 (`rds_info_*`) and an IPv6 (`rds6_info_*`) layout.
trait Record {
    /// The IPv4 record.
    fn v4(&self) -> impl AsRef<[u8]>;
    /// The IPv6 record.
    fn v6(&self) -> impl AsRef<[u8]>;
    /// The size of the record in the given layout.
    fn len(v6: bool) -> usize;
}

/// Implements [`Record`] for a record type with `encode_v4`/`encode_v6` and the sizes of its
/// two layouts.
macro_rules! record {
    ($t:ty, $v4_len:expr, $v6_len:expr) => {
        impl Record for $t {
            fn v4(&self) -> impl AsRef<[u8]> {
                self.encode_v4()
            }
            fn v6(&self) -> impl AsRef<[u8]> {
                self.encode_v6()
            }
            fn len(v6: bool) -> usize {
                if v6 {
                    $v6_len
                } else {
                    $v4_len
                }
            }
        }
    };
}

record!(ConnInfo<'_>, INFO_CONNECTION_LEN, INFO6_CONNECTION_LEN);
record!(MsgInfo, INFO_MESSAGE_LEN, INFO6_MESSAGE_LEN);
record!(SockInfo, INFO_SOCKET_LEN, INFO6_SOCKET_LEN);
record!(
    RdmaConnInfo,
    INFO_RDMA_CONNECTION_LEN,
    INFO6_RDMA_CONNECTION_LEN
);
record!(TcpSockInfo, INFO_TCP_SOCKET_LEN, INFO6_TCP_SOCKET_LEN);

/// `getsockopt(SOL_RDS, RDS_INFO_*)`: `len` is the caller's `optlen`.
pub(crate) fn getsockopt(sock: &Sock<Rds>, optname: i32, len: i32, out: &OptOut) -> Result<i32> {
    check_info_request(len, out.addr() as u64).map_err(|e| errno(e.errno()))?;
    let ulen = usize::try_from(len).map_err(|_| EINVAL)?;
    // C pins the whole buffer first and fails with EAGAIN if it cannot.
    if ulen > 0 && !out.writable(ulen) {
        return Err(EAGAIN);
    }
    let shared = &*sock.state().shared;
    let net = sock.net();
    let recs = match optname {
        RDS_INFO_COUNTERS => counters(ulen)?,
        RDS_INFO_CONNECTIONS => connections(shared, net, ulen, false)?,
        RDS6_INFO_CONNECTIONS => connections(shared, net, ulen, true)?,
        RDS_INFO_SEND_MESSAGES => send_messages(shared, net, ulen, false)?,
        RDS6_INFO_SEND_MESSAGES => send_messages(shared, net, ulen, true)?,
        RDS_INFO_RETRANS_MESSAGES => retrans_messages(shared, net, ulen, false)?,
        RDS6_INFO_RETRANS_MESSAGES => retrans_messages(shared, net, ulen, true)?,
        RDS_INFO_RECV_MESSAGES => recv_messages(shared, net, ulen, false)?,
        RDS6_INFO_RECV_MESSAGES => recv_messages(shared, net, ulen, true)?,
        RDS_INFO_SOCKETS => sockets(shared, net, ulen, false)?,
        RDS6_INFO_SOCKETS => sockets(shared, net, ulen, true)?,
        RDS_INFO_IB_CONNECTIONS => ib_connections(shared, ulen, false)?,
        RDS6_INFO_IB_CONNECTIONS => ib_connections(shared, ulen, true)?,
        RDS_INFO_TCP_SOCKETS => tcp_sockets(shared, net, ulen, false)?,
        RDS6_INFO_TCP_SOCKETS => tcp_sockets(shared, net, ulen, true)?,
        _ => return Err(enoprotoopt()),
    };
    match info_outcome(ulen, recs.each, recs.nr) {
        InfoOutcome::Fits { each, total } => {
            out.write(recs.bytes.get(..total).unwrap_or(&recs.bytes))?;
            out.set_len(i32::try_from(total).map_err(|_| EINVAL)?)?;
            i32::try_from(each).map_err(|_| EINVAL)
        }
        InfoOutcome::NoSpace { needed } => {
            out.set_len(i32::try_from(needed).unwrap_or(i32::MAX))?;
            Err(enospc())
        }
    }
}

/// `RDS_INFO_COUNTERS`: all or nothing (C: `rds_stats_info`).
fn counters(len: usize) -> Result<Records> {
    let mut r = Records::new(INFO_COUNTER_LEN, len);
    if r.room < stats::COUNT {
        r.room = 0;
    }
    for (name, value) in stats::snapshot() {
        r.add(&encode_counter(name, value), Some(GFP_KERNEL))?;
    }
    Ok(r)
}

/// Whether an address is IPv4 (v4-mapped), as C's `c_isv6` and the v4 filters test.
fn is_v4(a: &Addr) -> bool {
    a.v4().is_some()
}

/// `RDS_INFO_CONNECTIONS` / `RDS6_INFO_CONNECTIONS` (C: `rds_conn_info`,
/// `rds6_conn_info`): the IPv4 table leaves IPv6 connections out. A connection with several
/// paths is one record, of path 0, as in C.
fn connections(shared: &Shared, net: NetId, len: usize, v6: bool) -> Result<Records> {
    let mut r = Records::new(ConnInfo::len(v6), len);
    shared.conns.try_for_each(net, |c| {
        if (!v6 && !is_v4(&c.key.laddr)) || c.key.path != 0 {
            return Ok(());
        }
        let (next_tx_seq, next_rx_seq) = c.seqs();
        let flags = c.info_flags();
        let info = ConnInfo {
            next_tx_seq,
            next_rx_seq,
            laddr: c.key.laddr,
            faddr: c.key.faddr,
            transport: c.transport.name(),
            flags,
            tos: c.key.tos,
        };
        r.add_rec(&info, v6, Some(GFP_KERNEL))
    })?;
    Ok(r)
}

/// `RDS_INFO_IB_CONNECTIONS` / `RDS6_INFO_IB_CONNECTIONS` (C: `rds_ib_ic_info`): every IB
/// connection (IB runs in the initial namespace only); the IPv4 table leaves IPv6 connections
/// out. Registration pools: rds-rs registers on the device without pools; `rdma_mr_max` is
/// how many registrations the device holds, `rdma_mr_size` the pages one may span (C: the size
/// of its 1 MiB pool and that pool's pages per registration). `cache_allocs` is, as in C, the
/// KiB of receive pages the connection keeps spare for its receives (at most 128).
fn ib_connections(shared: &Shared, len: usize, v6: bool) -> Result<Records> {
    let mut r = Records::new(RdmaConnInfo::len(v6), len);
    shared.conns.try_for_each(NetId::init(), |c| {
        if !v6 && !is_v4(&c.key.laddr) {
            return Ok(());
        }
        let Some(i) = c.tconn.rdma_info() else {
            return Ok(());
        };
        let info = RdmaConnInfo {
            src_addr: c.key.laddr,
            dst_addr: c.key.faddr,
            src_gid: i.src_gid,
            dst_gid: i.dst_gid,
            max_send_wr: i.max_send_wr,
            max_recv_wr: i.max_recv_wr,
            max_send_sge: i.max_send_sge,
            rdma_mr_max: i.mr_max,
            rdma_mr_size: i.mr_size,
            tos: c.key.tos,
            sl: i.sl,
            cache_allocs: i.cache_kib,
        };
        r.add_rec(&info, v6, Some(GFP_KERNEL))
    })?;
    Ok(r)
}

/// `RDS_INFO_TCP_SOCKETS` / `RDS6_INFO_TCP_SOCKETS` (C: `rds_tcp_tc_info`,
/// `rds6_tcp_tc_info`): the TCP socket of every connection of the namespace that has one; the
/// IPv4 table leaves IPv6 connections out.
fn tcp_sockets(shared: &Shared, net: NetId, len: usize, v6: bool) -> Result<Records> {
    let mut r = Records::new(TcpSockInfo::len(v6), len);
    shared.conns.try_for_each(net, |c| {
        if !v6 && !is_v4(&c.key.laddr) {
            return Ok(());
        }
        let Some(mut info) = c.tconn.stream_info() else {
            return Ok(());
        };
        info.tos = c.key.tos;
        r.add_rec(&info, v6, Some(GFP_KERNEL))
    })?;
    Ok(r)
}

/// The record of a message on a connection: `flags` are the header flags it went out with
/// (0 for one never sent).
fn msg_info(c: &Conn, m: &Message, flags: u8) -> MsgInfo {
    MsgInfo {
        seq: m.seq(),
        len: m.len,
        laddr: c.key.laddr,
        faddr: c.key.faddr,
        lport: m.sport,
        fport: m.dport,
        flags,
        tos: c.key.tos,
    }
}

/// `RDS_INFO_SEND_MESSAGES` / `RDS6_INFO_SEND_MESSAGES` (C: `rds_conn_message_info_send`):
/// messages still on their connections' send queues.
fn send_messages(shared: &Shared, net: NetId, len: usize, v6: bool) -> Result<Records> {
    gather(MsgInfo::len(v6), len, |r| {
        shared.conns.try_for_each(net, |c| {
            if !v6 && !is_v4(&c.key.laddr) {
                return Ok(());
            }
            // Under the connection's spinlock: no allocations.
            c.try_for_each_queued(|m| {
                let flags = if m.retransmitted() { m.flags() } else { 0 };
                r.add_rec(&msg_info(c, m, flags), v6, None)
            })
        })
    })
}

/// `RDS_INFO_RETRANS_MESSAGES` / `RDS6_INFO_RETRANS_MESSAGES` (C:
/// `rds_conn_message_info_retrans`): messages sent and not yet acknowledged.
fn retrans_messages(shared: &Shared, net: NetId, len: usize, v6: bool) -> Result<Records> {
    gather(MsgInfo::len(v6), len, |r| {
        shared.conns.try_for_each(net, |c| {
            if !v6 && !is_v4(&c.key.laddr) {
                return Ok(());
            }
            c.try_for_each_retrans(|m| r.add_rec(&msg_info(c, m, m.flags()), v6, None))
        })
    })
}

/// `RDS_INFO_RECV_MESSAGES` / `RDS6_INFO_RECV_MESSAGES` (C: `rds_sock_inc_info`): messages
/// on receive queues; the IPv4 table covers sockets bound to IPv4 addresses only.
fn recv_messages(shared: &Shared, net: NetId, len: usize, v6: bool) -> Result<Records> {
    gather(MsgInfo::len(v6), len, |r| {
        let sockets = shared.sockets.lock();
        for sock in sockets.values().filter(|s| s.net() == net) {
            let s = sock.state();
            // An unbound socket cannot have received anything.
            let Some(bound) = s.inner.lock().bound.map(|k| k.addr) else {
                continue;
            };
            if !v6 && !is_v4(&bound.addr) {
                continue;
            }
            // Under the socket's spinlock: no allocations.
            let d = s.data.lock();
            for inc in d.recv_queue.iter() {
                let info = MsgInfo {
                    seq: inc.seq(),
                    len: inc.len,
                    laddr: bound.addr,
                    faddr: inc.saddr,
                    lport: inc.dport,
                    fport: inc.sport,
                    flags: 0,
                    tos: inc.tos,
                };
                r.add_rec(&info, v6, None)?;
            }
        }
        Ok(())
    })
}

/// `RDS_INFO_SOCKETS` / `RDS6_INFO_SOCKETS` (C: `rds_sock_info`, `rds6_sock_info`): all or
/// nothing; the IPv4 table covers sockets bound to IPv4 addresses only.
fn sockets(shared: &Shared, net: NetId, len: usize, v6: bool) -> Result<Records> {
    let mut infos = KVVec::new();
    let sockets = shared.sockets.lock();
    for sock in sockets.values().filter(|s| s.net() == net) {
        let inner = sock.state().inner.lock();
        let bound = inner.bound.map(|k| k.addr).unwrap_or_default();
        if !v6 && !is_v4(&bound.addr) {
            continue;
        }
        let conn = inner.conn.unwrap_or_default();
        drop(inner);
        infos.push(
            SockInfo {
                sndbuf: sock.sndbuf() / 2,
                rcvbuf: sock.rcvbuf() / 2,
                bound_addr: bound.addr,
                connected_addr: conn.addr,
                bound_port: bound.port,
                connected_port: conn.port,
                inum: sock.inode(),
            },
            GFP_KERNEL,
        )?;
    }
    let mut r = Records::new(SockInfo::len(v6), len);
    if r.room < infos.len() {
        r.room = 0;
    }
    for info in infos.iter() {
        r.add_rec(info, v6, Some(GFP_KERNEL))?;
    }
    Ok(r)
}
