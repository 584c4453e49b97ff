//! Connection states and transitions (net/rds/rds.h enum rds_conn_state,
//! net/rds/threads.c, net/rds/connection.c), the reconnect backoff
//! (threads.c rds_queue_reconnect), acknowledgement state (ib_recv.c
//! rds_ib_set_ack, rds_ib_piggyb_ack), retransmission (send.c
//! rds_send_is_acked, rds_send_path_reset), and rds-rs's per-socket limits.

use rds_proto::{
    is_acked, msg_charge, on_reset, AckState, Backoff, ConnState, GuessLimit, OnReset, GUESS_BURST,
    GUESS_PER_SEC, MSG_OVERHEAD, NOTIFY_MAX, RDS_INFO_CONNECTION_FLAG_CONNECTED,
    RDS_INFO_CONNECTION_FLAG_CONNECTING, RDS_INFO_CONNECTION_FLAG_SENDING,
};

use ConnState::{Connecting, Disconnecting, Down, Error, Resetting, Up};

const ALL: [ConnState; 6] = [Down, Connecting, Disconnecting, Up, Resetting, Error];

// --- ConnState ---------------------------------------------------------------------------------

#[test]
fn numbering_matches_enum_rds_conn_state() {
    // RDS_CONN_DOWN = 0, CONNECTING, DISCONNECTING, UP, RESETTING, ERROR.
    assert_eq!(Down as u8, 0);
    assert_eq!(Connecting as u8, 1);
    assert_eq!(Disconnecting as u8, 2);
    assert_eq!(Up as u8, 3);
    assert_eq!(Resetting as u8, 4);
    assert_eq!(Error as u8, 5);
    for (i, s) in ALL.iter().enumerate() {
        assert_eq!(usize::from(*s as u8), i);
    }
    // Ord follows the numbers.
    let mut sorted = ALL;
    sorted.sort();
    assert_eq!(sorted, ALL);
}

#[test]
fn from_u8_round_trip() {
    for s in ALL {
        assert_eq!(ConnState::from_u8(s as u8), Some(s));
    }
    for n in 0..=u8::MAX {
        match ConnState::from_u8(n) {
            Some(s) => {
                assert!(n < 6);
                assert_eq!(s as u8, n);
            }
            None => assert!(n >= 6, "{n}"),
        }
    }
}

/// The transitions the state machine makes (see `ConnState::may_become`).
const ALLOWED: [(ConnState, ConnState); 10] = [
    (Down, Connecting),
    (Connecting, Up),
    (Connecting, Down),
    (Up, Error),
    (Connecting, Error),
    (Up, Disconnecting),
    (Error, Disconnecting),
    (Connecting, Disconnecting),
    (Disconnecting, Down),
    (Disconnecting, Error),
];

#[test]
fn transition_table() {
    let mut n = 0;
    for from in ALL {
        for to in ALL {
            assert_eq!(
                from.may_become(to),
                ALLOWED.contains(&(from, to)),
                "{from:?} -> {to:?}"
            );
            n += usize::from(from.may_become(to));
        }
    }
    assert_eq!(n, ALLOWED.len());
    // No state "moves" to itself (C's Down -> Down cmpxchg in
    // rds_conn_shutdown is a test, not a move).
    for s in ALL {
        assert!(!s.may_become(s), "{s:?}");
    }
    // Resetting is unused: nothing enters or leaves it.
    for s in ALL {
        assert!(
            !s.may_become(Resetting) && !Resetting.may_become(s),
            "{s:?}"
        );
    }
}

#[test]
fn transition_graph_cycles() {
    // Every used state is reachable from Down, and Down from every used
    // state: a connection can always come back up and go down again.
    fn reachable(from: ConnState) -> Vec<ConnState> {
        let mut seen = vec![from];
        let mut i = 0;
        while i < seen.len() {
            let s = seen[i];
            for t in ALL {
                if s.may_become(t) && !seen.contains(&t) {
                    seen.push(t);
                }
            }
            i += 1;
        }
        seen
    }
    let from_down = reachable(Down);
    for s in [Down, Connecting, Disconnecting, Up, Error] {
        assert!(from_down.contains(&s), "{s:?}");
        assert!(reachable(s).contains(&Down), "{s:?}");
    }
    assert!(!from_down.contains(&Resetting));
    // Up is left only through Error or Disconnecting.
    for t in ALL {
        assert_eq!(Up.may_become(t), t == Error || t == Disconnecting, "{t:?}");
    }
}

#[test]
fn info_flags() {
    assert_eq!(RDS_INFO_CONNECTION_FLAG_SENDING, 0x01);
    assert_eq!(RDS_INFO_CONNECTION_FLAG_CONNECTING, 0x02);
    assert_eq!(RDS_INFO_CONNECTION_FLAG_CONNECTED, 0x04);
    for s in ALL {
        let state_bits = match s {
            Connecting => RDS_INFO_CONNECTION_FLAG_CONNECTING,
            Up => RDS_INFO_CONNECTION_FLAG_CONNECTED,
            _ => 0,
        };
        assert_eq!(s.info_flags(false), state_bits, "{s:?}");
        assert_eq!(
            s.info_flags(true),
            state_bits | RDS_INFO_CONNECTION_FLAG_SENDING,
            "{s:?}"
        );
    }
}

// --- Backoff -----------------------------------------------------------------------------------

#[test]
fn backoff_first_delay_is_zero() {
    let mut b = Backoff::default();
    assert_eq!(b.ceiling, 0);
    assert_eq!(b.next_delay(100, 1000, u64::MAX), 0);
    assert_eq!(b.ceiling, 100);
}

#[test]
fn backoff_doubles_to_max() {
    let mut b = Backoff::default();
    assert_eq!(b.next_delay(100, 1000, 12345), 0);
    let mut ceilings = vec![b.ceiling];
    for _ in 0..6 {
        let before = b.ceiling;
        // rand % ceiling: a random of ceiling - 1 (on a copy) gives the
        // longest delay.
        let mut copy = b;
        assert_eq!(copy.next_delay(100, 1000, before - 1), before - 1);
        assert_eq!(b.next_delay(100, 1000, 12345), 12345 % before);
        assert!(12345 % before < before);
        ceilings.push(b.ceiling);
    }
    assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000, 1000]);
}

#[test]
fn backoff_delay_is_below_the_ceiling() {
    let mut b = Backoff::default();
    b.next_delay(10, 80, 0);
    for rand in [0, 1, 9, 10, 11, 79, 80, u64::MAX] {
        let ceiling = b.ceiling;
        let d = b.next_delay(10, 80, rand);
        assert_eq!(d, rand % ceiling);
        assert!(d < ceiling);
    }
    assert_eq!(b.ceiling, 80);
}

#[test]
fn backoff_reset() {
    let mut b = Backoff::default();
    for _ in 0..5 {
        b.next_delay(100, 1000, 7);
    }
    assert_eq!(b.ceiling, 1000);
    b.reset();
    assert_eq!(b, Backoff::default());
    assert_eq!(b.next_delay(100, 1000, 999), 0);
    assert_eq!(b.ceiling, 100);
    assert_eq!(b.next_delay(100, 1000, 999), 99);
}

#[test]
fn backoff_zero_sysctls() {
    // min 0: the ceiling starts at 1 (no division by 0), so the next delay
    // is 0, then it doubles to max.
    let mut b = Backoff::default();
    assert_eq!(b.next_delay(0, 8, 5), 0);
    assert_eq!(b.ceiling, 1);
    assert_eq!(b.next_delay(0, 8, 5), 0);
    assert_eq!(b.ceiling, 2);
    assert_eq!(b.next_delay(0, 8, 5), 1);
    assert_eq!(b.ceiling, 4);
    // max 0: the ceiling stays at 1, every delay 0.
    let mut b = Backoff::default();
    for _ in 0..5 {
        assert_eq!(b.next_delay(0, 0, u64::MAX), 0);
        assert_eq!(b.ceiling, 1);
    }
    let mut b = Backoff::default();
    assert_eq!(b.next_delay(50, 0, 3), 0);
    assert_eq!(b.ceiling, 50);
    assert_eq!(b.next_delay(50, 0, 49), 49);
    assert_eq!(b.ceiling, 1);
    assert_eq!(b.next_delay(50, 0, 49), 0);
    // min above max: min first, then max (C's min(2 * ceiling, max)).
    let mut b = Backoff::default();
    b.next_delay(500, 100, 0);
    assert_eq!(b.ceiling, 500);
    b.next_delay(500, 100, 0);
    assert_eq!(b.ceiling, 100);
}

#[test]
fn backoff_large_values_saturate() {
    let mut b = Backoff::default();
    assert_eq!(b.next_delay(u64::MAX, u64::MAX, 0), 0);
    assert_eq!(b.ceiling, u64::MAX);
    assert_eq!(b.next_delay(u64::MAX, u64::MAX, u64::MAX), 0);
    assert_eq!(b.next_delay(u64::MAX, u64::MAX, u64::MAX - 1), u64::MAX - 1);
    assert_eq!(b.ceiling, u64::MAX);
    let mut b = Backoff {
        ceiling: (1 << 63) + 1,
    };
    assert_eq!(b.next_delay(1, u64::MAX, 1 << 63), 1 << 63);
    assert_eq!(b.ceiling, u64::MAX);
    let mut b = Backoff {
        ceiling: (1 << 63) + 1,
    };
    b.next_delay(1, 1 << 40, 0);
    assert_eq!(b.ceiling, 1 << 40);
}

// --- AckState ----------------------------------------------------------------------------------

#[test]
fn ack_state() {
    let mut a = AckState::default();
    assert_eq!(
        a,
        AckState {
            next: 0,
            requested: false,
            unsent: false
        }
    );
    assert!(!a.due());
    a.received(5, false);
    assert_eq!(
        a,
        AckState {
            next: 5,
            requested: false,
            unsent: true
        }
    );
    // Not asked for: no ack-only frame is due, but one piggybacks.
    assert!(!a.due());
    assert_eq!(a.piggyback(), 5);
    assert!(!a.unsent && !a.requested);
    // Asked for: due until sent, and stays asked for across later
    // messages that do not ask.
    a.received(6, true);
    assert!(a.due());
    a.received(7, false);
    assert!(a.due());
    assert_eq!(a.next, 7);
    assert_eq!(a.piggyback(), 7);
    assert!(!a.due());
    // Piggybacking again repeats the value.
    assert_eq!(a.piggyback(), 7);
    // next is the last sequence received (C: i_ack_next = seq), even lower.
    a.received(3, false);
    assert_eq!(a.next, 3);
    a.received(u64::MAX, true);
    assert_eq!(a.next, u64::MAX);
    a.reset();
    assert_eq!(a, AckState::default());
    assert_eq!(a.piggyback(), 0);
}

/// The atomic form follows the same rules, checked step by step against the
/// plain model.
#[test]
fn atomic_ack_state_matches_model() {
    let a = rds_proto::AtomicAckState::default();
    let mut m = AckState::default();
    let steps: [(u8, u64, bool); 12] = [
        (0, 5, false),
        (1, 0, false),
        (2, 0, false),
        (0, 6, true),
        (0, 7, false),
        (2, 0, false),
        (2, 0, false),
        (0, 3, false),
        (1, 0, false),
        (0, u64::MAX, true),
        (3, 0, false),
        (2, 0, false),
    ];
    for (op, seq, req) in steps {
        match op {
            0 => {
                a.received(seq, req);
                m.received(seq, req);
            }
            1 => assert_eq!(a.piggyback(), m.piggyback()),
            2 => {
                let want = (m.unsent || m.requested).then(|| m.piggyback());
                assert_eq!(a.take(), want);
            }
            _ => {
                a.reset();
                m.reset();
            }
        }
        assert_eq!(a.snapshot(), m);
        assert_eq!(a.due(), m.due());
    }
}

// --- retransmission ---------------------------------------------------------------------------

#[test]
fn is_acked_is_plain_comparison() {
    assert!(is_acked(0, 0));
    assert!(is_acked(5, 5));
    assert!(is_acked(4, 5));
    assert!(!is_acked(6, 5));
    assert!(is_acked(0, u64::MAX));
    assert!(is_acked(u64::MAX, u64::MAX));
    // No wrap-around arithmetic (C compares the u64s).
    assert!(!is_acked(u64::MAX, 0));
    assert!(!is_acked(1, 0));
}

#[test]
fn reset_drops_only_operations() {
    assert_eq!(on_reset(false), OnReset::Retransmit);
    assert_eq!(on_reset(true), OnReset::Drop);
}

// --- per-socket limits -------------------------------------------------------------------------

#[test]
fn msg_charge_saturates() {
    assert_eq!(MSG_OVERHEAD, 256);
    assert_eq!(NOTIFY_MAX, 4096);
    assert_eq!(msg_charge(0), 256);
    assert_eq!(msg_charge(100), 356);
    assert_eq!(msg_charge(1 << 20), (1 << 20) + 256);
    assert_eq!(msg_charge(u32::MAX - 256), u32::MAX);
    assert_eq!(msg_charge(u32::MAX - 255), u32::MAX);
    assert_eq!(msg_charge(u32::MAX), u32::MAX);
}

/// Nanoseconds for one token to come back.
const NS_PER_TOKEN: u64 = 1_000_000_000 / GUESS_PER_SEC;

/// Takes tokens at `now` while allowed; returns how many.
fn drain(g: &mut GuessLimit, now: u64) -> u64 {
    let mut n = 0;
    while g.allows(now) {
        g.failed(now);
        n += 1;
        assert!(n <= GUESS_BURST, "more than a burst at one instant");
    }
    n
}

#[test]
fn guess_constants() {
    assert_eq!(GUESS_BURST, 64);
    assert_eq!(GUESS_PER_SEC, 64);
    assert_eq!(NS_PER_TOKEN, 15_625_000);
}

#[test]
fn guess_burst_then_refused() {
    let t = 1_000_000_000_000;
    let mut g = GuessLimit::new(t);
    for i in 0..GUESS_BURST {
        assert!(g.allows(t), "failure {i}");
        g.failed(t);
    }
    assert!(!g.allows(t));
    assert!(!g.allows(t));
    // More failures on an empty bucket change nothing.
    let before = g;
    g.failed(t);
    assert_eq!(g, before);
    assert!(!g.allows(t));
    // allows() alone takes nothing.
    let mut g = GuessLimit::new(t);
    for _ in 0..1000 {
        assert!(g.allows(t));
    }
    assert_eq!(drain(&mut g, t), GUESS_BURST);
}

#[test]
fn guess_refill_rate() {
    let t0 = 5;
    let mut g = GuessLimit::new(t0);
    assert_eq!(drain(&mut g, t0), GUESS_BURST);
    // A token comes back after 1/64 s, not before.
    let mut early = g;
    assert!(!early.allows(t0 + NS_PER_TOKEN - 1));
    assert!(g.allows(t0 + NS_PER_TOKEN));
    g.failed(t0 + NS_PER_TOKEN);
    assert!(!g.allows(t0 + NS_PER_TOKEN));
    // 10 more 1/64 s later: 10 tokens.
    assert_eq!(drain(&mut g, t0 + 11 * NS_PER_TOKEN), 10);
    // A second after that: GUESS_PER_SEC.
    let t1 = t0 + 11 * NS_PER_TOKEN + 1_000_000_000;
    assert_eq!(drain(&mut g, t1), GUESS_PER_SEC);
    // Half a second: half.
    assert_eq!(drain(&mut g, t1 + 500_000_000), GUESS_PER_SEC / 2);
    // An hour: no more than the burst.
    assert_eq!(drain(&mut g, t1 + 3_600_000_000_000), GUESS_BURST);
}

#[test]
fn guess_refill_in_small_steps() {
    // Refilled a little at each of many calls (1 µs apart: 64 millionths
    // of a token each), the bucket regains a token per 1/64 s all the same.
    // Steps that are not a whole number of millionths of a token (100 ns:
    // 6.4; 15 ns: 0.96) lose nothing either.
    for (step, span) in [
        (1000, 1_000_000_000),
        (100, 125_000_000),
        (15, 2 * NS_PER_TOKEN),
    ] {
        let mut g = GuessLimit::new(0);
        assert_eq!(drain(&mut g, 0), GUESS_BURST);
        let mut now = 0;
        let mut granted = 0;
        while now < span {
            now += step;
            if g.allows(now) {
                g.failed(now);
                granted += 1;
            }
        }
        assert_eq!(granted, span / NS_PER_TOKEN, "step {step}");
    }
}

#[test]
fn guess_time_going_backwards() {
    let t = 10 * 1_000_000_000;
    let mut g = GuessLimit::new(t);
    assert_eq!(drain(&mut g, t), GUESS_BURST);
    // Earlier times: no tokens, no harm, and the clock does not go back.
    for back in [1, NS_PER_TOKEN, t, t - 1] {
        assert!(!g.allows(t - back), "{back}");
        g.failed(t - back);
    }
    assert!(!g.allows(0));
    // The refill still counts from t, not from the earlier times.
    assert!(!g.allows(t + NS_PER_TOKEN - 1));
    assert!(g.allows(t + NS_PER_TOKEN));
    // A bucket made "in the future" is full and stays so until then.
    let mut g = GuessLimit::new(t);
    assert_eq!(drain(&mut g, 0), GUESS_BURST);
    assert!(!g.allows(t));
    assert!(g.allows(t + NS_PER_TOKEN));
}

#[test]
fn guess_saturates_at_the_end_of_time() {
    let mut g = GuessLimit::new(0);
    assert_eq!(drain(&mut g, 0), GUESS_BURST);
    // 2^64 ns of refill saturates (no overflow), to a full bucket.
    assert_eq!(drain(&mut g, u64::MAX), GUESS_BURST);
    assert!(!g.allows(u64::MAX));
    assert!(!g.allows(0));
    let mut g = GuessLimit::new(u64::MAX);
    assert_eq!(drain(&mut g, u64::MAX), GUESS_BURST);
    assert!(!g.allows(u64::MAX));
    let mut g = GuessLimit::new(u64::MAX - NS_PER_TOKEN);
    assert_eq!(drain(&mut g, u64::MAX - NS_PER_TOKEN), GUESS_BURST);
    assert_eq!(drain(&mut g, u64::MAX), 1);
    // Differences above u64::MAX / GUESS_PER_SEC saturate their product.
    let mut g = GuessLimit::new(1);
    assert_eq!(drain(&mut g, 1), GUESS_BURST);
    assert_eq!(drain(&mut g, u64::MAX / GUESS_PER_SEC + 2), GUESS_BURST);
}
