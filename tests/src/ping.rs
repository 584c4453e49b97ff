//! Ping: a message to port 0 is answered by an empty pong from port 0 (`rds-ping`'s
//! protocol), counted in `recv_ping` and `send_pong`, and switched off by the sysctl
//! `net.rds.ping_enable`.
//!
//! `ping-cross` observes where the pong goes when the pinger and the pinged address differ
//! over loopback: C queues the pong on the connection the ping came in on, which the loopback
//! transport shares with the sending direction, so it is delivered to the *pinged* address at
//! the pinger's port; rds_rs answers the pinger. A documented difference, not paired.
//!
//! `ping` runs over loopback, or over TCP between two namespaces (`RDS_TESTS_TCP`, see
//! `util::tcp_peer_netns`): the pinger at the near end, the pinged address at the far one.
//!
//! Ports 4480-4489 on 127.0.0.1, 127.0.0.2 and ::1.

use crate::util::{
    addr_obs, arrival_bound, bound, drain, err_name, far4, far6, near4, near6, nothing_within,
    res_obs, v4, wait_msg, Counters, SysctlGuard,
};
use crate::Report;
use librds::RdsSocket;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Pings `to` from `s` with `payload` and describes the answer on `s`.
fn ping_obs(s: &RdsSocket, to: SocketAddr, payload: &[u8]) -> String {
    if let Err(e) = s.send_to(payload, to) {
        return format!("send_{}", err_name(&e));
    }
    if !wait_msg(s) {
        return "no_pong".into();
    }
    let mut buf = [0u8; 64];
    match s.recv_msg(&mut buf, 0, libc::MSG_DONTWAIT) {
        Ok(m) => format!(
            "pong_len={} from={}",
            m.len,
            m.from.map_or("none".into(), |a| addr_obs(&a))
        ),
        Err(e) => err_name(&e),
    }
}

/// Counters after `before`, once `name` moved by `want` or after 2 s.
fn settle(s: &RdsSocket, before: &Counters, name: &str, want: i128) -> Result<Counters, String> {
    let t = Instant::now();
    loop {
        let now = Counters::take(s)?;
        if now.delta(before, name).unwrap_or(0) >= want || t.elapsed() > Duration::from_secs(2) {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    crate::util::tcp_warm_up(r, &[("far4", far4(0)), ("far6", far6(0))])?;
    let s = bound(near4(4480))?;
    let pong_from = addr_obs(&far4(0));
    let via = if crate::util::over_tcp() {
        "tcp"
    } else {
        "loopback"
    };
    let before = Counters::take(&s)?;
    r.expect(
        &format!("ping_{via}"),
        &ping_obs(&s, far4(0), b""),
        &format!("pong_len=0 from={pong_from}"),
    );
    let after = settle(&s, &before, "send_pong", 1)?;
    r.expect(
        "ping_counters",
        &format!(
            "recv_ping={} send_pong={} recv_drop_no_sock={}",
            after.delta_obs(&before, "recv_ping"),
            after.delta_obs(&before, "send_pong"),
            after.delta_obs(&before, "recv_drop_no_sock")
        ),
        "recv_ping=+1 send_pong=+1 recv_drop_no_sock=+0",
    );
    r.expect(
        "ping_with_payload",
        &ping_obs(&s, far4(0), b"0123456789"),
        &format!("pong_len=0 from={pong_from}"),
    );
    let s6 = bound(near6(4481))?;
    r.expect(
        &format!("ping6_{via}"),
        &ping_obs(&s6, far6(0), b""),
        &format!("pong_len=0 from={}", addr_obs(&far6(0))),
    );
    r.expect(
        "ping_no_extra_pong",
        &format!("{}", nothing_within(&s, Duration::from_millis(300))?),
        "true",
    );

    // ping_enable = 0: a message to port 0 is an ordinary message to a port nobody binds.
    {
        let _guard = SysctlGuard::new("ping_enable")?;
        r.expect(
            "ping_disable",
            &res_obs(&crate::util::sysctl_write("ping_enable", "0")),
            "OK",
        );
        let before = Counters::take(&s)?;
        let sent = s.send_to(b"", far4(0));
        let quiet = nothing_within(&s, Duration::from_millis(1000))?;
        let after = settle(&s, &before, "recv_drop_no_sock", 1)?;
        r.expect(
            "ping_disabled_no_pong",
            &format!(
                "{} no_pong={quiet} recv_ping={} recv_drop_no_sock={}",
                res_obs(&sent),
                after.delta_obs(&before, "recv_ping"),
                after.delta_obs(&before, "recv_drop_no_sock")
            ),
            "OK no_pong=true recv_ping=+0 recv_drop_no_sock=+1",
        );
    }
    r.expect(
        "ping_enable_restored",
        &crate::util::sysctl_read("ping_enable").unwrap_or_else(|e| e.to_string()),
        "1",
    );
    r.expect(
        "ping_after_reenable",
        &ping_obs(&s, far4(0), b""),
        &format!("pong_len=0 from={pong_from}"),
    );
    drain(&s);
    Ok(())
}

/// `ping-cross <other|pinger>`: where the pong of 127.0.0.1:4485 pinging 127.0.0.2:0 goes.
pub(crate) fn cross(r: &mut Report, expect: &str) -> Result<(), String> {
    let want = match expect {
        "other" => "receiver=other from=127.0.0.1/0",
        "pinger" => "receiver=pinger from=127.0.0.2/0",
        _ => {
            return Err(format!(
                "ping-cross: expected other or pinger, got {expect}"
            ))
        }
    };
    let pinger = bound(v4([127, 0, 0, 1], 4485))?;
    let other = bound(v4([127, 0, 0, 2], 4485))?;
    pinger
        .send_to(b"", v4([127, 0, 0, 2], 0))
        .map_err(|e| format!("ping: {e}"))?;
    let t0 = Instant::now();
    let mut obs = "no_pong".to_string();
    while t0.elapsed() < arrival_bound() {
        for (who, s) in [("pinger", &pinger), ("other", &other)] {
            let mut buf = [0u8; 16];
            if let Ok(m) = s.recv_msg(&mut buf, 0, libc::MSG_DONTWAIT) {
                obs = format!(
                    "receiver={who} from={}",
                    m.from.map_or("none".into(), |a| addr_obs(&a))
                );
            }
        }
        if obs != "no_pong" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    r.expect("ping_cross_address_pong", &obs, want);
    Ok(())
}
