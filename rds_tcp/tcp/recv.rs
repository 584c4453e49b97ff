// SPDX-License-Identifier: GPL-2.0

//! Receiving: the byte stream split into messages.
//!
//! C counterpart: `net/rds/tcp_recv.c` (`rds_tcp_data_recv`, `rds_tcp_read_sock`,
//! `rds_tcp_data_ready`).
//!
//! The socket's data-ready callback reads what TCP holds (`tcp_read_sock`) skb by skb.
//! [`crate::proto::StreamRx`] says where each header starts and how long its payload is; the
//! header's 48 bytes are gathered, then the incoming message is allocated. A payload of up to
//! a page is copied from the skbs into memory allocated with the header (its buffer, or
//! inside the message). A larger one is kept in the skbs it arrives in, as C keeps it: each
//! piece of an skb becomes an skb of its own that shares the pages ([`SkbChain`]), and the
//! bytes are copied once, by `recvmsg`. A complete message goes to
//! [`crate::recv::incoming`].
//!
//! A peer that sends a large payload in small pieces would make each of its bytes hold a
//! whole skb (and the pages under it): a payload that comes in more than
//! [`max_pieces`] pieces is copied into pages of its own instead (counted in
//! `rs_tcp_rx_compacted`), and its rest after it.
//!
//! When memory runs out, the read stops with the bytes not taken left in the socket (TCP's
//! receive window then closes on the peer) and the link's receive work tries again in
//! process context, where it may wait for memory. A header that announces more than 1 MiB
//! or that the core refuses drops the connection (counted).

use super::conn::Link;
use crate::bindings::sync::ProcessCtx;
use crate::bindings::tcp::{Attached, CbSock, ReadStep, SkbChain, SkbData};
use crate::message::{Payload, PayloadBuilder, RxSlot, Target};
use crate::proto::{Stat, StreamRx, StreamStep, HEADER_LEN};
use crate::recv::{self, RxCtx};
use crate::stats;
use kernel::alloc::Flags;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

/// The memory of a message being received.
struct Incoming {
    hdr: [u8; HEADER_LEN],
    data: Body,
    slot: RxSlot,
}

/// Where a payload being received goes.
enum Body {
    /// Copied into memory allocated with the header.
    Copy(PayloadBuilder),
    /// Kept in the skbs it arrives in, `len` bytes in all. `compact`: it came in too many
    /// pieces (or an skb could not be had): it is to be copied into memory of its own, in
    /// process context, before anything more is taken.
    Skbs {
        chain: SkbChain,
        len: usize,
        compact: bool,
    },
}

impl Body {
    /// Room for a payload of `len` bytes.
    fn new(len: usize, flags: Flags) -> Result<Self> {
        if len > PAGE_SIZE {
            return Ok(Body::Skbs {
                chain: SkbChain::new(),
                len,
                compact: false,
            });
        }
        Ok(Body::Copy(PayloadBuilder::new(len, flags)?))
    }

    /// The bytes still to come.
    fn remaining(&self) -> usize {
        match self {
            Body::Copy(b) => b.remaining(),
            Body::Skbs { chain, len, .. } => len - chain.len(),
        }
    }

    /// The payload, once all of it is there.
    fn finish(self) -> Result<Payload> {
        match self {
            Body::Copy(b) => b.finish(),
            Body::Skbs { chain, len, .. } if chain.len() == len => Ok(Payload::skbs(chain)),
            Body::Skbs { .. } => Err(EINVAL),
        }
    }
}

/// The most pieces a payload of `len` bytes may come in and stay in its skbs: one for each
/// 1 KiB (a TCP segment carries more, unless the path's MTU is below 1 KiB), and 8 more
/// for where messages and segments start and end.
pub(crate) fn max_pieces(len: usize) -> usize {
    len / 1024 + 8
}

/// Where the receive side of a stream is.
enum Cur {
    /// Between messages, or in a header (`StreamRx` has its bytes).
    Idle,
    /// A header was taken; the memory for its message could not be allocated yet.
    NeedMemory { hdr: [u8; HEADER_LEN], len: usize },
    /// Taking a message's payload.
    Filling(Incoming),
    /// The stream cannot go on (the connection is being dropped): nothing more is taken.
    Broken,
}

/// The receive side of a link (C: `t_tinc`, `t_tinc_hdr_rem`, `t_tinc_data_rem`).
pub(crate) struct RxState {
    stream: StreamRx,
    cur: Cur,
}

impl RxState {
    pub(super) fn new() -> Self {
        Self {
            stream: StreamRx::new(),
            cur: Cur::Idle,
        }
    }

    /// Header bytes and payload bytes still to come of the message being received.
    pub(super) fn remaining(&self) -> (usize, usize) {
        match &self.cur {
            Cur::Filling(inc) => (0, inc.data.remaining()),
            Cur::NeedMemory { len, .. } => (0, *len),
            Cur::Idle | Cur::Broken => (self.stream.header_missing(), 0),
        }
    }

    /// Forgets a message being received (the socket is gone).
    pub(super) fn reset(&mut self) {
        *self = Self::new();
    }
}

/// How a read of one skb's bytes ended.
enum Taken {
    /// All of them.
    All,
    /// Stopped after `n` of them.
    Stopped(usize),
}

impl Link {
    /// Reads in a callback of the socket (atomic context).
    pub(super) fn read_cb(self: ArcBorrow<'_, Self>, sock: &CbSock<'_>) {
        let mut again = false;
        // `rx` inside the socket's lock (held by the caller of the callback), taken for each
        // skb.
        sock.read(&mut |skb| self.take(&mut self.rx.lock(), skb, GFP_ATOMIC, &mut again));
        if again {
            let this: Arc<Self> = self.into();
            this.read_later();
        }
    }

    /// Reads with the socket lock held (process context): first the memory a callback could
    /// not allocate, waiting for it if needed.
    pub(super) fn read_locked(self: &Arc<Self>, sock: &Attached, ctx: &ProcessCtx) {
        if !self.live() {
            return;
        }
        if !self.fill_need(ctx) {
            self.conn.drop_connection();
            return;
        }
        let mut again = false;
        // `rx` inside the socket's lock, which the read takes, for each skb.
        sock.read(
            &mut |skb| self.take(&mut self.rx.lock(), skb, GFP_ATOMIC, &mut again),
            ctx,
        );
        if again {
            self.read_later();
        }
    }

    /// Allocates (where it may wait) the memory a header is waiting for, if one is; false
    /// when there is none to be had.
    pub(super) fn fill_need(&self, _ctx: &ProcessCtx) -> bool {
        loop {
            // What is needed, read under the lock, which the statement lets go (`compact` takes
            // it again).
            let (need, compact) = match &self.rx.lock().cur {
                Cur::NeedMemory { len, .. } => (*len, false),
                Cur::Filling(Incoming {
                    data:
                        Body::Skbs {
                            compact: true, len, ..
                        },
                    ..
                }) => (*len, true),
                _ => return true,
            };
            if compact {
                return self.compact(need);
            }
            // Outside the lock: it may sleep.
            let Ok((data, slot)) = alloc(need, GFP_KERNEL) else {
                stats::inc(Stat::RsTcpRxNomem);
                return false;
            };
            let mut rx = self.rx.lock();
            match rx.cur {
                // Still the header this memory is for (a callback may have taken that one and
                // stopped at the next meanwhile: then this memory goes and the loop looks
                // again).
                Cur::NeedMemory { hdr, len } if len == need => {
                    self.begin(&mut rx, Incoming { hdr, data, slot });
                    return true;
                }
                Cur::NeedMemory { .. } => continue,
                _ => return true,
            }
        }
    }

    /// Copies a payload kept in skbs into memory of its own (process context), which it then
    /// fills from there on; false when there is no memory to be had.
    fn compact(&self, len: usize) -> bool {
        // Outside the lock: it may sleep.
        let Ok(mut data) = PayloadBuilder::new(len, GFP_KERNEL) else {
            stats::inc(Stat::RsTcpRxNomem);
            return false;
        };
        let mut rx = self.rx.lock();
        let Cur::Filling(inc) = &mut rx.cur else {
            // Dropped meanwhile (the socket went).
            return true;
        };
        let Body::Skbs { chain, compact, .. } = &mut inc.data else {
            return true;
        };
        // Nothing was taken meanwhile (a payload to compact takes nothing).
        if !*compact {
            return true;
        }
        let placed = fill(&mut data, chain.len(), |at, target| match target {
            Target::Bytes(dst) => chain.read(at, dst),
            Target::Page(page, off, n) => chain.copy_to_page(at, page, off, n),
        });
        if placed != chain.len() {
            // Only a broken skb fails a copy.
            drop(rx);
            return false;
        }
        stats::inc(Stat::RsTcpRxCompacted);
        inc.data = Body::Copy(data);
        true
    }

    /// Takes the bytes of `skb` into the stream (with `rx` locked, inside the socket's lock).
    pub(super) fn take(
        &self,
        rx: &mut RxState,
        skb: &SkbData<'_>,
        flags: Flags,
        again: &mut bool,
    ) -> ReadStep {
        match self.take_bytes(rx, skb, flags) {
            Taken::All => ReadStep {
                used: skb.len(),
                stop: false,
            },
            Taken::Stopped(n) => {
                if !matches!(rx.cur, Cur::Broken) {
                    *again = true;
                }
                ReadStep {
                    used: n,
                    stop: true,
                }
            }
        }
    }

    fn take_bytes(&self, rx: &mut RxState, skb: &SkbData<'_>, flags: Flags) -> Taken {
        let len = skb.len();
        let mut pos = 0;
        while pos < len {
            match &mut rx.cur {
                Cur::Broken => return Taken::Stopped(pos),
                Cur::NeedMemory { hdr, len: mlen } => {
                    let (hdr, mlen) = (*hdr, *mlen);
                    if !self.start(rx, hdr, mlen, flags) {
                        return Taken::Stopped(pos);
                    }
                }
                Cur::Filling(Incoming {
                    data:
                        Body::Skbs {
                            chain,
                            len: mlen,
                            compact,
                        },
                    ..
                }) => {
                    // Payload kept in its skbs: the stream advances by what was taken.
                    if *compact {
                        return Taken::Stopped(pos);
                    }
                    let n = (len - pos).min(*mlen - chain.len());
                    if chain.count() >= max_pieces(*mlen)
                        || skb.extract_into(pos, n, chain).is_err()
                    {
                        // Too many pieces, or no memory for an skb: the rest is copied, in
                        // process context.
                        if chain.count() < max_pieces(*mlen) {
                            stats::inc(Stat::RsTcpRxNomem);
                        }
                        *compact = true;
                        return Taken::Stopped(pos);
                    }
                    pos += n;
                    self.took_payload(rx, n);
                }
                Cur::Filling(Incoming {
                    data: Body::Copy(data),
                    ..
                }) => {
                    // Payload: straight into the message's memory, then the stream advances
                    // by what was placed.
                    let want = len - pos;
                    let placed = fill(data, want, |at, target| match target {
                        Target::Bytes(dst) => skb.copy(pos + at, dst),
                        Target::Page(page, off, n) => skb.copy_to_page(pos + at, page, off, n),
                    });
                    pos += placed;
                    if !self.took_payload(rx, placed) && placed < want {
                        // A copy failed: only a broken skb does that (the memory is all
                        // there).
                        self.broken(rx);
                        return Taken::Stopped(pos);
                    }
                }
                Cur::Idle => {
                    // Header bytes: gathered by the stream.
                    let n = rx.stream.header_missing().min(len - pos);
                    let mut buf = [0u8; HEADER_LEN];
                    let Some(part) = buf.get_mut(..n) else {
                        self.broken(rx);
                        return Taken::Stopped(pos);
                    };
                    if skb.copy(pos, part).is_err() {
                        self.broken(rx);
                        return Taken::Stopped(pos);
                    }
                    match rx.stream.next(part) {
                        Ok(StreamStep::HeaderPart { used }) => pos += used,
                        Ok(StreamStep::Header {
                            used,
                            header,
                            bytes,
                            ..
                        }) => {
                            pos += used;
                            if !self.start(rx, bytes, header.len as usize, flags) {
                                return Taken::Stopped(pos);
                            }
                        }
                        Ok(StreamStep::Payload { .. }) | Err(_) => {
                            stats::inc(Stat::RsTcpBadStream);
                            self.broken(rx);
                            return Taken::Stopped(pos);
                        }
                    }
                }
            }
        }
        Taken::All
    }

    /// A header arrived: the memory for its message is allocated (and a message without
    /// payload is complete at once). False when the memory could not be had: the header
    /// waits for it.
    fn start(&self, rx: &mut RxState, hdr: [u8; HEADER_LEN], len: usize, flags: Flags) -> bool {
        match alloc(len, flags) {
            Ok((data, slot)) => {
                self.begin(rx, Incoming { hdr, data, slot });
                true
            }
            Err(_) => {
                stats::inc(Stat::RsTcpRxNomem);
                rx.cur = Cur::NeedMemory { hdr, len };
                false
            }
        }
    }

    /// The memory for a header's message is there: its payload is taken from now on (a
    /// message without payload is complete at once).
    fn begin(&self, rx: &mut RxState, inc: Incoming) {
        let empty = inc.data.remaining() == 0;
        rx.cur = Cur::Filling(inc);
        if empty {
            self.complete(rx);
        }
    }

    /// `n` payload bytes were taken: the stream moves past them, and a message they complete
    /// goes to the core. Whether they completed one.
    fn took_payload(&self, rx: &mut RxState, n: usize) -> bool {
        let complete = matches!(
            rx.stream.next_payload(n),
            Some(StreamStep::Payload { complete: true, .. })
        );
        if complete {
            self.complete(rx);
        }
        complete
    }

    /// A message is complete: it goes to the core.
    fn complete(&self, rx: &mut RxState) {
        let Cur::Filling(inc) = core::mem::replace(&mut rx.cur, Cur::Idle) else {
            return;
        };
        let Ok(payload) = inc.data.finish() else {
            self.broken(rx);
            return;
        };
        if recv::incoming(&self.conn, &inc.hdr, payload, inc.slot, RxCtx::Atomic).is_err() {
            // Counted by the core: the stream is not trusted any more.
            self.broken(rx);
        }
    }

    /// The stream cannot go on: the connection is dropped.
    fn broken(&self, rx: &mut RxState) {
        rx.cur = Cur::Broken;
        self.conn.drop_connection();
    }
}

/// Fills up to `want` bytes of `data` from a source, `copy(at, target)` copying the source's
/// bytes from `at` (counted from where this fill started) into the target; returns the bytes
/// placed, short when a copy fails or `data` is full.
fn fill(
    data: &mut PayloadBuilder,
    want: usize,
    mut copy: impl FnMut(usize, Target<'_>) -> Result,
) -> usize {
    let mut placed = 0;
    while placed < want {
        let Ok(target) = data.target(want - placed) else {
            break;
        };
        let n = match &target {
            Target::Bytes(dst) => dst.len(),
            Target::Page(_, _, n) => *n,
        };
        if n == 0 || copy(placed, target).is_err() {
            break;
        }
        data.advance(n);
        placed += n;
    }
    placed
}

/// The memory for a message of `len` payload bytes.
fn alloc(len: usize, flags: Flags) -> Result<(Body, RxSlot)> {
    Ok((Body::new(len, flags)?, RxSlot::new(flags)?))
}
