//! Sequence numbers, ACK pacing and send-buffer admission: Linux
//! `rds_recv_incoming` (`net/rds/recv.c`), `rds_send_xmit`,
//! `rds_send_queue_rm` and `rds_send_path_reset` (`net/rds/send.c`), and
//! `__rds_conn_path_init` (`net/rds/connection.c`).

/// Receive-side sequence tracking of one connection path (C
/// `cp_next_rx_seq`, 0 when the path is created), as `rds_recv_incoming`
/// does it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxSeq {
    /// The sequence number expected next.
    pub next: u64,
}

impl RxSeq {
    /// A fresh path: expects sequence number 0.
    #[must_use]
    pub const fn new() -> Self {
        RxSeq { next: 0 }
    }

    /// Whether to accept a message with sequence number `seq` whose header
    /// has `RDS_FLAG_RETRANSMITTED` set iff `retransmitted`.
    ///
    /// A message is dropped (C counts `s_recv_drop_old_seq`) iff
    /// `seq < next` (plain, not serial-number, comparison) and it is a
    /// retransmission. Otherwise it is accepted and `next` becomes
    /// `seq + 1` (wrapping) — even when that moves `next` backwards (an old
    /// sequence number without the retransmitted flag).
    ///
    /// This is done before C looks at the message any further, so pings,
    /// pongs and messages to unbound ports advance `next` too.
    pub fn accept(&mut self, seq: u64, retransmitted: bool) -> bool {
        if seq < self.next && retransmitted {
            return false;
        }
        self.next = seq.wrapping_add(1);
        true
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
