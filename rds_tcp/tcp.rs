// SPDX-License-Identifier: GPL-2.0

//! The TCP transport: RDS over kernel TCP sockets, one per connection.
//!
//! C counterpart: `net/rds/tcp.c` (the transport, its namespaces), `tcp_connect.c`,
//! `tcp_listen.c`, `tcp_send.c`, `tcp_recv.c`. This file holds the transport and its
//! namespaces; the rest is in the submodules, one concept each.
//!
//! # Pieces
//!
//! - [`TcpTransport`]: the transport. It serves the addresses of the host in any namespace
//!   (`laddr_check`), prefers loopback for a destination on this host (as C), and carries the
//!   congestion maps.
//! - [`listen`]: one listener per namespace on port 16385 (IPv6, which also takes IPv4),
//!   made by the namespace's init hook and closed by its exit hook. An accepted connection
//!   is matched to its RDS connection (created passively if needed).
//! - [`conn`]: [`TcpConn`](conn::TcpConn), the transport's state of one connection: the
//!   current socket and its [`Link`](conn::Link) (the handler of the socket's callbacks),
//!   replaced at every connect. Only the smaller address connects (TCP's client); the larger
//!   one accepts, and when it has something to send it only nudges the peer with a connection
//!   attempt of its own, which the peer refuses and answers by connecting (C's protocol).
//! - [`send`]: a message is its 48-byte header and then its payload on the stream; pages go to
//!   TCP by reference. A message is settled when TCP's acknowledged sequence passes its end
//!   (no RDS acks over TCP).
//! - [`recv`]: the stream is split into headers and payloads ([`crate::proto::StreamRx`]);
//!   the payload goes straight from the socket's buffers into the message's memory.
//!
//! # Contexts
//!
//! The socket callbacks (data ready, write space, state change) run with bottom halves
//! disabled (softirq, or a process running the socket's backlog): receiving, settling and
//! state changes happen there and do not sleep. Connecting, accepting, sending (`xmit`, the
//! core's drain) and shutting down run in process context; so does a read that had to stop
//! for memory in a callback (the link's receive work).
//!
//! # Lock order
//!
//! | lock | kind | taken inside |
//! |---|---|---|
//! | `TcpTransport::nets` | mutex | none |
//! | `listen::NetListener::sock` | mutex | `TcpTransport::nets` (unload) |
//! | `conn::TcpConn::state` | mutex | `NetListener::sock` |
//! | `conn::Link::rx` | BH spinlock | `TcpConn::state` (the socket's callbacks: none) |
//!
//! The core's locks (a connection's, the sockets') are taken inside `Link::rx`.

mod conn;
mod listen;
mod recv;
mod send;

use crate::bindings::net::NetId;
use crate::bindings::sync::ProcessCtx;
use crate::bindings::tcp::{self as btcp, NetHooks, NetRegistration};
use crate::conn::ConnKey;
use crate::proto::{Addr, RDS_TRANS_TCP};
use crate::socket::Shared;
use crate::transport::{join, ConnTransport, Membership, Transport};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
};
use listen::NetListener;

/// The TCP transport.
#[pin_data]
pub(crate) struct TcpTransport {
    shared: Arc<Shared>,
    /// The listeners, one per namespace (a slot is emptied when its namespace goes).
    #[pin]
    nets: Mutex<KVec<Option<Arc<NetListener>>>>,
    /// The module is unloading: no listener is made or accepts any more.
    closing: AtomicBool,
}

impl TcpTransport {
    fn new(shared: &Arc<Shared>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                shared: shared.clone(),
                nets <- new_mutex!(KVec::new(), "TcpTransport::nets"),
                closing: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }
}

impl Transport for TcpTransport {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn kind(&self) -> i32 {
        RDS_TRANS_TCP
    }

    fn laddr_check(&self, net: NetId, addr: &Addr, scope_id: u32, ctx: &ProcessCtx) -> bool {
        // C: `rds_tcp_laddr_check`, any address of the host in the namespace (the loopback
        // addresses are loopback's, which comes first).
        !addr.is_any() && btcp::addr_is_local(net, &addr.0, scope_id, ctx)
    }

    fn conn_alloc(
        self: ArcBorrow<'_, Self>,
        key: &ConnKey,
        _ctx: &ProcessCtx,
    ) -> Result<Arc<dyn ConnTransport>> {
        let c: Arc<dyn ConnTransport> = conn::TcpConn::new(*key)?;
        Ok(c)
    }

    fn sends_cong_maps(&self) -> bool {
        true
    }

    fn reconnects_passive(&self) -> bool {
        // A connection the peer made is reconnected by whichever side connects (see
        // `conn::TcpConn::connect`).
        true
    }

    fn prefers_loopback(&self) -> bool {
        true
    }

    fn mp_capable(&self) -> bool {
        true
    }

    fn zerocopy(&self) -> bool {
        true
    }

    fn payload_in_pages(&self) -> bool {
        true
    }

    fn tos_map(&self, _tos: u8) -> Option<u8> {
        // C: `rds_tcp_get_tos_map`: every TOS maps to 0.
        Some(0)
    }
}

/// The per-namespace hooks: a listener for each namespace.
struct Nets {
    tcp: Arc<TcpTransport>,
}

impl NetHooks for Nets {
    fn net_init(&self, net: NetId, ctx: &ProcessCtx) -> Result {
        if self.tcp.closing.load(Ordering::Acquire) {
            return Ok(());
        }
        let l = NetListener::start(&self.tcp, net, ctx)?;
        let mut nets = self.tcp.nets.lock();
        let pushed = match nets.iter_mut().find(|l| l.is_none()) {
            Some(slot) => {
                *slot = Some(l.clone());
                Ok(())
            }
            None => nets.push(Some(l.clone()), GFP_KERNEL),
        };
        drop(nets);
        if let Err(e) = pushed {
            // The listener holds itself (its callback's context): closed here, or it would
            // stay bound.
            l.stop(ctx);
            return Err(e.into());
        }
        Ok(())
    }

    fn sysctl_changed(&self, net: NetId, _ctx: &ProcessCtx) {
        // C: `rds_tcp_sysctl_reset`: the connections reconnect with the new sizes.
        self.tcp.shared.conns.for_each(net, |c| {
            if c.tstate::<conn::TcpConn>().is_some() {
                c.drop_connection();
            }
        });
    }

    fn net_exit(&self, net: NetId, ctx: &ProcessCtx) {
        let gone = {
            let mut nets = self.tcp.nets.lock();
            nets.iter_mut()
                .find(|l| l.as_ref().is_some_and(|l| l.net() == net))
                .and_then(Option::take)
        };
        if let Some(l) = gone {
            l.stop(ctx);
        }
    }
}

/// The TCP transport's registrations; dropping it stops the listeners (first) and leaves
/// the core's registry (after the connections are gone).
pub(crate) struct TcpModule {
    tcp: Arc<TcpTransport>,
    _nets: NetRegistration,
    _member: Membership,
}

impl TcpModule {
    /// Makes the transport, joins the core's transports and starts a listener in every
    /// namespace.
    pub(crate) fn new(shared: &Arc<Shared>, ctx: &ProcessCtx) -> Result<Self> {
        let tcp = TcpTransport::new(shared)?;
        let member = join(shared, tcp.clone())?;
        let nets = NetRegistration::new(Arc::new(Nets { tcp: tcp.clone() }, GFP_KERNEL)?, ctx)?;
        Ok(Self {
            tcp,
            _nets: nets,
            _member: member,
        })
    }

    /// Closes every listener (module unload, before the connections are destroyed): no
    /// connection is accepted afterwards. The namespace hooks stay registered until the
    /// module drops this (after the connections are gone): a reconnect until then reads its
    /// namespace's `net.rds.tcp` buffer sizes, which live as long as the hooks do.
    pub(crate) fn stop_listening(&mut self, ctx: &ProcessCtx) {
        self.tcp.closing.store(true, Ordering::Release);
        let mut nets = self.tcp.nets.lock();
        for l in nets.iter_mut().filter_map(Option::take) {
            l.stop(ctx);
        }
    }
}
