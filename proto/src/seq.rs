//! Sequence numbers, ACK pacing and send-buffer admission: Linux
//! `rds_recv_incoming` (`net/rds/recv.c`), `rds_send_xmit`,
//! `rds_send_queue_rm` and `rds_send_path_reset` (`net/rds/send.c`), and
//! `__rds_conn_path_init` (`net/rds/connection.c`).

/// Receive-side sequence tracking of one connection path (C
/// `cp_next_rx_seq`, 0 when the path is created), as `rds_recv_incoming`
/// does it, with rds-rs's replay rule where the transport asks for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxSeq {
    /// The sequence number expected next.
    pub next: u64,
    /// Whether a message that is neither new nor marked retransmitted is
    /// refused.
    pub replays: Replays,
}

/// What [`RxSeq`] does with a message whose sequence number is below the
/// one expected and that is not marked `RDS_FLAG_RETRANSMITTED`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Replays {
    /// Accepted, and the expected number goes back (C, on every transport;
    /// rds-rs on loopback).
    #[default]
    Accepted,
    /// The connection is in a new incarnation (a new QP) and has accepted no
    /// message of it that was not a retransmission: the peer may have
    /// restarted and count from 1 again, so the next such message is
    /// accepted whatever its number; after it, [`Replays::Refused`].
    FirstAccepted,
    /// Within one incarnation the peer's sequence numbers only increase: a
    /// message below the expected number that is not a retransmission is a
    /// replay, a protocol violation (rds-rs over IB/iWARP; C delivers it
    /// again).
    Refused,
}

/// What [`RxSeq::check`] says about a received message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// New: deliver it (the expected number is now one past it).
    Accept,
    /// A retransmission of a message already received (C's
    /// `s_recv_drop_old_seq`): drop it.
    OldRetransmission,
    /// An old sequence number without the retransmitted flag within one
    /// incarnation ([`Replays::Refused`]): drop and count it.
    Replay,
}

impl RxSeq {
    /// A fresh path under C's rule: expects sequence number 0, accepts
    /// replays.
    #[must_use]
    pub const fn new() -> Self {
        RxSeq {
            next: 0,
            replays: Replays::Accepted,
        }
    }

    /// A fresh path of a transport whose connections have incarnations
    /// (IB/iWARP: one per QP): expects sequence number 0 and refuses replays
    /// after the first message of each incarnation.
    #[must_use]
    pub const fn per_incarnation() -> Self {
        RxSeq {
            next: 0,
            replays: Replays::FirstAccepted,
        }
    }

    /// A new incarnation of the connection begins (its transport was reset):
    /// its peer may have restarted, so its first message that is not a
    /// retransmission is accepted whatever its number. No effect under C's
    /// rule.
    pub fn begin_incarnation(&mut self) {
        if self.replays != Replays::Accepted {
            self.replays = Replays::FirstAccepted;
        }
    }

    /// Checks a message with sequence number `seq` whose header has
    /// `RDS_FLAG_RETRANSMITTED` set iff `retransmitted`.
    ///
    /// As C: a message is an old retransmission iff `seq < next` (plain,
    /// not serial-number, comparison) and it is a retransmission. Under
    /// [`Replays::Refused`], a message with `seq < next` that is not a
    /// retransmission is a replay. Either leaves `next` as it is. Otherwise
    /// the message is accepted and `next` becomes `seq + 1` (wrapping), even
    /// when that moves `next` backwards (C's rule, or the first message of an
    /// incarnation).
    ///
    /// This is done before C looks at the message any further, so pings,
    /// pongs and messages to unbound ports advance `next` too.
    pub fn check(&mut self, seq: u64, retransmitted: bool) -> SeqCheck {
        if seq < self.next {
            if retransmitted {
                return SeqCheck::OldRetransmission;
            }
            if self.replays == Replays::Refused {
                return SeqCheck::Replay;
            }
        }
        self.next = seq.wrapping_add(1);
        if !retransmitted && self.replays == Replays::FirstAccepted {
            self.replays = Replays::Refused;
        }
        SeqCheck::Accept
    }
}

/// A path's receive state put aside ([`RxSeq::save`]) while the path holds a connection that
/// may turn out to be another path's, to be given back ([`RxSeq::restore`]) if it does.
///
/// RDS over TCP with several paths: before the handshake an acceptor cannot tell which of the
/// peer's paths an accepted connection is, and puts it on path 0 (or the path its port names).
/// The messages it brings carry that path's sequence numbers, which [`RxSeq::check`] makes
/// the path's `next`; once the handshake tells the connection was another path's, and it is
/// dropped, the path expects again what it did before, so that its own peer path's
/// retransmissions are not taken for old ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct SavedRx(RxSeq);

impl RxSeq {
    /// The state now, to give back with [`RxSeq::restore`].
    pub fn save(&self) -> SavedRx {
        SavedRx(*self)
    }

    /// Gives back the state [`RxSeq::save`] put aside: what was received since then was
    /// another path's.
    pub fn restore(&mut self, saved: SavedRx) {
        *self = saved.0;
    }

    /// Takes in what another path's connection reached on this path's numbers ([`RxSeq::save`]
    /// of it before [`RxSeq::restore`]): the path it really was then expects at least as far
    /// (never less), so that the peer's retransmissions of what that connection delivered,
    /// which TCP had not acknowledged when it was dropped, go as old rather than twice.
    pub fn absorb(&mut self, reached: SavedRx) {
        self.next = self.next.max(reached.0.next);
    }
}

/// Transmit-side sequence numbers of one connection path (C
/// `cp_next_tx_seq`, 1 when the path is created).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxSeq {
    /// The sequence number the next queued message gets.
    pub next: u64,
}

impl TxSeq {
    /// A fresh path: the first message gets sequence number 1.
    #[must_use]
    pub const fn new() -> Self {
        TxSeq { next: 1 }
    }

    /// The sequence number of the message being queued
    /// (`cp_next_tx_seq++` in `rds_send_queue_rm`); advances, wrapping.
    pub fn take(&mut self) -> u64 {
        let seq = self.next;
        self.next = seq.wrapping_add(1);
        seq
    }
}

impl Default for TxSeq {
    fn default() -> Self {
        Self::new()
    }
}

/// The default of the `net.rds.max_unacked_packets` sysctl
/// (`rds_sysctl_max_unacked_packets`).
pub const MAX_UNACKED_PACKETS: u32 = 8;
/// The default of the `net.rds.max_unacked_bytes` sysctl
/// (`rds_sysctl_max_unacked_bytes`), 16 MiB.
pub const MAX_UNACKED_BYTES: u32 = 16 << 20;

/// ACK pacing of one connection path (C `cp_unacked_packets`,
/// `cp_unacked_bytes`): the packets and bytes that may still be sent
/// before one must ask the peer for an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPacer {
    /// Packets left in the budget.
    pub packets: u32,
    /// Bytes left in the budget.
    pub bytes: u32,
}

impl AckPacer {
    /// A full budget, as `rds_send_path_reset` sets it.
    #[must_use]
    pub const fn new(max_packets: u32, max_bytes: u32) -> Self {
        AckPacer {
            packets: max_packets,
            bytes: max_bytes,
        }
    }

    /// `rds_send_xmit`'s decision for a message of `len` payload bytes
    /// (`h_len`) about to be transmitted: when the budget has no packet
    /// left or fewer than `len` bytes, the message must carry
    /// `RDS_FLAG_ACK_REQUIRED` (returns `true`) and the budget is refilled to
    /// `max_packets` / `max_bytes` (the sysctls, read at each call as C
    /// does); otherwise `len` bytes and one packet are taken from it.
    pub fn on_send(&mut self, len: u32, max_packets: u32, max_bytes: u32) -> bool {
        if self.packets == 0 || self.bytes < len {
            self.packets = max_packets;
            self.bytes = max_bytes;
            true
        } else {
            self.bytes = self.bytes.saturating_sub(len);
            self.packets = self.packets.saturating_sub(1);
            false
        }
    }
}

impl Default for AckPacer {
    /// The budget of the default sysctls.
    fn default() -> Self {
        Self::new(MAX_UNACKED_PACKETS, MAX_UNACKED_BYTES)
    }
}

/// `rds_send_queue_rm`'s send-buffer rule: a message may be queued on the
/// socket iff the bytes already queued (C `rs_snd_bytes`) are below
/// `sndbuf` (C `rds_sk_sndbuf`, `sk_sndbuf / 2`). The new message's length
/// is not looked at, so the last message admitted may overshoot `sndbuf`.
///
/// The same test is `rds_poll`'s `EPOLLOUT`.
#[must_use]
pub fn sndbuf_admits(queued: u64, sndbuf: u32) -> bool {
    queued < u64::from(sndbuf)
}

/// `rds_send_queue_rm`'s other rule: once a message is admitted and
/// `queued_after` (the queued bytes including it) reaches half of
/// `sndbuf`, the message gets `RDS_FLAG_ACK_REQUIRED`, so the peer ACKs
/// soon and send space frees up.
#[must_use]
pub fn sndbuf_ack_required(queued_after: u64, sndbuf: u32) -> bool {
    queued_after >= u64::from(sndbuf / 2)
}
