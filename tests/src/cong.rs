//! Congestion over loopback: a documented difference. C's loopback transport never marks a
//! port congested (`rds_recv_rcvbuf_delta` returns early for `RDS_TRANS_LOOP`), so senders
//! never see `ENOBUFS`; rds_rs implements congestion on loopback as on any transport.
//!
//! `cong congests` (rds_rs) or `cong never` (C): a receiver with a small receive buffer that
//! does not read; a sender with `RDS_CONG_MONITOR` sends without blocking until `ENOBUFS` (at
//! most 200 messages of 1 KiB); after the receiver drains, the sender gets a 0-byte message
//! with an `RDS_CMSG_CONG_UPDATE` whose mask has bit `port % 64`, announced by `POLLIN`; and a
//! blocking sender to a congested port waits until the receiver reads; with `congests`, a
//! sender without the monitor that was refused is woken in `poll` when the port clears.
//!
//! Over TCP between two namespaces (`RDS_TESTS_TCP`, see `util::tcp_peer_netns`), where C
//! congests too, both run `cong congests` (the receiver at the far end, the senders at the
//! near one; the congestion map travels over the connection), without the checks of wake-ups
//! that must not come: C's observation of them is a race there. C keeps one congestion map
//! per address for the whole module, not per namespace, so the far end's map is the near end's
//! copy of it: the sender is refused the moment the receiver congests, before the map update
//! arrives; and C's TCP transport reports every received map as a change of every port
//! (`rds_tcp_cong_recv`: `rds_cong_map_updated(map, ~0)`), so that update, arriving after the
//! refusal, notifies the monitoring sender of a port still congested
//! (`cong_no_notification_while_congested`, not run), and C's count of map updates, which
//! wakes a plain sender's `poll`, is one for the module (both namespaces): a second wake-up
//! may follow the first (`cong_plain_poll_after_refusal` without `again`,
//! `cong_plain_poll_woken` without `then`). Documentation/differences-from-c.md.
//!
//! Ports 4510-4519 on 127.0.0.1.

use crate::util::{bound, drain, err_name, far4, near4, over_tcp, res_obs};
use crate::Report;
use librds::{RDS_CMSG_CONG_UPDATE, RDS_CONG_MONITOR, SOL_RDS};
use std::sync::mpsc;
use std::time::Duration;

const LIMIT: usize = 200;

pub(crate) fn run(r: &mut Report, expect: &str) -> Result<(), String> {
    let congests = match expect {
        "congests" => true,
        "never" => false,
        _ => return Err(format!("cong: expected congests or never, got {expect}")),
    };
    crate::util::tcp_warm_up(r, &[("far4", far4(0))])?;
    let rport = 4510u16;
    let rcv = bound(far4(rport))?;
    let _ = rcv.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, 4096);
    let snd = bound(near4(4511))?;
    r.expect(
        "cong_monitor_on",
        &res_obs(&snd.set_int(SOL_RDS, RDS_CONG_MONITOR, 1)),
        "OK",
    );
    let dest = far4(rport);
    let payload = [0x33u8; 1024];

    // Non-blocking sends until ENOBUFS. A little pause now and then lets an asynchronous
    // delivery (and the congestion map update it causes) catch up.
    let fill = || -> (String, usize) {
        for i in 0..LIMIT {
            if let Err(e) = snd.send_to_flags(&payload, &dest, libc::MSG_DONTWAIT) {
                return (err_name(&e), i);
            }
            if i % 8 == 7 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        ("never".into(), LIMIT)
    };
    let (first, sent) = fill();
    println!("# {sent} messages sent before {first}");
    r.expect(
        "cong_nonblocking_send",
        &first,
        if congests { "ENOBUFS" } else { "never" },
    );
    // Not over TCP: see the module's comment.
    if !over_tcp() {
        r.expect(
            "cong_no_notification_while_congested",
            &format!(
                "pollin={}",
                snd.poll(libc::POLLIN, Duration::from_millis(200))
                    .is_ok_and(|ev| ev & libc::POLLIN != 0)
            ),
            "pollin=false",
        );
    }

    // The receiver drains; the monitor reports the port uncongested.
    let drained = drain(&rcv);
    println!("# receiver drained {drained} messages");
    let pollin = snd
        .poll(libc::POLLIN, Duration::from_secs(5))
        .is_ok_and(|ev| ev & libc::POLLIN != 0);
    r.expect(
        "cong_update_pollin",
        &format!("pollin={pollin}"),
        if congests {
            "pollin=true"
        } else {
            "pollin=false"
        },
    );
    let mut buf = [0u8; 64];
    let note = match snd.recv_msg(&mut buf, 64, libc::MSG_DONTWAIT) {
        Ok(m) => {
            let masks: Vec<String> = m
                .cmsgs
                .iter()
                .filter(|c| c.level == SOL_RDS && c.ty == RDS_CMSG_CONG_UPDATE)
                .map(|c| format!("{:#x}", c.data_u64().unwrap_or(0)))
                .collect();
            format!("len={} cong_update={}", m.len, masks.join(","))
        }
        Err(e) => err_name(&e),
    };
    let want_note = format!("len=0 cong_update={:#x}", 1u64 << (rport % 64));
    r.expect(
        "cong_update_cmsg",
        &note,
        if congests { &want_note } else { "EAGAIN" },
    );

    // A blocking sender to a congested port waits until the receiver reads.
    let (again, _) = fill();
    r.expect(
        "cong_congested_again",
        &again,
        if congests { "ENOBUFS" } else { "never" },
    );
    let snd = std::sync::Arc::new(snd);
    let s2 = snd.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(s2.send_to(b"blocking", dest));
    });
    let early = rx.recv_timeout(Duration::from_millis(1000)).ok();
    let drained = drain(&rcv);
    let late = match early {
        Some(_) => None,
        None => rx.recv_timeout(Duration::from_secs(10)).ok(),
    };
    let obs = match (early, late) {
        (Some(res), _) => format!("completed_at_once={}", res_obs(&res)),
        (None, Some(res)) => format!("waited_then={}", res_obs(&res)),
        (None, None) => "still_blocked".into(),
    };
    println!("# receiver drained {drained} messages while the sender blocked");
    r.expect(
        "cong_blocking_send",
        &obs,
        if congests {
            "waited_then=OK"
        } else {
            "completed_at_once=OK"
        },
    );
    std::thread::sleep(Duration::from_millis(200));
    drain(&rcv);
    if congests {
        plain_sender_woken(r, &rcv, dest, &payload)?;
    }
    Ok(())
}

/// `POLLIN|POLLWRBAND` of a `poll` result, as text.
fn in_wrband(ev: i16) -> String {
    let mut v = Vec::new();
    if ev & libc::POLLIN != 0 {
        v.push("IN");
    }
    if ev & libc::POLLWRBAND != 0 {
        v.push("WRBAND");
    }
    crate::util::joined_or_none(&v, "|")
}

/// A sender without `RDS_CONG_MONITOR` that was refused (`ENOBUFS`) and then polls is woken
/// when the port clears, with `POLLIN|POLLWRBAND` once per map change (C's `rds_poll`:
/// "historical reasons"). rds_rs only: C's loopback never congests.
fn plain_sender_woken(
    r: &mut Report,
    rcv: &librds::RdsSocket,
    dest: std::net::SocketAddr,
    payload: &[u8],
) -> Result<(), String> {
    let plain = std::sync::Arc::new(bound(near4(4512))?);
    let mut sent = 0;
    let refused = loop {
        match plain.send_to_flags(payload, &dest, libc::MSG_DONTWAIT) {
            Ok(_) => sent += 1,
            Err(e) => break err_name(&e),
        }
        if sent == LIMIT {
            break "never".into();
        }
    };
    println!("# plain sender: {sent} messages before {refused}");
    r.expect("cong_plain_refused", &refused, "ENOBUFS");
    // The map changed (the port went congested) since the socket last looked: reported once.
    let first = plain.poll(libc::POLLIN | libc::POLLWRBAND, Duration::ZERO);
    let again = plain.poll(libc::POLLIN | libc::POLLWRBAND, Duration::from_millis(200));
    let first = first.map_or_else(|e| err_name(&e), in_wrband);
    let again = again.map_or_else(|e| err_name(&e), in_wrband);
    // Over TCP only the first (see the module's comment).
    if over_tcp() {
        r.expect(
            "cong_plain_poll_after_refusal",
            &format!("first={first}"),
            "first=IN|WRBAND",
        );
    } else {
        r.expect(
            "cong_plain_poll_after_refusal",
            &format!("first={first} again={again}"),
            "first=IN|WRBAND again=none",
        );
    }
    // Refused again, then a blocking poll: woken when the receiver drains.
    let refused = res_obs(&plain.send_to_flags(payload, &dest, libc::MSG_DONTWAIT));
    let p2 = plain.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(p2.poll(libc::POLLIN | libc::POLLWRBAND, Duration::from_secs(10)));
    });
    let early = rx.recv_timeout(Duration::from_millis(500)).ok();
    let drained = drain(rcv);
    println!("# receiver drained {drained} messages while the plain sender polled");
    let late = match early {
        Some(_) => None,
        None => rx.recv_timeout(Duration::from_secs(10)).ok(),
    };
    let woken = match (early, late) {
        (Some(ev), _) => format!("at_once={}", ev.map_or_else(|e| err_name(&e), in_wrband)),
        (None, Some(ev)) => format!("woken={}", ev.map_or_else(|e| err_name(&e), in_wrband)),
        (None, None) => "still_blocked".into(),
    };
    let after = plain.poll(libc::POLLIN | libc::POLLWRBAND, Duration::from_millis(200));
    let send = res_obs(&plain.send_to_flags(payload, &dest, libc::MSG_DONTWAIT));
    // Over TCP without `then` (see the module's comment).
    let then = if over_tcp() {
        String::new()
    } else {
        format!(" then={}", after.map_or_else(|e| err_name(&e), in_wrband))
    };
    r.expect(
        "cong_plain_poll_woken",
        &format!("refused={refused} {woken}{then} send={send}"),
        &format!(
            "refused=ENOBUFS woken=IN|WRBAND{} send=OK",
            if over_tcp() { "" } else { " then=none" }
        ),
    );
    std::thread::sleep(Duration::from_millis(200));
    drain(rcv);
    Ok(())
}
