//! The life of a connection as pure logic: its states and their
//! transitions (Linux `enum rds_conn_state`, `rds_conn_path_transition`),
//! the reconnect backoff (`rds_queue_reconnect`), the receive side's
//! acknowledgement state (`rds_ib_ack_state`, `rds_ib_set_ack`) and the
//! sender's retransmit rules (`rds_send_is_acked`, `rds_send_path_reset`);
//! plus the per-socket limits rds-rs adds against hostile users (the
//! per-message overhead, the bound on waiting notifications, the rate limit on
//! failed r_key lookups).

/// The state of a connection (C: `enum rds_conn_state`, same numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum ConnState {
    /// Not connected; a send or the reconnect timer starts a connect.
    Down = 0,
    /// The transport is connecting.
    Connecting = 1,
    /// The shutdown work is tearing the transport connection down.
    Disconnecting = 2,
    /// Connected: the send queue is drained into the transport.
    Up = 3,
    /// Unused by rds-rs (C's multipath reset), kept for the numbering.
    Resetting = 4,
    /// The connection failed; the shutdown work takes it down.
    Error = 5,
}

impl ConnState {
    /// The state with number `n` (C's `atomic_t cp_state`).
    #[must_use]
    pub const fn from_u8(n: u8) -> Option<Self> {
        match n {
            0 => Some(ConnState::Down),
            1 => Some(ConnState::Connecting),
            2 => Some(ConnState::Disconnecting),
            3 => Some(ConnState::Up),
            4 => Some(ConnState::Resetting),
            5 => Some(ConnState::Error),
            _ => None,
        }
    }

    /// Whether the core's state machine moves from `self` to `to` (the
    /// transitions C's `threads.c` and `connection.c` make, except where
    /// noted):
    ///
    /// - Down → Connecting: the connect work starts a connect.
    /// - Connecting → Up: the transport completed it.
    /// - Connecting → Down: the transport failed to start it (reconnect).
    /// - Up, Connecting → Error: a drop (error, reset, reaping). C's
    ///   `rds_conn_path_drop` sets Error from any state, Down and Error
    ///   included; here a drop of a Down connection is no transition.
    /// - Up, Error, Connecting → Disconnecting: the shutdown work starts.
    ///   Connecting → Disconnecting is rds-rs's: C's `rds_conn_shutdown`
    ///   starts only from Up, Error (and Resetting), and drops a
    ///   Connecting connection to Error instead, which reaches
    ///   Disconnecting in the next pass.
    /// - Disconnecting → Down: the shutdown work finished.
    /// - Disconnecting → Error: a drop during shutdown (another pass runs).
    #[must_use]
    pub const fn may_become(self, to: ConnState) -> bool {
        use ConnState::*;
        matches!(
            (self, to),
            (Down, Connecting)
                | (Connecting, Up)
                | (Connecting, Down)
                | (Up, Error)
                | (Connecting, Error)
                | (Up, Disconnecting)
                | (Error, Disconnecting)
                | (Connecting, Disconnecting)
                | (Disconnecting, Down)
                | (Disconnecting, Error)
        )
    }

    /// The `RDS_INFO_CONNECTION_FLAG_*` bits of this state (C:
    /// `rds_conn_info_set`): CONNECTING 0x02, CONNECTED 0x04; `sending` adds
    /// SENDING 0x01 (a task is draining the send queue).
    #[must_use]
    pub const fn info_flags(self, sending: bool) -> u8 {
        let mut f = if sending { 0x01 } else { 0 };
        match self {
            ConnState::Connecting => f |= 0x02,
            ConnState::Up => f |= 0x04,
            _ => {}
        }
        f
    }
}

/// The reconnect delay of a connection (C: `cp_reconnect_jiffies` and
/// `rds_queue_reconnect`): the first reconnect after a connection was up
/// is immediate; each further one waits a random time below a ceiling that
/// starts at `reconnect_min_delay_ms` and doubles up to
/// `reconnect_max_delay_ms` (the sysctls, in jiffies here); the ceiling
/// resets when the connection comes up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// The current ceiling in jiffies; 0 when the connection was up last.
    pub ceiling: u64,
}

impl Backoff {
    /// The delay in jiffies before the next connect attempt, given the
    /// sysctls `min`/`max` (jiffies) and a random number; advances the
    /// ceiling.
    pub fn next_delay(&mut self, min: u64, max: u64, rand: u64) -> u64 {
        if self.ceiling == 0 {
            self.ceiling = min.max(1);
            return 0;
        }
        let delay = rand.checked_rem(self.ceiling).unwrap_or(0);
        self.ceiling = self.ceiling.saturating_mul(2).min(max.max(1));
        delay
    }

    /// The connection came up: the next reconnect is immediate again.
    pub fn reset(&mut self) {
        self.ceiling = 0;
    }
}

/// What the receive side of a connection owes the peer in acknowledgements
/// (C: `i_ack_next`, `IB_ACK_REQUESTED`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckState {
    /// The sequence number of the last message received complete (what
    /// `h_ack` carries), 0 before any.
    pub next: u64,
    /// The peer asked for an ack (`RDS_FLAG_ACK_REQUIRED`) that has not
    /// been sent yet.
    pub requested: bool,
    /// `next` moved since the last ack the peer was sent (piggybacked or
    /// not).
    pub unsent: bool,
}

impl AckState {
    /// A message with sequence number `seq` arrived complete (and was
    /// accepted); `ack_required` is its `RDS_FLAG_ACK_REQUIRED`.
    pub fn received(&mut self, seq: u64, ack_required: bool) {
        self.next = seq;
        self.unsent = true;
        self.requested |= ack_required;
    }

    /// The value to send in `h_ack`; the ack counts as sent.
    pub fn piggyback(&mut self) -> u64 {
        self.unsent = false;
        self.requested = false;
        self.next
    }

    /// Whether an ack-only frame is due now: the peer asked for one.
    #[must_use]
    pub fn due(&self) -> bool {
        self.requested
    }

    /// A connection reset: C zeroes `i_ack_next` in shutdown.
    pub fn reset(&mut self) {
        *self = AckState::default();
    }
}

/// [`AckState`] in atomics, for a connection whose frames carry piggybacked
/// acks from any context without taking the connection's lock: the same
/// rules, with `&self` methods. `received` and `reset` are meant to be called
/// under the connection's lock (they race only with `piggyback` and `take`);
/// a race between a receive and a piggyback at worst sends the same ack
/// twice, never loses one.
#[derive(Debug, Default)]
pub struct AtomicAckState {
    /// [`AckState::next`].
    next: core::sync::atomic::AtomicU64,
    /// [`AckState::unsent`] (bit 0) and [`AckState::requested`] (bit 1).
    owed: core::sync::atomic::AtomicU8,
}

const ACK_UNSENT: u8 = 1;
const ACK_REQUESTED: u8 = 2;

impl AtomicAckState {
    /// [`AckState::received`].
    pub fn received(&self, seq: u64, ack_required: bool) {
        use core::sync::atomic::Ordering;
        self.next.store(seq, Ordering::Release);
        let bits = if ack_required {
            ACK_UNSENT | ACK_REQUESTED
        } else {
            ACK_UNSENT
        };
        self.owed.fetch_or(bits, Ordering::AcqRel);
    }

    /// [`AckState::piggyback`].
    pub fn piggyback(&self) -> u64 {
        use core::sync::atomic::Ordering;
        self.owed.swap(0, Ordering::AcqRel);
        self.next.load(Ordering::Acquire)
    }

    /// The value of an ack-only frame if any ack is owed (moved since it was
    /// last sent, or requested), which then counts as sent.
    pub fn take(&self) -> Option<u64> {
        use core::sync::atomic::Ordering;
        if self.owed.swap(0, Ordering::AcqRel) == 0 {
            None
        } else {
            Some(self.next.load(Ordering::Acquire))
        }
    }

    /// [`AckState::due`].
    #[must_use]
    pub fn due(&self) -> bool {
        self.owed.load(core::sync::atomic::Ordering::Acquire) & ACK_REQUESTED != 0
    }

    /// The state as an [`AckState`] (a snapshot).
    #[must_use]
    pub fn snapshot(&self) -> AckState {
        use core::sync::atomic::Ordering;
        let owed = self.owed.load(Ordering::Acquire);
        AckState {
            next: self.next.load(Ordering::Acquire),
            requested: owed & ACK_REQUESTED != 0,
            unsent: owed & ACK_UNSENT != 0,
        }
    }

    /// [`AckState::reset`].
    pub fn reset(&self) {
        use core::sync::atomic::Ordering;
        self.next.store(0, Ordering::Release);
        self.owed.store(0, Ordering::Release);
    }
}

/// Whether a message with sequence number `seq` on the retransmit list is
/// covered by an ack of `ack` (C: `rds_send_is_acked`, plain comparison).
#[must_use]
pub const fn is_acked(seq: u64, ack: u64) -> bool {
    seq <= ack
}

/// What a reset does to a message that was handed to the transport and not
/// acknowledged (C: `rds_send_path_reset` and the check in
/// `rds_send_xmit`, which drops only messages with an RDMA operation: C
/// sends an atomic again, so the peer may execute it twice; rds-rs drops
/// it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnReset {
    /// Sent again after the reconnect, marked `RETRANSMITTED` and
    /// `ACK_REQUIRED`, at the head of the send queue.
    Retransmit,
    /// Never sent again: it carries an RDMA or atomic operation, which is
    /// reported `RDS_RDMA_DROPPED`.
    Drop,
}

/// [`OnReset`] for a message that does (`has_op`) or does not carry an
/// RDMA or atomic operation.
#[must_use]
pub const fn on_reset(has_op: bool) -> OnReset {
    if has_op {
        OnReset::Drop
    } else {
        OnReset::Retransmit
    }
}

/// The bytes a message is charged beyond its payload, on the sender's send
/// buffer and on the receiver's receive buffer (rds-rs; C charges the
/// payload only, so 0-byte messages cost nothing there): about what the
/// kernel keeps per message, as other socket families charge an skb's
/// truesize.
pub const MSG_OVERHEAD: u32 = 256;

/// What a message of `len` payload bytes is charged ([`MSG_OVERHEAD`]
/// included).
#[must_use]
pub const fn msg_charge(len: u32) -> u32 {
    len.saturating_add(MSG_OVERHEAD)
}

/// The most completion notifications a socket may have outstanding (issued
/// with an operation that may report, or queued and not yet read): past it,
/// `sendmsg` of another such operation fails with `ENOBUFS` (rds-rs).
pub const NOTIFY_MAX: u32 = 4096;

/// Failed r_key lookups a socket may make in a burst before it is limited
/// ([`GuessLimit`]).
pub const GUESS_BURST: u64 = 64;
/// Failed r_key lookups a limited socket regains per second.
pub const GUESS_PER_SEC: u64 = 64;

/// The rate limit on failed r_key lookups of one socket (rds-rs, against
/// r_key guessing): a token bucket of [`GUESS_BURST`] tokens refilled at
/// [`GUESS_PER_SEC`] per second; each failed lookup takes a token, and while
/// none is left, operations of the socket fail without a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuessLimit {
    /// Tokens left, in billionths of a token: a nanosecond then refills a
    /// whole number of them ([`GUESS_PER_SEC`]), so no fraction of the
    /// refill is lost however often the bucket is brought up to date.
    nano: u64,
    /// When `nano` was last brought up to date (nanoseconds).
    at_ns: u64,
}

/// A billion (tokens are counted in billionths).
const NANO: u64 = 1_000_000_000;

impl GuessLimit {
    /// A full bucket at time `now_ns`.
    #[must_use]
    pub const fn new(now_ns: u64) -> Self {
        GuessLimit {
            nano: GUESS_BURST * NANO,
            at_ns: now_ns,
        }
    }

    fn refill(&mut self, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.at_ns);
        // GUESS_PER_SEC tokens per 1e9 ns = GUESS_PER_SEC nano-tokens per ns.
        let gained = dt.saturating_mul(GUESS_PER_SEC);
        self.nano = self.nano.saturating_add(gained).min(GUESS_BURST * NANO);
        self.at_ns = self.at_ns.max(now_ns);
    }

    /// Whether a lookup may be made now (a token is left).
    pub fn allows(&mut self, now_ns: u64) -> bool {
        self.refill(now_ns);
        self.nano >= NANO
    }

    /// A lookup failed: takes a token (none when empty).
    pub fn failed(&mut self, now_ns: u64) {
        self.refill(now_ns);
        self.nano = self.nano.saturating_sub(NANO);
    }
}
