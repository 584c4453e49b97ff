//! Registrations on an RDMA device with no connection (issue 11): `RDS_GET_MR` on a socket
//! bound to an address of a soft-RoCE or soft-iWARP device, before anything connects.
//!
//! `rds-tests ib-mr ADDR rxe|siw`: binds to ADDR port 4720 on the IB transport; results are
//! named `ib_mr_SOFT_v4_...` or `ib_mr_SOFT_v6_...` after ADDR's family.
//!
//! - rxe: registrations work with no connection up (C 6.12 answers `ENODEV` there: its FRWR
//!   registration needs a connection's queue pair); every registration gets a new r_key, live
//!   ones distinct and successive ones of the same memory too; the cookie's offset keeps the
//!   address's offset in its page; read-only and 1 MiB registrations work; `RDS_FREE_MR`
//!   (with and without `RDS_RDMA_INVALIDATE`) frees once and then answers `EINVAL`; closing
//!   the socket frees what it still holds; the counters `rs_ib_mr_registered` and
//!   `rs_ib_mr_deregistered` move by exactly the registrations made and undone.
//!   C's pool counters (`ib_rdma_mr_8k_alloc` + `ib_rdma_mr_1m_alloc`, and the `_free`s) move
//!   by as many.
//! - siw: the same, by fast registration on the device's service connection (an rdma_cm
//!   connection of the device to itself, made at the first registration:
//!   `Documentation/rdma.md`); in addition, 257 pages (more than one fast registration maps
//!   on siw) are refused with `EINVAL`, and atomics with `EOPNOTSUPP`.

use crate::rdma::atomic_op;
use crate::util::res_obs;
use crate::Report;
use librds::rdma::{RDS_RDMA_INVALIDATE, RDS_RDMA_READWRITE, RDS_RDMA_USE_ONCE};
use librds::{AtomicArgs, AtomicOp, RdmaMem, RdsSocket, Transport};
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};

/// The r_key of a cookie (its low 32 bits).
fn rkey(cookie: u64) -> u32 {
    cookie as u32
}

/// The offset of a cookie (its high 32 bits).
fn offset(cookie: u64) -> u32 {
    (cookie >> 32) as u32
}

pub(crate) fn counter(s: &RdsSocket, name: &str) -> Result<u64, String> {
    s.counter(name)
        .map_err(|e| format!("RDS_INFO_COUNTERS: {e}"))?
        .ok_or_else(|| format!("no counter {name}"))
}

fn socket(sa: SocketAddr) -> Result<RdsSocket, String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    s.set_transport(Transport::Ib)
        .map_err(|e| format!("SO_RDS_TRANSPORT: {e}"))?;
    s.bind(sa).map_err(|e| format!("bind {sa}: {e}"))?;
    Ok(s)
}

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let (addr, soft) = match args {
        [a, s @ ("rxe" | "siw")] => (*a, *s),
        _ => return Err("usage: rds-tests ib-mr ADDR rxe|siw".into()),
    };
    let ip: IpAddr = addr.parse().map_err(|_| format!("bad address {addr}"))?;
    let fam = if ip.is_ipv6() { "v6" } else { "v4" };
    let p = format!("ib_mr_{soft}_{fam}");
    let s = socket(SocketAddr::new(ip, 4720))?;
    let mem = RdmaMem::new((1 << 20) + 4 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let conns = s
        .connections(ip.is_ipv6())
        .map_err(|e| format!("RDS_INFO_CONNECTIONS: {e}"))?;
    let ours = conns
        .iter()
        .filter(|c| c.laddr == ip || c.faddr == ip)
        .count();
    r.expect(&format!("{p}_no_connection"), &ours.to_string(), "0");

    if soft == "siw" {
        // siw has no atomics: refused at sendmsg (towards the other end of the pair).
        let peer: IpAddr = match ip {
            IpAddr::V4(a) => {
                let [x, y, z, w] = a.octets();
                IpAddr::from([x, y, z, if w == 1 { 2 } else { 1 }])
            }
            IpAddr::V6(a) => {
                let mut o = a.octets();
                o[15] = if o[15] == 1 { 2 } else { 1 };
                IpAddr::from(o)
            }
        };
        let a = AtomicArgs {
            cookie: librds::rdma::make_cookie(0x1234, 0),
            local_addr: mem.at(0),
            remote_addr: 0,
            op: AtomicOp::Fadd { add: 1 },
            flags: 0,
            user_token: 0,
        };
        r.expect(
            &format!("{p}_atomic"),
            &res_obs(&atomic_op(&s, &SocketAddr::new(peer, 4721), &a, b"", None)),
            "EOPNOTSUPP",
        );
        // One fast registration maps at most 256 pages on siw: 1 MiB that does not start on a
        // page boundary (257 pages) is refused as C's FRWR mapping refuses it.
        r.expect(
            &format!("{p}_get_mr_257_pages"),
            &res_obs(&s.get_mr(mem.at(100), 1 << 20, RDS_RDMA_READWRITE)),
            "EINVAL",
        );
    }

    let reg0 = counter(&s, "rs_ib_mr_registered")?;
    let dereg0 = counter(&s, "rs_ib_mr_deregistered")?;
    let c_alloc = |s: &RdsSocket| -> Result<u64, String> {
        Ok(counter(s, "ib_rdma_mr_8k_alloc")? + counter(s, "ib_rdma_mr_1m_alloc")?)
    };
    let c_free = |s: &RdsSocket| -> Result<u64, String> {
        Ok(counter(s, "ib_rdma_mr_8k_free")? + counter(s, "ib_rdma_mr_1m_free")?)
    };
    let alloc0 = c_alloc(&s)?;
    let free0 = c_free(&s)?;
    let mut made = 0u64;
    let mut undone = 0u64;

    // Successive registrations of the same page, each freed before the next.
    let mut keys = Vec::new();
    let mut errs = Vec::new();
    for _ in 0..16 {
        match s.get_mr(mem.at(0), 4096, RDS_RDMA_READWRITE) {
            Ok(c) => {
                made += 1;
                keys.push(rkey(c));
                match s.free_mr(c, 0) {
                    Ok(()) => undone += 1,
                    Err(e) => errs.push(format!("free: {e}")),
                }
            }
            Err(e) => errs.push(format!("get: {e}")),
        }
    }
    let distinct: HashSet<u32> = keys.iter().copied().collect();
    r.check(
        &format!("{p}_successive_keys_differ"),
        &format!("{} registrations, {} keys", keys.len(), distinct.len()),
        if errs.is_empty() && keys.len() == 16 && distinct.len() == 16 && !distinct.contains(&0) {
            Ok(())
        } else {
            Err(format!("{errs:?} {keys:x?}"))
        },
    );

    // Live registrations: a read-only page, an unaligned range, 1 MiB, a use-once one.
    let live = [
        ("read_only", mem.at(4096), 4096, 0),
        ("unaligned", mem.at(8192 + 100), 10_000, RDS_RDMA_READWRITE),
        ("1mib", mem.at(0), 1 << 20, RDS_RDMA_READWRITE),
        (
            "use_once",
            mem.at(3 * 4096 + 7),
            64,
            RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE,
        ),
    ];
    let mut cookies = Vec::new();
    for (name, a, len, flags) in live {
        let res = s.get_mr(a, len, flags);
        r.expect(&format!("{p}_get_mr_{name}"), &res_obs(&res), "OK");
        if let Ok(c) = res {
            made += 1;
            r.expect(
                &format!("{p}_cookie_offset_{name}"),
                &(u64::from(offset(c)) % 4096).to_string(),
                &(a % 4096).to_string(),
            );
            cookies.push(c);
        }
    }
    let live_keys: HashSet<u32> = cookies.iter().map(|c| rkey(*c)).collect();
    r.expect(
        &format!("{p}_live_keys_distinct"),
        &live_keys.len().to_string(),
        &cookies.len().to_string(),
    );
    r.expect(
        &format!("{p}_registered_counted"),
        &(counter(&s, "rs_ib_mr_registered")? - reg0).to_string(),
        &made.to_string(),
    );
    r.expect(
        &format!("{p}_c_alloc_counted"),
        &(c_alloc(&s)? - alloc0).to_string(),
        &made.to_string(),
    );

    // Freed once; a second free of the same cookie is EINVAL.
    if let Some(&c) = cookies.first() {
        r.expect(&format!("{p}_free"), &res_obs(&s.free_mr(c, 0)), "OK");
        undone += 1;
        r.expect(
            &format!("{p}_free_again"),
            &res_obs(&s.free_mr(c, 0)),
            "EINVAL",
        );
    }
    if let Some(&c) = cookies.get(1) {
        r.expect(
            &format!("{p}_free_invalidate"),
            &res_obs(&s.free_mr(c, RDS_RDMA_INVALIDATE)),
            "OK",
        );
        undone += 1;
    }
    r.expect(
        &format!("{p}_deregistered_counted"),
        &(counter(&s, "rs_ib_mr_deregistered")? - dereg0).to_string(),
        &undone.to_string(),
    );

    // Closing the socket frees the rest (the 1 MiB and the use-once registrations).
    let rest = cookies.len().saturating_sub(2) as u64;
    drop(s);
    let t = socket(SocketAddr::new(ip, 4721))?;
    r.expect(
        &format!("{p}_close_frees"),
        &(counter(&t, "rs_ib_mr_deregistered")? - dereg0).to_string(),
        &(undone + rest).to_string(),
    );
    r.expect(
        &format!("{p}_c_free_counted"),
        &(c_free(&t)? - free0).to_string(),
        &(undone + rest).to_string(),
    );
    Ok(())
}

/// `rds-tests ib-mr-revoke ADDR MARK GO`: three registrations on the rxe or siw device of ADDR, then
/// MARK is created and the device deleted by the caller (who creates GO when it is gone; at
/// most 60 s). The registrations were revoked with the device (`rs_ib_mr_revoked` by 3,
/// nothing left for the owner to deregister), their cookies are still the socket's to free,
/// and a new registration finds no device (`ENODEV`, C's answer when no device serves the
/// bound address).
pub(crate) fn revoke(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [addr, mark, go] = args else {
        return Err("usage: rds-tests ib-mr-revoke ADDR MARK GO".into());
    };
    let ip: IpAddr = addr.parse().map_err(|_| format!("bad address {addr}"))?;
    let s = socket(SocketAddr::new(ip, 4722))?;
    let mem = RdmaMem::new(4 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let mut cookies = Vec::new();
    for i in 0..3 {
        let c = s
            .get_mr(mem.at(i * 4096), 4096, RDS_RDMA_READWRITE)
            .map_err(|e| format!("RDS_GET_MR: {e}"))?;
        cookies.push(c);
    }
    let revoked0 = counter(&s, "rs_ib_mr_revoked")?;
    let dereg0 = counter(&s, "rs_ib_mr_deregistered")?;
    std::fs::write(mark, "registered\n").map_err(|e| format!("{mark}: {e}"))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::path::Path::new(go).exists() {
        if std::time::Instant::now() > deadline {
            return Err(format!("{go} did not appear within 60 s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    r.expect(
        "ib_mr_revoke_counted",
        &(counter(&s, "rs_ib_mr_revoked")? - revoked0).to_string(),
        "3",
    );
    r.expect(
        "ib_mr_revoke_free_after",
        &res_obs(&s.free_mr(cookies[0], RDS_RDMA_INVALIDATE)),
        "OK",
    );
    r.expect(
        "ib_mr_revoke_get_mr_no_device",
        &res_obs(&s.get_mr(mem.at(3 * 4096), 4096, RDS_RDMA_READWRITE)),
        "ENODEV",
    );
    drop(s);
    let t = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    r.expect(
        "ib_mr_revoke_nothing_left",
        &(counter(&t, "rs_ib_mr_deregistered")? - dereg0).to_string(),
        "0",
    );
    Ok(())
}

/// `rds-tests ib-slow-fence A B` (rds_rs, siw, both addresses in this host, each on its own
/// device): deregistrations do not wait for a device's fence round, and those made while one
/// is held back share the next. A socket on each address (a connection between them, so that
/// each device has QPs to fence); with every fence round held back 3 s (the test build's
/// `ib_fence_hold_ms`), three registrations of A's socket and one of B's are freed one after
/// another: each `RDS_FREE_MR` returns within 1 s, and the fence rounds that follow are two,
/// one per device (`rs_ib_mr_fence_rounds`), within 10 s.
pub(crate) fn slow_fence(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [a, b] = args else {
        return Err("usage: rds-tests ib-slow-fence A B".into());
    };
    let a: IpAddr = a.parse().map_err(|_| format!("bad address {a}"))?;
    let b: IpAddr = b.parse().map_err(|_| format!("bad address {b}"))?;
    let (aa, ba) = (SocketAddr::new(a, 4730), SocketAddr::new(b, 4731));
    let (sa, sb) = (socket(aa)?, socket(ba)?);
    // The connection: one message, waited for.
    sa.send_to(b"up", ba).map_err(|e| format!("send: {e}"))?;
    if !crate::util::wait_msg_for(&sb, std::time::Duration::from_secs(60)) {
        return Err("the first message never came".into());
    }
    let mem = RdmaMem::new(4 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let mut cookies = Vec::new();
    for (s, i) in [(&sa, 0), (&sa, 1), (&sa, 2), (&sb, 3)] {
        let c = s
            .get_mr(mem.at(i * 4096), 4096, RDS_RDMA_READWRITE)
            .map_err(|e| format!("RDS_GET_MR {i}: {e}"))?;
        cookies.push((s, c));
    }
    let rounds0 = counter(&sa, "rs_ib_mr_fence_rounds")?;
    let hold = crate::faults::Knob::set("ib_fence_hold_ms", 3000)?;
    let mut slowest = std::time::Duration::ZERO;
    let mut failed = Vec::new();
    for (i, (s, c)) in cookies.iter().enumerate() {
        let t = std::time::Instant::now();
        if let Err(e) = s.free_mr(*c, 0) {
            failed.push(format!("free {i}: {e}"));
        }
        slowest = slowest.max(t.elapsed());
    }
    // Both rounds: held 3 s each (one per device, side by side), then fenced.
    let t1 = std::time::Instant::now();
    let mut rounds = 0;
    while t1.elapsed() < std::time::Duration::from_secs(10) {
        rounds = counter(&sa, "rs_ib_mr_fence_rounds")? - rounds0;
        if rounds >= 2 && t1.elapsed() > std::time::Duration::from_secs(4) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    drop(hold);
    let obs = format!(
        "4 frees: slowest {} ms, fence rounds {rounds}",
        slowest.as_millis()
    );
    let verdict = if !failed.is_empty() {
        Err(failed.join("; "))
    } else if slowest >= std::time::Duration::from_secs(1) {
        Err("a free waited for the held fence round".into())
    } else if rounds != 2 {
        Err("expected 2 fence rounds: the three frees on A's device in one, B's in another".into())
    } else {
        Ok(())
    };
    r.check("ib_siw_slow_fence", &obs, verdict);
    Ok(())
}
