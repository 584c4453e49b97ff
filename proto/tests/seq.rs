//! Sequence numbers (net/rds/recv.c `rds_recv_incoming`, net/rds/connection.c
//! `__rds_conn_path_init`), ACK pacing (net/rds/send.c `rds_send_xmit`) and
//! send-buffer admission (net/rds/send.c `rds_send_queue_rm`).

use proptest::prelude::*;
use rds_proto::{
    misplaced, sndbuf_ack_required, sndbuf_admits, AckPacer, Replays, RxSeq, SeqCheck, TxSeq,
    MAX_UNACKED_BYTES, MAX_UNACKED_PACKETS,
};

// --- RxSeq -------------------------------------------------------------------

#[test]
fn rx_starts_at_zero_and_follows() {
    let mut rx = RxSeq::new();
    assert_eq!(rx, RxSeq::default());
    assert_eq!(rx.next, 0);
    assert_eq!(rx.check(1, false), SeqCheck::Accept);
    assert_eq!(rx.next, 2);
    // Sequence numbers may skip forward (messages dropped before the wire).
    assert_eq!(rx.check(10, false), SeqCheck::Accept);
    assert_eq!(rx.next, 11);
}

#[test]
fn rx_drops_only_old_retransmissions() {
    let mut rx = RxSeq {
        next: 11,
        replays: Replays::Accepted,
    };
    // Old and retransmitted: dropped, next unchanged (s_recv_drop_old_seq).
    assert_eq!(rx.check(10, true), SeqCheck::OldRetransmission);
    assert_eq!(rx.check(0, true), SeqCheck::OldRetransmission);
    assert_eq!(rx.next, 11);
    // Not old: accepted even when retransmitted.
    assert_eq!(rx.check(11, true), SeqCheck::Accept);
    assert_eq!(rx.next, 12);
    assert_eq!(rx.check(20, true), SeqCheck::Accept);
    assert_eq!(rx.next, 21);
    // Old but not marked retransmitted: accepted under C's rule, and next goes back.
    assert_eq!(rx.check(5, false), SeqCheck::Accept);
    assert_eq!(rx.next, 6);
    // C's rule stays C's rule across incarnations.
    rx.begin_incarnation();
    assert_eq!(rx.replays, Replays::Accepted);
    assert_eq!(rx.check(5, false), SeqCheck::Accept);
}

#[test]
fn rx_refuses_replays_within_an_incarnation() {
    let mut rx = RxSeq::per_incarnation();
    assert_eq!(rx.next, 0);
    assert_eq!(rx.check(1, false), SeqCheck::Accept);
    assert_eq!(rx.replays, Replays::Refused);
    assert_eq!(rx.check(2, false), SeqCheck::Accept);
    // The same number again, or an older one, without RETRANSMITTED: a replay,
    // next unchanged.
    assert_eq!(rx.check(2, false), SeqCheck::Replay);
    assert_eq!(rx.check(1, false), SeqCheck::Replay);
    assert_eq!(rx.next, 3);
    // With RETRANSMITTED: C's old retransmission.
    assert_eq!(rx.check(2, true), SeqCheck::OldRetransmission);
    assert_eq!(rx.check(3, false), SeqCheck::Accept);
    assert_eq!(rx.next, 4);
}

#[test]
fn rx_new_incarnation_starts_over() {
    let mut rx = RxSeq::per_incarnation();
    for seq in 1..=50 {
        assert_eq!(rx.check(seq, false), SeqCheck::Accept);
    }
    // A reconnect: the peer first resends what it saw no ack for (dropped as old
    // retransmissions, or accepted where new), and may have restarted from 1.
    rx.begin_incarnation();
    assert_eq!(rx.check(49, true), SeqCheck::OldRetransmission);
    assert_eq!(rx.check(51, true), SeqCheck::Accept);
    assert_eq!(rx.replays, Replays::FirstAccepted);
    // The restarted peer's first message: accepted, next goes back.
    assert_eq!(rx.check(1, false), SeqCheck::Accept);
    assert_eq!(rx.next, 2);
    assert_eq!(rx.replays, Replays::Refused);
    assert_eq!(rx.check(1, false), SeqCheck::Replay);
    assert_eq!(rx.check(2, false), SeqCheck::Accept);
}

// --- TxSeq -------------------------------------------------------------------

/// RDS/TCP multipath, an acceptor that restarted (or reaped the connection): the peer's path 3
/// connects before its path 0, and the acceptor, before the handshake, puts it on path 0. What
/// it brings is numbered by path 3; once the handshake shows it was path 3's and it is closed,
/// path 0 expects again what it did before, and takes the retransmissions of its own peer path.
#[test]
fn rx_given_back_after_a_misplaced_connection() {
    let mut path0 = RxSeq::new();
    assert_eq!(path0.check(4, false), SeqCheck::Accept);
    let saved = path0.save();
    // The peer's path 3: a retransmission and a new message, far ahead of path 0's numbers.
    assert_eq!(path0.check(40, true), SeqCheck::Accept);
    assert_eq!(path0.check(41, false), SeqCheck::Accept);
    assert_eq!(path0.next, 42);
    // Kept so, path 0's own retransmissions would be dropped as old.
    let mut kept = path0;
    assert_eq!(kept.check(5, true), SeqCheck::OldRetransmission);
    // The handshake: 8 paths, ports numbered by path; path 3's port on path 0.
    let fport = 32768 + 3;
    assert!(misplaced(8, true, fport, 0));
    path0.restore(saved);
    assert_eq!(
        path0,
        RxSeq {
            next: 5,
            ..RxSeq::new()
        }
    );
    for seq in 5..8 {
        assert_eq!(path0.check(seq, true), SeqCheck::Accept);
    }
    // What path 0 had received before still goes as old.
    assert_eq!(path0.check(4, true), SeqCheck::OldRetransmission);
    // Path 3 takes in what the misplaced connection reached: the peer's retransmissions of
    // 40 and 41 on the real path 3 go as old, 42 is new.
    let mut path3 = RxSeq::new();
    path3.absorb(kept.save());
    assert_eq!(path3.check(40, true), SeqCheck::OldRetransmission);
    assert_eq!(path3.check(41, true), SeqCheck::OldRetransmission);
    assert_eq!(path3.check(42, true), SeqCheck::Accept);
    // Never backwards.
    let mut ahead = RxSeq {
        next: 100,
        ..RxSeq::new()
    };
    ahead.absorb(kept.save());
    assert_eq!(ahead.next, 100);
}

#[test]
fn tx_starts_at_one() {
    let mut tx = TxSeq::new();
    assert_eq!(tx, TxSeq::default());
    assert_eq!(tx.take(), 1);
    assert_eq!(tx.take(), 2);
    assert_eq!(tx.next, 3);
}

#[test]
fn tx_wraps() {
    let mut tx = TxSeq { next: u64::MAX };
    assert_eq!(tx.take(), u64::MAX);
    assert_eq!(tx.take(), 0);
    assert_eq!(tx.take(), 1);
}

// --- AckPacer ----------------------------------------------------------------

#[test]
fn pacer_defaults() {
    assert_eq!(MAX_UNACKED_PACKETS, 8);
    assert_eq!(MAX_UNACKED_BYTES, 16 * 1024 * 1024);
    assert_eq!(AckPacer::default(), AckPacer::new(8, 16 << 20));
}

#[test]
fn pacer_every_ninth_small_message() {
    // 8 packets are taken from the budget; the 9th finds it empty and asks.
    let mut p = AckPacer::default();
    let asks: Vec<bool> = (0..27).map(|_| p.on_send(100, 8, 16 << 20)).collect();
    let want: Vec<bool> = (0..27).map(|i| i % 9 == 8).collect();
    assert_eq!(asks, want);
}

#[test]
fn pacer_bytes() {
    let mut p = AckPacer::new(8, 1000);
    assert!(!p.on_send(1000, 8, 1000)); // cp_unacked_bytes < len is false
    assert_eq!(
        p,
        AckPacer {
            packets: 7,
            bytes: 0
        }
    );
    assert!(!p.on_send(0, 8, 1000)); // zero-length messages still count a packet
    assert_eq!(p.packets, 6);
    assert!(p.on_send(1, 8, 1000));
    assert_eq!(p, AckPacer::new(8, 1000));
    // A message bigger than the whole budget always asks, and refills.
    assert!(p.on_send(5000, 8, 1000));
    assert!(p.on_send(5000, 8, 1000));
    assert_eq!(p, AckPacer::new(8, 1000));
}

#[test]
fn pacer_reads_the_sysctls_at_refill() {
    let mut p = AckPacer::new(0, 0);
    assert!(p.on_send(0, 2, 50));
    assert_eq!(p, AckPacer::new(2, 50));
}

// --- rds_send_queue_rm -----------------------------------------------------------

#[test]
fn sndbuf_rule() {
    // rs_snd_bytes < rds_sk_sndbuf(rs): the old value is tested, so the last
    // message may overshoot.
    assert!(sndbuf_admits(0, 1000));
    assert!(sndbuf_admits(999, 1000));
    assert!(!sndbuf_admits(1000, 1000));
    assert!(!sndbuf_admits(0, 0));
    // ACK_REQUIRED once rs_snd_bytes (after adding) >= sndbuf / 2.
    assert!(!sndbuf_ack_required(499, 1000));
    assert!(sndbuf_ack_required(500, 1000));
    assert!(sndbuf_ack_required(1500, 1001));
    assert!(sndbuf_ack_required(0, 1));
}

// --- properties -------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    // Whatever a misplaced connection delivered, the state given back is the one saved, and
    // the path's own peer's retransmissions from there on are taken.
    #[test]
    fn rx_restore_undoes_any_checks(next in any::<u64>(), per_incarnation in any::<bool>(),
                                    other in prop::collection::vec((any::<u64>(), any::<bool>()), 0..20),
                                    n in 1u64..20) {
        let mut rx = if per_incarnation { RxSeq::per_incarnation() } else { RxSeq::new() };
        rx.next = next;
        let before = rx;
        let saved = rx.save();
        for (seq, re) in other {
            rx.check(seq, re);
        }
        rx.restore(saved);
        prop_assert_eq!(rx, before);
        for seq in next..next.saturating_add(n) {
            prop_assert_eq!(rx.check(seq, true), SeqCheck::Accept);
        }
    }

    #[test]
    fn rx_matches_c(next in any::<u64>(), seq in any::<u64>(), re in any::<bool>()) {
        let mut rx = RxSeq { next, replays: Replays::Accepted };
        let ok = rx.check(seq, re) == SeqCheck::Accept;
        prop_assert_eq!(ok, !(seq < next && re));
        prop_assert_eq!(rx.next, if ok { seq.wrapping_add(1) } else { next });
    }

    #[test]
    fn tx_then_rx_in_order_is_never_dropped(start in any::<u64>(), n in 0usize..50,
                                            re in any::<bool>(), strict in any::<bool>()) {
        // Messages sent in order (across a wrap) are all accepted, marked
        // retransmitted or not, under either rule, as long as the receiver is
        // in step.
        let mut tx = TxSeq { next: start };
        let replays = if strict { Replays::Refused } else { Replays::Accepted };
        let mut rx = RxSeq { next: start, replays };
        for _ in 0..n {
            let s = tx.take();
            prop_assert_eq!(rx.check(s, re), SeqCheck::Accept);
            prop_assert_eq!(rx.next, tx.next);
        }
        prop_assert_eq!(tx.next, start.wrapping_add(n as u64));
    }

    #[test]
    fn pacer_matches_c(
        max_p in 0u32..20,
        max_b in prop_oneof![Just(16u32 << 20), 0u32..10_000, any::<u32>()],
        lens in prop::collection::vec(prop_oneof![0u32..5000, any::<u32>()], 0..64),
    ) {
        let mut p = AckPacer::new(max_p, max_b);
        let (mut cp, mut cb) = (max_p, max_b);
        for len in lens {
            let want = if cp == 0 || cb < len {
                cp = max_p;
                cb = max_b;
                true
            } else {
                cb -= len;
                cp -= 1;
                false
            };
            prop_assert_eq!(p.on_send(len, max_p, max_b), want);
            prop_assert_eq!(p, AckPacer { packets: cp, bytes: cb });
            prop_assert!(p.packets <= max_p && p.bytes <= max_b);
        }
    }

    #[test]
    fn sndbuf_overshoot_is_at_most_one_message(
        sndbuf in 0u32..100_000,
        lens in prop::collection::vec(0u32..20_000, 0..50),
    ) {
        let mut queued = 0u64;
        for len in lens {
            if sndbuf_admits(queued, sndbuf) {
                let before = queued;
                queued += u64::from(len);
                prop_assert!(before < u64::from(sndbuf));
                prop_assert!(queued < u64::from(sndbuf) + u64::from(len));
                prop_assert_eq!(
                    sndbuf_ack_required(queued, sndbuf),
                    queued >= u64::from(sndbuf / 2)
                );
            }
        }
    }
}
