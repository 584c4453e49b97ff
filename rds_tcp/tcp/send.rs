// SPDX-License-Identifier: GPL-2.0

//! Sending: a message is its header and then its payload on the stream.
//!
//! C counterpart: `net/rds/tcp_send.c` (`rds_tcp_xmit`, `rds_tcp_is_acked`,
//! `rds_tcp_write_space`).
//!
//! Before the first byte of a message goes, the message is marked with the stream position
//! just past its last byte (TCP's `write_seq` plus its length); the socket's write-space
//! callback settles every message at the front of the retransmit list whose mark TCP's
//! acknowledged sequence (`snd_una`) has passed ([`crate::conn::Conn::settle_sent`]). The
//! header carries no ack (`h_ack` 0) and no checksum, as C's. Payload pages go to TCP by
//! reference; bytes in kernel buffers are copied. A send that finds the socket full records
//! how far it got and returns [`XmitError::Full`]; the next write-space callback with room
//! kicks the connection.

use super::conn::TcpConn;
use crate::bindings::sync::ProcessCtx;
use crate::bindings::tcp::PageBatch;
use crate::conn::Conn;
use crate::message::{Frag, Message, Payload};
use crate::proto::{is_hs_probe, Ext, Stat, HEADER_LEN, MPATH_MAX};
use crate::stats;
use crate::transport::{XmitError, XmitProgress};
use core::sync::atomic::Ordering;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Sends `msg` from where `progress` says (the core's drain, one at a time per connection).
pub(super) fn xmit(
    tc: &TcpConn,
    conn: &Arc<Conn>,
    msg: &Arc<Message>,
    progress: &mut XmitProgress,
    ctx: &ProcessCtx,
) -> Result<(), XmitError> {
    let mut st = tc.state.lock();
    let Some(cur) = st.as_mut() else {
        // Going down: the reset requeues the message.
        return Err(XmitError::Full);
    };
    let len = msg.len as usize;
    if !cur.corked && (cur.drain_sent > 0 || HEADER_LEN + len > PAGE_SIZE) {
        // As C's `rds_tcp_xmit_path_prepare`: the drain's messages go out in full segments,
        // pushed when it ends ([`uncork`]). Not for a drain's first message when it fits a
        // page: its header and payload go in one segment anyway (the header is sent with
        // `MSG_MORE`), and a drain of one such message (depth 1) saves the two socket locks.
        cur.sock.set_cork(true, ctx);
        cur.corked = true;
    }
    if progress.sent == 0 {
        let total = (HEADER_LEN + len) as u32;
        let start = cur.sock.write_seq();
        let end = start.wrapping_add(total);
        msg.set_tx_mark(end);
        cur.link.last_sent_nxt.store(start, Ordering::Relaxed);
        cur.link.last_expected_una.store(end, Ordering::Relaxed);
        let mut hdr = msg.header(0);
        if msg.owner_id == 0 && is_hs_probe(msg.sport, msg.dport) {
            // The multipath handshake (the core's probe ping or its pong) offers the paths
            // this end has, and says that its client connections carry their path in their
            // source port (C: `rds_send_probe`; C 6.12 writes the count only, and stops
            // reading at the second). Both fit in the empty area.
            let _ = hdr.add_ext(Ext::Npaths(MPATH_MAX as u16));
            let _ = hdr.add_ext(Ext::SportIdx(0));
        }
        cur.tx_hdr = hdr.encode();
    }
    let (sock, link, hdr) = (&cur.sock, &cur.link, &cur.tx_hdr);
    // Whether the send was tried again after the socket was found full.
    let mut retried = false;
    while progress.sent < HEADER_LEN + len {
        let r = if progress.sent < HEADER_LEN {
            let part = hdr.get(progress.sent..).unwrap_or(&[]);
            sock.send_bytes(part, len > 0, ctx)
        } else {
            let off = progress.sent - HEADER_LEN;
            match msg.data.frag_at(off) {
                Some((Frag::Bytes(b), at)) if at < b.len() => {
                    let more = off + (b.len() - at) < len;
                    sock.send_bytes(b.get(at..).unwrap_or(&[]), more, ctx)
                }
                first => {
                    // Pages from here on, up to a batch of them in one send.
                    let batch = page_batch(&msg.data, first, off, len);
                    if batch.is_empty() {
                        // The payload does not cover its length: never for the core's
                        // messages.
                        conn.drop_connection();
                        return Err(XmitError::Full);
                    }
                    sock.send_pages(&batch, off + batch.len() < len, ctx)
                }
            }
        };
        match r {
            Ok(n) if n > 0 => progress.sent += n,
            Ok(_) | Err(EAGAIN) => {
                if retried {
                    stats::inc(Stat::TcpSndbufFull);
                    return Err(XmitError::Full);
                }
                // Asked for the kick first, then tried once more: if that fails too, TCP
                // holds unacknowledged data, whose acknowledgement calls the write space
                // after the flag was set.
                link.want_kick.store(true, Ordering::SeqCst);
                retried = true;
            }
            Err(_) => {
                // Reset or closed under us (the state callback may have dropped it already).
                conn.drop_connection();
                return Err(XmitError::Full);
            }
        }
    }
    cur.drain_sent = cur.drain_sent.saturating_add(1);
    Ok(())
}

/// The pages of `data` from byte `off` on (`first`: its fragment there), as many as a batch
/// takes, up to the first fragment that is not a page (or the end, `len`). Empty when `first`
/// is not a page (or there is none).
fn page_batch<'a>(
    data: &'a Payload,
    first: Option<(Frag<'a>, usize)>,
    off: usize,
    len: usize,
) -> PageBatch<'a> {
    let mut batch = PageBatch::new();
    let mut pos = off;
    let mut next = first;
    while let Some((frag, at)) = next {
        let added = match frag {
            Frag::Page(p, o, n) if at < n => batch.push_page(p, o + at, n - at),
            Frag::User(p, o, n) if at < n => batch.push_user(p, o + at, n - at),
            _ => false,
        };
        if !added {
            break;
        }
        pos += frag.len() - at;
        if pos >= len {
            break;
        }
        next = data.frag_at(pos);
    }
    batch
}

/// The end of a drain: uncorks the socket, which pushes what the drain left queued (C:
/// `rds_tcp_xmit_path_complete`).
pub(super) fn uncork(tc: &TcpConn, ctx: &ProcessCtx) {
    if let Some(cur) = tc.state.lock().as_mut() {
        if cur.corked {
            cur.sock.set_cork(false, ctx);
            cur.corked = false;
        }
        cur.drain_sent = 0;
    }
}
