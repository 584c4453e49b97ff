//! Messages queued but not sent yet (rds_rs only): the full send buffer (`EAGAIN`, `SO_SNDTIMEO`,
//! `POLLOUT`, a blocked sender woken), `RDS_CANCEL_SENT_TO` of plain messages,
//! `RDS_INFO_SEND_MESSAGES` / `RDS6_INFO_SEND_MESSAGES` with messages on the queue, and closing
//! sockets or a network namespace with messages queued. Results go to the unpaired file
//! `queued-rs.tap`.
//!
//! C's loopback transport delivers every message within `sendmsg`, so nothing is ever left
//! queued there. These checks hold messages with rds_rs's `loop_hold` test hook
//! (`/sys/kernel/debug/rds_rs/loop_hold`, see [`Hold`]): while it is 1, the loopback transport
//! leaves messages on their connection's queue; once it is 0 again, the next `sendmsg` on that
//! connection (from any socket: a "kicker" here) sends them. The hook is global, so every case
//! resets it (the guard) before it ends.
//!
//! Ports 4800-4849 on 127.0.0.1, 127.0.0.2 and ::1.

use crate::poll::ev_names;
use crate::rdma::{Hold, LOOP_HOLD};
use crate::util::{
    arrival_bound, bound, err_name, in_new_netns, ip_obs, pattern, res_obs, rs_admitted, v4, v6_lo,
    wait_msg_for, Counters, RS_MSG_OVERHEAD,
};
use crate::Report;
use librds::info::{MessageInfo, RDS6_INFO_SEND_MESSAGES, RDS_INFO_SEND_MESSAGES};
use librds::{sockaddr_bytes, RdsSocket, RDS_CANCEL_SENT_TO, SOL_RDS};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const LO: [u8; 4] = [127, 0, 0, 1];
const LO2: [u8; 4] = [127, 0, 0, 2];

/// What `SO_SNDBUF` is set to on the senders whose buffer fills: the kernel doubles it
/// (`sk_sndbuf` 8192) and RDS allows half of that (`rds_sk_sndbuf`: 4096 bytes queued).
const SMALL_SNDBUF: i32 = 4096;

/// The payloads a receiver may see, by label, for order and content checks.
#[derive(Default)]
struct Book(Vec<(String, Vec<u8>)>);

impl Book {
    /// Records a payload of `len` bytes under `label` (contents unique per label) and returns
    /// it.
    fn add(&mut self, label: &str, len: usize) -> Vec<u8> {
        let seed = 0x5155_4555 ^ (self.0.len() as u64 + 1);
        let mut p = pattern(len, seed);
        // The label at the start, so that even short payloads differ.
        let n = label.len().min(len);
        p[..n].copy_from_slice(&label.as_bytes()[..n]);
        self.0.push((label.to_string(), p.clone()));
        p
    }

    /// The label of a payload, or `?LEN` for one that matches none.
    fn name(&self, p: &[u8]) -> String {
        self.0
            .iter()
            .find(|(_, b)| b == p)
            .map_or_else(|| format!("?{}", p.len()), |(l, _)| l.clone())
    }
}

/// Receives `n` messages on `s` (each within [`arrival_bound`]) and names them from `book`, then
/// checks that nothing more arrives within 200 ms: `a,b,c` or `a,b,none` or `a,b,c,+more`.
fn arrivals(s: &RdsSocket, book: &Book, n: usize) -> String {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    for _ in 0..n {
        if !wait_msg_for(s, arrival_bound()) {
            v.push("none".to_string());
            return v.join(",");
        }
        match s.recv(&mut buf, libc::MSG_DONTWAIT) {
            Ok(len) => v.push(book.name(&buf[..len])),
            Err(e) => {
                v.push(err_name(&e));
                return v.join(",");
            }
        }
    }
    if wait_msg_for(s, Duration::from_millis(200)) {
        v.push("+more".into());
    }
    v.join(",")
}

/// Sets `SO_SNDBUF` to [`SMALL_SNDBUF`]; returns what the kernel reports back (`sk_sndbuf`).
fn small_sndbuf(s: &RdsSocket) -> Result<i32, String> {
    s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, SMALL_SNDBUF)
        .map_err(|e| format!("SO_SNDBUF: {e}"))?;
    s.get_int(libc::SOL_SOCKET, libc::SO_SNDBUF)
        .map_err(|e| format!("SO_SNDBUF: {e}"))
}

/// `POLLOUT` of `s` now: `OUT` or `none`.
fn pollout(s: &RdsSocket) -> String {
    match s.poll(libc::POLLOUT, Duration::ZERO) {
        Ok(ev) => ev_names(ev),
        Err(e) => err_name(&e),
    }
}

/// Sends payloads of `len` bytes labelled `prefix0`, `prefix1`, ... from `tx` to `dest`
/// without blocking until one is refused (at most 64): `(accepted, errno of the refusal)`.
fn fill(
    tx: &RdsSocket,
    dest: &SocketAddr,
    book: &mut Book,
    prefix: &str,
    len: usize,
) -> (usize, String) {
    for i in 0..64 {
        let p = book.add(&format!("{prefix}{i}"), len);
        if let Err(e) = tx.send_to_flags(&p, dest, libc::MSG_DONTWAIT) {
            // Never queued: forget it, so that it cannot be mistaken for an arrival.
            book.0.pop();
            return (i, err_name(&e));
        }
    }
    (64, "none".into())
}

fn cancel(s: &RdsSocket, dest: &SocketAddr) -> io::Result<()> {
    let a = sockaddr_bytes(dest);
    s.setsockopt_raw(SOL_RDS, RDS_CANCEL_SENT_TO, Some(&a), a.len())
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    // Whatever an earlier run left, delivery is not held.
    let _ = std::fs::write(LOOP_HOLD, "0");
    r.expect(
        "queued_loop_hold_hook",
        if std::path::Path::new(LOOP_HOLD).exists() {
            "present"
        } else {
            "missing"
        },
        "present",
    );
    sndbuf_full(r)?;
    cancel_sent_to(r)?;
    info_lists(r)?;
    close_with_queued(r)?;
    netns_with_queued(r)?;
    burst_recycled(r)?;
    Ok(())
}

/// Rounds of [`burst_recycled`] before it counts (every spare has a buffer by then: a request
/// that finds none gives one to a spare, and spares keep their buffers).
const BURST_WARM: usize = 5;
/// Rounds of [`burst_recycled`] it counts.
const BURST_ROUNDS: usize = 100;

/// Eight 16 KiB requests and eight 64-byte answers from one socket, interleaved, then all 16
/// read at the other end, round after round (what a socket of rds-stress at depth 8 both
/// ways sends): in steady state every send finds its memory in the socket's pool, a message
/// and, for a request, a buffer that holds it (`rs_msg_alloc` and `rs_payload_alloc` stay
/// still; with 8 spares a pool freed half of each burst, and took the answers' spares, which
/// have no buffer, for requests).
fn burst_recycled(r: &mut Report) -> Result<(), String> {
    let rx_addr = v4(LO, 4806);
    let rx = bound(rx_addr)?;
    let tx = bound(v4(LO, 4807))?;
    for s in [&rx, &tx] {
        crate::util::force_buffers(s, 4 << 20)?;
    }
    let big = pattern(16384, 7);
    let small = pattern(64, 8);
    let mut buf = vec![0u8; 16384];
    let mut round = || -> Result<(), String> {
        for _ in 0..8 {
            for p in [&big, &small] {
                tx.send_to(p, rx_addr)
                    .map_err(|e| format!("send: {}", err_name(&e)))?;
            }
        }
        for i in 0..16 {
            if !wait_msg_for(&rx, arrival_bound()) {
                return Err(format!("message {i} of a burst did not arrive"));
            }
            rx.recv(&mut buf, libc::MSG_DONTWAIT)
                .map_err(|e| format!("recv: {}", err_name(&e)))?;
        }
        Ok(())
    };
    (0..BURST_WARM).try_for_each(|_| round())?;
    let before = Counters::take(&rx)?;
    let run = (0..BURST_ROUNDS).try_for_each(|_| round());
    let after = Counters::take(&rx)?;
    let obs = format!(
        "msg_alloc {} msg_recycled {} payload_alloc {}",
        after.delta_obs(&before, "rs_msg_alloc"),
        after.delta_obs(&before, "rs_msg_recycled"),
        after.delta_obs(&before, "rs_payload_alloc"),
    );
    let sends = (16 * BURST_ROUNDS) as i128;
    let verdict = run.and_then(|()| {
        let ok = after.delta(&before, "rs_msg_alloc") == Some(0)
            && after.delta(&before, "rs_payload_alloc") == Some(0)
            && after.delta(&before, "rs_msg_recycled") == Some(sends);
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected all {sends} sends made in spares, none allocated"
            ))
        }
    });
    r.check("queued_burst_recycled", &obs, verdict);
    Ok(())
}

/// A full send buffer: refusals while full, and what a release does for pollers and blocked
/// senders.
fn sndbuf_full(r: &mut Report) -> Result<(), String> {
    const LEN: usize = 1000;
    let rx_addr = v4(LO, 4800);
    let rx = bound(rx_addr)?;
    let tx = bound(v4(LO, 4801))?;
    let kicker = bound(v4(LO, 4802))?;
    let sk_sndbuf = small_sndbuf(&tx)?;
    r.expect("queued_small_sndbuf", &sk_sndbuf.to_string(), "8192");
    // Admitted while the bytes queued are below sk_sndbuf / 2: the last one may overshoot.
    let limit = (sk_sndbuf / 2) as usize;
    let want = rs_admitted(limit, LEN);
    let mut book = Book::default();
    let flush = book.add("flush", 5);

    {
        let hold = Hold::on()?;
        let (n, stop) = fill(&tx, &rx_addr, &mut book, "m", LEN);
        r.expect(
            "queued_fill_until_full",
            &format!("accepted={n} stop={stop}"),
            &format!("accepted={want} stop=EAGAIN"),
        );
        let extra = book.add("never", LEN);
        r.expect(
            "queued_full_dontwait",
            &res_obs(&tx.send_to_flags(&extra, &rx_addr, libc::MSG_DONTWAIT)),
            "EAGAIN",
        );
        let _ = tx.set_nonblocking(true);
        let res = tx.send_to(&extra, rx_addr);
        let _ = tx.set_nonblocking(false);
        r.expect("queued_full_o_nonblock", &res_obs(&res), "EAGAIN");
        r.expect("queued_full_no_pollout", &pollout(&tx), "none");
        // A blocking send waits out SO_SNDTIMEO.
        let timeo = Duration::from_millis(300);
        let _ = tx.set_send_timeout(Some(timeo));
        let t0 = Instant::now();
        let res = tx.send_to(&extra, rx_addr);
        let took = t0.elapsed();
        let _ = tx.set_send_timeout(Some(arrival_bound()));
        // The kernel sleeps in jiffies: allow for the part of a jiffy that had passed.
        let waited = took + Duration::from_millis(20) >= timeo;
        println!("# blocking send with SO_SNDTIMEO {timeo:?} returned after {took:?}");
        r.expect(
            "queued_full_sndtimeo",
            &format!("{} waited={waited}", res_obs(&res)),
            "ETIMEDOUT waited=true",
        );
        r.expect(
            "queued_full_no_pollout_later",
            &match tx.poll(libc::POLLOUT, Duration::from_millis(200)) {
                Ok(ev) => ev_names(ev),
                Err(e) => err_name(&e),
            },
            "none",
        );
        // A poller waiting for POLLOUT is woken by the release.
        let obs = std::thread::scope(|sc| {
            let poller = sc.spawn(|| match tx.poll(libc::POLLOUT, arrival_bound()) {
                Ok(ev) => ev_names(ev),
                Err(e) => err_name(&e),
            });
            std::thread::sleep(Duration::from_millis(400));
            let early = poller.is_finished();
            drop(hold);
            let kicked = res_obs(&kicker.send_to(&flush, rx_addr));
            let ev = poller.join().unwrap_or_else(|_| "panicked".into());
            format!("early={early} kick={kicked} poll={ev}")
        });
        r.expect(
            "queued_pollout_after_release",
            &obs,
            "early=false kick=OK poll=OUT",
        );
    }
    let order: Vec<String> = (0..want).map(|i| format!("m{i}")).collect();
    r.expect(
        "queued_full_released_arrivals",
        &arrivals(&rx, &book, want + 1),
        &format!("{},flush", order.join(",")),
    );
    r.expect("queued_pollout_when_empty", &pollout(&tx), "OUT");

    // Again, with a sender blocked on the full buffer: it is woken and its message goes after
    // the ones it waited for. The buffer is empty again: the same number fits.
    let mut book = Book::default();
    let flush = book.add("flush", 5);
    {
        let hold = Hold::on()?;
        let (n, stop) = fill(&tx, &rx_addr, &mut book, "m", LEN);
        r.expect(
            "queued_refill_after_release",
            &format!("accepted={n} stop={stop}"),
            &format!("accepted={want} stop=EAGAIN"),
        );
        let blocked = book.add("blocked", LEN);
        let obs = std::thread::scope(|sc| {
            let sender = sc.spawn(|| {
                let t0 = Instant::now();
                (res_obs(&tx.send_to(&blocked, rx_addr)), t0.elapsed())
            });
            std::thread::sleep(Duration::from_millis(400));
            let early = sender.is_finished();
            drop(hold);
            let kicked = res_obs(&kicker.send_to(&flush, rx_addr));
            let (res, took) = sender
                .join()
                .unwrap_or_else(|_| ("panicked".into(), Duration::ZERO));
            println!("# the blocked sender returned after {took:?}");
            format!("early={early} kick={kicked} sender={res}")
        });
        r.expect(
            "queued_blocked_sender_woken",
            &obs,
            "early=false kick=OK sender=OK",
        );
    }
    r.expect(
        "queued_blocked_sender_arrivals",
        &arrivals(&rx, &book, want + 2),
        &format!("{},flush,blocked", order.join(",")),
    );
    Ok(())
}

/// `RDS_CANCEL_SENT_TO` of plain messages held for three destinations: one address and port
/// is cancelled; the same port at another address and another port at the same address are
/// not.
fn cancel_sent_to(r: &mut Report) -> Result<(), String> {
    // 8 messages of 512 bytes charged (payload and overhead) fill a 4096-byte buffer exactly.
    const LEN: usize = 512 - RS_MSG_OVERHEAD;
    let (a_addr, b_addr, c_addr) = (v4(LO, 4811), v4(LO, 4812), v4(LO2, 4811));
    let ra = bound(a_addr)?;
    let rb = bound(b_addr)?;
    let rc = bound(c_addr)?;
    let tx = bound(v4(LO, 4810))?;
    let kicker = bound(v4(LO, 4813))?;
    let sk_sndbuf = small_sndbuf(&tx)?;
    let mut book = Book::default();
    let plan: [(&str, &SocketAddr); 8] = [
        ("a0", &a_addr),
        ("b0", &b_addr),
        ("c0", &c_addr),
        ("a1", &a_addr),
        ("c1", &c_addr),
        ("a2", &a_addr),
        ("b1", &b_addr),
        ("a3", &a_addr),
    ];
    {
        let _hold = Hold::on()?;
        let mut sent = Vec::new();
        for (label, dest) in plan {
            let p = book.add(label, LEN);
            sent.push(res_obs(&tx.send_to_flags(&p, dest, libc::MSG_DONTWAIT)));
        }
        let b2 = book.add("b2", LEN);
        let full = res_obs(&tx.send_to_flags(&b2, &b_addr, libc::MSG_DONTWAIT));
        r.expect(
            "queued_cancel_setup",
            &format!(
                "sk_sndbuf={sk_sndbuf} sent={} then={full} pollout={}",
                sent.join(","),
                pollout(&tx)
            ),
            "sk_sndbuf=8192 sent=OK,OK,OK,OK,OK,OK,OK,OK then=EAGAIN pollout=none",
        );
        r.expect(
            "queued_cancel_sent_to",
            &res_obs(&cancel(&tx, &a_addr)),
            "OK",
        );
        // The four cancelled messages are refunded: room for more.
        let after_b2 = res_obs(&tx.send_to_flags(&b2, &b_addr, libc::MSG_DONTWAIT));
        let a_after = book.add("a-after", LEN);
        let after_a = res_obs(&tx.send_to_flags(&a_after, &a_addr, libc::MSG_DONTWAIT));
        r.expect(
            "queued_cancel_refunds",
            &format!("pollout={} b2={after_b2} a-after={after_a}", pollout(&tx)),
            "pollout=OUT b2=OK a-after=OK",
        );
    }
    // Release: a send on each of the two connections (127.0.0.1 to itself and to 127.0.0.2).
    let f1 = book.add("flush1", 6);
    let f2 = book.add("flush2", 6);
    let k1 = res_obs(&kicker.send_to(&f1, b_addr));
    let k2 = res_obs(&kicker.send_to(&f2, c_addr));
    r.expect(
        "queued_cancel_other_destinations_arrive",
        &format!(
            "kick={k1},{k2} b={} c={}",
            arrivals(&rb, &book, 4),
            arrivals(&rc, &book, 3)
        ),
        "kick=OK,OK b=b0,b1,b2,flush1 c=c0,c1,flush2",
    );
    r.expect(
        "queued_cancelled_never_arrive",
        &format!("a={}", arrivals(&ra, &book, 1)),
        "a=a-after",
    );
    r.expect("queued_cancel_pollout_after", &pollout(&tx), "OUT");
    Ok(())
}

/// A message record for an observation: `laddr/lport>faddr/fport len=N seq=N flags=N tos=N`.
fn rec_obs(m: &MessageInfo) -> String {
    format!(
        "{}/{}>{}/{} len={} seq={} flags={} tos={}",
        ip_obs(&m.laddr),
        m.lport,
        ip_obs(&m.faddr),
        m.fport,
        m.len,
        m.seq,
        m.flags,
        m.tos
    )
}

/// A send-message list: its records grouped by connection (in address order), each
/// connection's in the kernel's order; `empty` when there are none.
fn list_obs(s: &RdsSocket, opt: i32) -> String {
    match s.messages(opt) {
        Ok(mut l) => {
            if l.is_empty() {
                return "empty".into();
            }
            // Stable: keeps the order within a connection.
            l.sort_by_key(|m| (m.laddr, m.faddr));
            l.iter().map(rec_obs).collect::<Vec<_>>().join(",")
        }
        Err(e) => err_name(&e),
    }
}

/// The send-message lists with messages held, in a new namespace (so they hold nothing else).
fn info_lists(r: &mut Report) -> Result<(), String> {
    let results = in_new_netns(|| {
        let mut out: Vec<(&'static str, String, String)> = Vec::new();
        let (a1, a2, a6) = (v4(LO, 4820), v4(LO2, 4821), v6_lo(4822));
        let rx1 = bound(a1)?;
        let rx2 = bound(a2)?;
        let rx6 = bound(a6)?;
        let tx = bound(v4(LO, 4823))?;
        let tx6 = bound(v6_lo(4824))?;
        let mut book = Book::default();
        // One message on each connection first: the held ones are the second and later
        // (sequence numbers from 2).
        let prime = book.add("p", 1);
        let mut primed = Vec::new();
        for (s, d, rx) in [(&tx, a1, &rx1), (&tx, a2, &rx2), (&tx6, a6, &rx6)] {
            primed.push(res_obs(&s.send_to(&prime, d)));
            primed.push(arrivals(rx, &book, 1));
        }
        out.push((
            "queued_info_before",
            format!(
                "primed={} v4={} v6={}",
                primed.join(","),
                list_obs(&tx, RDS_INFO_SEND_MESSAGES),
                list_obs(&tx, RDS6_INFO_SEND_MESSAGES)
            ),
            "primed=OK,p,OK,p,OK,p v4=empty v6=empty".into(),
        ));
        {
            let _hold = Hold::on()?;
            let mut sent = Vec::new();
            for (s, d, len) in [
                (&tx, a1, 10),
                (&tx, a2, 40),
                (&tx, a1, 20),
                (&tx6, a6, 60),
                (&tx, a2, 50),
                (&tx, a1, 30),
                (&tx6, a6, 70),
            ] {
                let p = book.add(&format!("l{len}"), len);
                sent.push(res_obs(&s.send_to(&p, d)));
            }
            out.push((
                "queued_info_held_sent",
                sent.join(","),
                "OK,OK,OK,OK,OK,OK,OK".into(),
            ));
            let v4_1 = "127.0.0.1/4823>127.0.0.1/4820";
            let v4_2 = "127.0.0.1/4823>127.0.0.2/4821";
            out.push((
                "queued_info_send_messages",
                list_obs(&tx, RDS_INFO_SEND_MESSAGES),
                [
                    format!("{v4_1} len=10 seq=2 flags=0 tos=0"),
                    format!("{v4_1} len=20 seq=3 flags=0 tos=0"),
                    format!("{v4_1} len=30 seq=4 flags=0 tos=0"),
                    format!("{v4_2} len=40 seq=2 flags=0 tos=0"),
                    format!("{v4_2} len=50 seq=3 flags=0 tos=0"),
                ]
                .join(","),
            ));
            // The IPv6 table has every connection, the IPv4 ones with v4-mapped addresses.
            let v6 = "__1/4824>__1/4822";
            let m1 = "__ffff_127.0.0.1/4823>__ffff_127.0.0.1/4820";
            let m2 = "__ffff_127.0.0.1/4823>__ffff_127.0.0.2/4821";
            out.push((
                "queued_info6_send_messages",
                list_obs(&tx, RDS6_INFO_SEND_MESSAGES),
                [
                    format!("{v6} len=60 seq=2 flags=0 tos=0"),
                    format!("{v6} len=70 seq=3 flags=0 tos=0"),
                    format!("{m1} len=10 seq=2 flags=0 tos=0"),
                    format!("{m1} len=20 seq=3 flags=0 tos=0"),
                    format!("{m1} len=30 seq=4 flags=0 tos=0"),
                    format!("{m2} len=40 seq=2 flags=0 tos=0"),
                    format!("{m2} len=50 seq=3 flags=0 tos=0"),
                ]
                .join(","),
            ));
            // Any socket of the namespace sees the same list.
            out.push((
                "queued_info_from_receiver",
                list_obs(&rx6, RDS_INFO_SEND_MESSAGES)
                    .split(',')
                    .count()
                    .to_string(),
                "5".into(),
            ));
        }
        let flush = book.add("f", 1);
        let kicks: Vec<String> = [(&tx, a1), (&tx, a2), (&tx6, a6)]
            .iter()
            .map(|(s, d)| res_obs(&s.send_to(&flush, *d)))
            .collect();
        out.push((
            "queued_info_released_arrive",
            format!(
                "kick={} rx1={} rx2={} rx6={}",
                kicks.join(","),
                arrivals(&rx1, &book, 4),
                arrivals(&rx2, &book, 3),
                arrivals(&rx6, &book, 3)
            ),
            "kick=OK,OK,OK rx1=l10,l20,l30,f rx2=l40,l50,f rx6=l60,l70,f".into(),
        ));
        out.push((
            "queued_info_empty_after_release",
            format!(
                "v4={} v6={}",
                list_obs(&tx, RDS_INFO_SEND_MESSAGES),
                list_obs(&tx, RDS6_INFO_SEND_MESSAGES)
            ),
            "v4=empty v6=empty".into(),
        ));
        Ok(out)
    });
    match results {
        Ok(v) => {
            for (name, obs, want) in v {
                r.expect(name, &obs, &want);
            }
        }
        Err(e) => r.check("queued_info_lists", "none", Err(e)),
    }
    Ok(())
}

/// How many messages of the listed local ports are on the send queues (`RDS_INFO_SEND_MESSAGES`
/// through `s`).
fn queued_from(s: &RdsSocket, ports: &[u16]) -> String {
    match s.messages(RDS_INFO_SEND_MESSAGES) {
        Ok(l) => ports
            .iter()
            .map(|p| l.iter().filter(|m| m.lport == *p).count().to_string())
            .collect::<Vec<_>>()
            .join("/"),
        Err(e) => err_name(&e),
    }
}

/// Closing the sender, or the receiver, while messages are held.
fn close_with_queued(r: &mut Report) -> Result<(), String> {
    let rx_addr = v4(LO, 4830);
    let rx = bound(rx_addr)?;
    let x = bound(v4(LO, 4831))?;
    let y = bound(v4(LO, 4832))?;
    let mut book = Book::default();
    {
        let _hold = Hold::on()?;
        let mut sent = Vec::new();
        for i in 0..3 {
            let p = book.add(&format!("x{i}"), 100);
            sent.push(res_obs(&x.send_to(&p, rx_addr)));
        }
        let p = book.add("y0", 100);
        sent.push(res_obs(&y.send_to(&p, rx_addr)));
        let before = queued_from(&y, &[4831, 4832]);
        drop(x);
        r.expect(
            "queued_close_sender",
            &format!(
                "sent={} queued_before={before} queued_after={}",
                sent.join(","),
                queued_from(&y, &[4831, 4832])
            ),
            "sent=OK,OK,OK,OK queued_before=3/1 queued_after=0/1",
        );
    }
    let flush = book.add("flush", 5);
    let kick = res_obs(&y.send_to(&flush, rx_addr));
    r.expect(
        "queued_close_sender_release",
        &format!("kick={kick} rx={}", arrivals(&rx, &book, 2)),
        "kick=OK rx=y0,flush",
    );

    // The receiver closes: its messages are dropped at delivery, and the sender's buffer is
    // refunded.
    let gone_addr = v4(LO, 4834);
    let gone = bound(gone_addr)?;
    let t = bound(v4(LO, 4833))?;
    let _ = small_sndbuf(&t)?;
    let mut book2 = Book::default();
    let before = Counters::take(&t)?;
    {
        let _hold = Hold::on()?;
        let (n, stop) = fill(&t, &gone_addr, &mut book2, "g", 1000);
        drop(gone);
        r.expect(
            "queued_close_receiver_setup",
            &format!("accepted={n} stop={stop} pollout={}", pollout(&t)),
            &format!(
                "accepted={} stop=EAGAIN pollout=none",
                rs_admitted(4096, 1000)
            ),
        );
    }
    let kick = res_obs(&y.send_to(&flush, rx_addr));
    let after = Counters::take(&t)?;
    r.expect(
        "queued_close_receiver_release",
        &format!(
            "kick={kick} rx={} dropped={} pollout={} queued={}",
            arrivals(&rx, &book, 1),
            after.delta_obs(&before, "recv_drop_no_sock"),
            pollout(&t),
            queued_from(&t, &[4833])
        ),
        &format!(
            "kick=OK rx=flush dropped=+{} pollout=OUT queued=0",
            rs_admitted(4096, 1000)
        ),
    );
    Ok(())
}

/// A network namespace goes away with messages held in it: its sockets close (their
/// messages are cancelled) and its connections are destroyed; the rest goes on working.
fn netns_with_queued(r: &mut Report) -> Result<(), String> {
    let hold = Hold::on()?;
    let held = in_new_netns(|| {
        let (a1, a2, a6) = (v4(LO, 4840), v4(LO2, 4841), v6_lo(4842));
        let _rx1 = bound(a1)?;
        let _rx2 = bound(a2)?;
        let _rx6 = bound(a6)?;
        let tx = bound(v4(LO, 4843))?;
        let tx6 = bound(v6_lo(4844))?;
        let mut sent = Vec::new();
        for (s, d) in [(&tx, a1), (&tx, a1), (&tx, a2), (&tx6, a6), (&tx6, a6)] {
            sent.push(res_obs(&s.send_to(b"held-in-netns", d)));
        }
        let listed = tx
            .messages(RDS6_INFO_SEND_MESSAGES)
            .map_or_else(|e| err_name(&e), |l| l.len().to_string());
        // The sockets close here, and the namespace goes when this thread ends.
        Ok(format!("sent={} listed={listed}", sent.join(",")))
    });
    r.expect(
        "queued_netns_held",
        &held.unwrap_or_else(|e| e.replace(' ', "_")),
        "sent=OK,OK,OK,OK,OK listed=5",
    );
    // Let the namespace's cleanup run (it is asynchronous) while delivery is still held.
    std::thread::sleep(Duration::from_millis(500));
    drop(hold);
    let a = bound(v4(LO, 4845))?;
    let b = bound(v4(LO, 4846))?;
    let mut book = Book::default();
    let p = book.add("after", 5);
    let sent = res_obs(&a.send_to(&p, v4(LO, 4846)));
    r.expect(
        "queued_after_netns_gone",
        &format!(
            "{sent} b={} queued={}",
            arrivals(&b, &book, 1),
            list_obs(&a, RDS6_INFO_SEND_MESSAGES)
        ),
        "OK b=after queued=empty",
    );
    Ok(())
}
