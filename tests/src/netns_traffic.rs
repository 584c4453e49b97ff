//! Network namespaces and traffic: sockets in two namespaces cannot reach each other (the
//! message is dropped, the sender is told OK), sockets in one namespace can, and each
//! namespace's `RDS_INFO_SOCKETS`, `RDS_INFO_CONNECTIONS` and `RDS_INFO_RECV_MESSAGES` show
//! only its own. C registers the `net.rds` sysctls in the initial namespace only.
//!
//! Ports 4500-4509 (the bind collision across namespaces, where C and rds_rs differ, is the
//! `netns` suite's).

use crate::util::{
    addr_obs, bound, in_new_netns, ip_obs, nothing_within, recv_one, res_obs, v4, wait_msg_for,
    Counters,
};
use crate::Report;
use librds::info::RDS_INFO_RECV_MESSAGES;
use librds::RdsSocket;
use std::time::{Duration, Instant};

fn ports(s: &RdsSocket) -> String {
    match s.sockets(false) {
        Ok(l) => {
            let mut p: Vec<u16> = l.iter().map(|i| i.bound.port()).collect();
            p.sort();
            p.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
        Err(e) => crate::util::err_name(&e),
    }
}

fn conns(s: &RdsSocket) -> Vec<String> {
    let mut v: Vec<String> = s
        .connections(false)
        .map(|l| {
            l.iter()
                .map(|c| {
                    format!(
                        "{}>{} tx={} rx={}",
                        ip_obs(&c.laddr),
                        ip_obs(&c.faddr),
                        c.next_tx_seq,
                        c.next_rx_seq
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits until counter `name` moved by `want` (or 2 s), then returns the delta's observation.
fn drop_delta(s: &RdsSocket, before: &Counters) -> Result<String, String> {
    let t = Instant::now();
    loop {
        let now = Counters::take(s)?;
        if now.delta(before, "recv_drop_no_sock").unwrap_or(0) >= 1
            || t.elapsed() > Duration::from_secs(2)
        {
            return Ok(now.delta_obs(before, "recv_drop_no_sock"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let x = bound(v4([127, 0, 0, 1], 4500))?;
    let (y, z, w, sysctl) = in_new_netns(|| {
        let y = bound(v4([127, 0, 0, 1], 4501))?;
        let z = bound(v4([127, 0, 0, 1], 4502))?;
        let w = bound(v4([127, 0, 0, 3], 4503))?;
        let sysctl = match std::fs::metadata("/proc/sys/net/rds/ping_enable") {
            Ok(_) => "present".to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "absent".to_string(),
            Err(e) => format!("{}", e.kind()),
        };
        Ok((y, z, w, sysctl))
    })?;

    // Across namespaces: OK for the sender, dropped, counted.
    let before = Counters::take(&x)?;
    let sent = y.send_to(b"cross", v4([127, 0, 0, 1], 4500));
    let quiet = nothing_within(&x, Duration::from_millis(500))?;
    r.expect(
        "netns_send_to_other_namespace",
        &format!(
            "{} nothing_arrived={quiet} recv_drop_no_sock={}",
            res_obs(&sent),
            drop_delta(&x, &before)?
        ),
        "OK nothing_arrived=true recv_drop_no_sock=+1",
    );
    let before = Counters::take(&x)?;
    let sent = x.send_to(b"cross", v4([127, 0, 0, 1], 4501));
    let quiet = nothing_within(&y, Duration::from_millis(500))?;
    r.expect(
        "netns_send_from_initial_namespace",
        &format!(
            "{} nothing_arrived={quiet} recv_drop_no_sock={}",
            res_obs(&sent),
            drop_delta(&x, &before)?
        ),
        "OK nothing_arrived=true recv_drop_no_sock=+1",
    );

    // Within the new namespace: delivered.
    let _ = y.send_to(b"inside", v4([127, 0, 0, 1], 4502));
    r.expect(
        "netns_same_namespace",
        &recv_one(&z, 64).map_or_else(
            |e| e,
            |(m, from)| format!("len={} from={}", m.len(), addr_obs(&from)),
        ),
        "len=6 from=127.0.0.1/4501",
    );
    let _ = w.send_to(b"other-addr", v4([127, 0, 0, 1], 4502));
    r.expect(
        "netns_same_namespace_other_addr",
        &recv_one(&z, 64).map_or_else(
            |e| e,
            |(m, from)| format!("len={} from={}", m.len(), addr_obs(&from)),
        ),
        "len=10 from=127.0.0.3/4503",
    );
    // One message left queued in the new namespace.
    let _ = y.send_to(b"queued", v4([127, 0, 0, 1], 4502));
    let _ = wait_msg_for(&z, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(100));

    // Each namespace lists its own.
    r.expect("netns_info_sockets_new", &ports(&y), "4501,4502,4503");
    let own = ports(&x);
    let listed: Vec<&str> = own.split(',').collect();
    r.expect(
        "netns_info_sockets_initial",
        &format!(
            "own={} foreign={}",
            listed.contains(&"4500"),
            ["4501", "4502", "4503"].iter().any(|p| listed.contains(p))
        ),
        "own=true foreign=false",
    );
    r.expect(
        "netns_info_connections_new",
        &conns(&y).join(","),
        "127.0.0.1>127.0.0.1 tx=4 rx=4,127.0.0.3>127.0.0.1 tx=2 rx=2",
    );
    r.expect(
        "netns_info_connections_initial",
        &format!(
            "foreign={}",
            conns(&x).iter().any(|c| c.starts_with("127.0.0.3>"))
        ),
        "foreign=false",
    );
    let queued = |s: &RdsSocket| {
        s.messages(RDS_INFO_RECV_MESSAGES)
            .map(|l| l.iter().filter(|m| m.lport == 4502).count())
            .map_or_else(|e| crate::util::err_name(&e), |n| n.to_string())
    };
    r.expect(
        "netns_info_recv_messages",
        &format!("new={} initial={}", queued(&y), queued(&x)),
        "new=1 initial=0",
    );
    r.expect("netns_sysctl_in_new_namespace", &sysctl, "absent");
    drop((y, z, w));
    Ok(())
}
