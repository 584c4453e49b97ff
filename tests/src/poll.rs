//! `poll` on RDS sockets: `POLLOUT` by send buffer room, `POLLIN` for queued messages (and
//! not before), cleared after reading, and a poller blocked in another thread woken by an
//! arriving message.
//!
//! C RDS also reports `POLLIN|POLLRDNORM|POLLWRBAND` once to a socket without
//! `RDS_CONG_MONITOR` after any congestion map update anywhere (`rds_cong_updated_since`),
//! and every new loopback connection sends one. The checks that look at an exact mask first
//! let such an update pass and consume it with one poll; `poll_fresh_after_cong_update`
//! observes the behaviour itself.
//!
//! Ports 4420-4439 on 127.0.0.1.

use crate::util::{arrival_bound, bound, drain, err_name, fresh, res_obs, v4, wait_msg};
use crate::Report;
use librds::info::RDS_INFO_RECV_MESSAGES;
use librds::{RdsSocket, RDS_CONG_MONITOR, SOL_RDS};
use std::time::{Duration, Instant};

const ALL: i16 = libc::POLLIN
    | libc::POLLOUT
    | libc::POLLRDNORM
    | libc::POLLWRNORM
    | libc::POLLWRBAND
    | libc::POLLPRI
    | libc::POLLRDBAND;

/// `revents` as names joined by `|` (`none` for 0).
pub(crate) fn ev_names(ev: i16) -> String {
    let names = [
        (libc::POLLIN, "IN"),
        (libc::POLLPRI, "PRI"),
        (libc::POLLOUT, "OUT"),
        (libc::POLLERR, "ERR"),
        (libc::POLLHUP, "HUP"),
        (libc::POLLNVAL, "NVAL"),
        (libc::POLLRDNORM, "RDNORM"),
        (libc::POLLRDBAND, "RDBAND"),
        (libc::POLLWRNORM, "WRNORM"),
        (libc::POLLWRBAND, "WRBAND"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| ev & b != 0)
        .map(|(_, n)| *n)
        .collect();
    crate::util::joined_or_none(&v, "|")
}

fn poll_now(s: &RdsSocket, events: i16) -> String {
    match s.poll(events, Duration::ZERO) {
        Ok(ev) => ev_names(ev),
        Err(e) => err_name(&e),
    }
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let a = bound(v4([127, 0, 0, 1], 4420))?;
    let b = bound(v4([127, 0, 0, 1], 4421))?;
    let dest_b = v4([127, 0, 0, 1], 4421);
    // Warm up the connection and let its congestion map update go by.
    a.send_to(b"warm", dest_b)
        .map_err(|e| format!("warm-up send: {e}"))?;
    if !wait_msg(&b) {
        return Err("warm-up message did not arrive".into());
    }
    drain(&b);
    std::thread::sleep(Duration::from_millis(200));

    // A socket created after a congestion map update: C reports the update once.
    let f = fresh()?;
    r.expect(
        "poll_fresh_after_cong_update",
        &poll_now(&f, ALL),
        "IN|OUT|RDNORM|WRNORM|WRBAND",
    );
    r.expect("poll_fresh_second", &poll_now(&f, ALL), "OUT|WRNORM");
    let m = fresh()?;
    let _ = m.set_int(SOL_RDS, RDS_CONG_MONITOR, 1);
    r.expect("poll_fresh_cong_monitor", &poll_now(&m, ALL), "OUT|WRNORM");
    r.expect(
        "poll_fresh_pollout_only",
        &poll_now(&f, libc::POLLOUT),
        "OUT",
    );
    r.expect(
        "poll_fresh_pollin_only",
        &poll_now(&f, libc::POLLIN),
        "none",
    );

    // POLLIN exactly while a message is queued.
    let _ = a.poll(ALL, Duration::ZERO);
    let _ = b.poll(ALL, Duration::ZERO);
    r.expect("poll_bound_empty", &poll_now(&b, ALL), "OUT|WRNORM");
    r.expect(
        "poll_send_for_pollin",
        &res_obs(&a.send_to(b"data", dest_b)),
        "OK",
    );
    let waited = match b.poll(libc::POLLIN, arrival_bound()) {
        Ok(ev) if ev & libc::POLLIN != 0 => poll_now(&b, ALL),
        Ok(_) => "nothing_arrived".into(),
        Err(e) => err_name(&e),
    };
    r.expect("poll_after_arrival", &waited, "IN|OUT|RDNORM|WRNORM");
    r.expect(
        "poll_after_arrival_again",
        &poll_now(&b, ALL),
        "IN|OUT|RDNORM|WRNORM",
    );
    let _ = a.send_to(b"more", dest_b);
    // Both queued (delivery may be asynchronous).
    let t0 = Instant::now();
    while t0.elapsed() < arrival_bound()
        && b.messages(RDS_INFO_RECV_MESSAGES)
            .map_or(0, |l| l.iter().filter(|m| m.lport == 4421).count())
            < 2
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut buf = [0u8; 16];
    let first = b.recv(&mut buf, libc::MSG_DONTWAIT);
    r.expect(
        "poll_after_reading_one_of_two",
        &format!("{} {}", res_obs(&first), poll_now(&b, ALL)),
        "OK IN|OUT|RDNORM|WRNORM",
    );
    let second = b.recv(&mut buf, libc::MSG_DONTWAIT);
    r.expect(
        "poll_after_reading_all",
        &format!("{} {}", res_obs(&second), poll_now(&b, ALL)),
        "OK OUT|WRNORM",
    );
    r.expect("poll_sender_side", &poll_now(&a, ALL), "OUT|WRNORM");

    // A poller blocked in another thread is woken by an arriving message.
    let c = bound(v4([127, 0, 0, 1], 4422))?;
    let _ = c.poll(ALL, Duration::ZERO);
    let c = std::sync::Arc::new(c);
    let c2 = c.clone();
    // The clock starts before the poller does: a thread that starts late (a busy host) must
    // not make the wait look shorter than the sender's 500 ms.
    let t0 = Instant::now();
    let t = std::thread::spawn(move || {
        let ev = c2.poll(libc::POLLIN, Duration::from_secs(20));
        (ev, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    let sent = a.send_to(b"wake", v4([127, 0, 0, 1], 4422));
    let (ev, took) = t.join().map_err(|_| "poll thread panicked")?;
    let obs = match ev {
        Ok(ev) => format!("{} woken={}", res_obs(&sent), ev_names(ev)),
        Err(e) => err_name(&e),
    };
    r.check(
        "poll_blocked_woken",
        &obs,
        if obs != "OK woken=IN" {
            Err("expected OK woken=IN".into())
        } else if took < Duration::from_millis(300) || took > Duration::from_secs(15) {
            Err(format!(
                "poll returned after {took:?}; the message was sent after 500ms"
            ))
        } else {
            Ok(())
        },
    );
    drain(&c);

    // So is a blocked recvmsg.
    let _ = c.set_recv_timeout(Some(Duration::from_secs(20)));
    let c3 = c.clone();
    let t0 = Instant::now();
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let n = c3.recv(&mut buf, 0);
        (n, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    let sent = a.send_to(b"hello", v4([127, 0, 0, 1], 4422));
    let (n, took) = t.join().map_err(|_| "recv thread panicked")?;
    let obs = format!(
        "{} recv={}",
        res_obs(&sent),
        n.map_or_else(|e| err_name(&e), |n| n.to_string())
    );
    r.check(
        "recv_blocked_woken",
        &obs,
        if obs != "OK recv=5" {
            Err("expected OK recv=5".into())
        } else if took < Duration::from_millis(300) || took > Duration::from_secs(15) {
            Err(format!(
                "recv returned after {took:?}; the message was sent after 500ms"
            ))
        } else {
            Ok(())
        },
    );
    Ok(())
}
