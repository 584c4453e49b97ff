//! The registration rules of `RDS_GET_MR`, `RDS_GET_MR_FOR_DEST` and `RDS_FREE_MR` on a
//! transport that supports memory registrations: C's `rds_rdma` (RDS/IB, soft-RoCE, in the
//! two-guest test: `rdma-reg.c.tap`) and rds_rs's loopback (`rdma-reg.rs.tap`), paired.
//!
//! `rds-tests rdma-reg ADDR [ib]`: binds to ADDR port 4710 (with `ib`, selecting the IB
//! transport first). C's IB transport registers memory only with a connection (its FRWR
//! registration needs a queue pair: `RDS_GET_MR` of a valid range gets `EOPNOTSUPP` from
//! `rds_ib_reg_frmr`), so what is compared is every rule `__rds_rdma_map` applies before the
//! transport registers: ranges (wrapping, empty, more than 257 pages, over 4 GiB), memory
//! that cannot be pinned, and their order; and `RDS_FREE_MR` of cookies the socket does not
//! own, and cookie 0 (a flush: both transports have one).

use crate::util::{bound, res_obs};
use crate::Report;
use librds::rdma::{GetMrArgs, RDS_RDMA_INVALIDATE, RDS_RDMA_READWRITE};
use librds::{FaultRegion, RdmaMem, RdsIovec, RdsSocket, Transport};
use std::net::{IpAddr, SocketAddr};

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let (addr, ib) = match args {
        [a] => (*a, false),
        [a, "ib"] => (*a, true),
        _ => return Err("usage: rds-tests rdma-reg ADDR [ib]".into()),
    };
    let ip: IpAddr = addr.parse().map_err(|_| format!("bad address {addr}"))?;
    let sa = SocketAddr::new(ip, 4710);
    let s = if ib {
        let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
        s.set_transport(Transport::Ib)
            .map_err(|e| format!("SO_RDS_TRANSPORT: {e}"))?;
        s.bind(sa).map_err(|e| format!("bind {sa}: {e}"))?;
        s
    } else {
        bound(sa)?
    };
    let mem = RdmaMem::new((2 << 20) + 2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let holed = RdmaMem::with_hole(3 * 4096, 1).map_err(|e| format!("mmap: {e}"))?;
    let fault = FaultRegion::unmapped(2 << 20).map_err(|e| format!("mmap: {e}"))?;
    let ro = FaultRegion::read_only(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let (fa, ra) = (fault.addr() as u64, ro.addr() as u64);
    let reg = |addr: u64, bytes: u64, cookie_addr: u64| {
        res_obs(&s.get_mr_args(&GetMrArgs {
            vec: RdsIovec { addr, bytes },
            cookie_addr,
            flags: RDS_RDMA_READWRITE,
        }))
    };
    for (name, obs, want) in [
        ("reg_zero_length", reg(mem.at(0), 0, 0), "EINVAL"),
        ("reg_wrapping", reg(u64::MAX - 100, 200, 0), "EINVAL"),
        (
            "reg_end_in_last_page",
            reg(0xFFFF_FFFF_FFFF_F000, 0x800, 0),
            "EINVAL",
        ),
        (
            "reg_258_pages",
            reg(mem.at(0), 257 * 4096 + 1, 0),
            "EMSGSIZE",
        ),
        (
            "reg_258_pages_odd_start",
            reg(mem.at(1), 1 << 20 | 4096, 0),
            "EMSGSIZE",
        ),
        (
            "reg_4g_minus_1",
            reg(mem.at(0), u64::from(u32::MAX), 0),
            "EMSGSIZE",
        ),
        ("reg_over_4g", reg(mem.at(0), 1 << 32, 0), "EINVAL"),
        ("reg_unmapped", reg(fa, 4096, 0), "EFAULT"),
        ("reg_read_only", reg(ra, 4096, 0), "EFAULT"),
        ("reg_partly_unmapped", reg(holed.at(4000), 200, 0), "EFAULT"),
        ("reg_null", reg(0, 4096, 0), "EFAULT"),
        // Order: the range rules come before pinning and before the cookie is written.
        (
            "reg_zero_length_cookie_addr_unmapped",
            reg(mem.at(0), 0, fa),
            "EINVAL",
        ),
        (
            "reg_258_pages_unmapped",
            reg(fa, 257 * 4096 + 1, 0),
            "EMSGSIZE",
        ),
        (
            "reg_wrapping_unmapped_cookie",
            reg(u64::MAX - 100, 200, fa),
            "EINVAL",
        ),
        (
            "reg_unmapped_cookie_addr_unmapped",
            reg(fa, 4096, fa),
            "EFAULT",
        ),
    ] {
        r.expect(name, &obs, want);
    }
    // A task that may not lock memory (no CAP_IPC_LOCK, RLIMIT_MEMLOCK 0): EPERM, after the
    // wrap check and before the others.
    let old = crate::rdma::set_memlock(0)?;
    let no_mlock = crate::rdma::without_cap_ipc_lock(|| {
        [
            ("reg_no_mlock_valid", reg(mem.at(0), 4096, 0), "EPERM"),
            ("reg_no_mlock_zero_length", reg(mem.at(0), 0, 0), "EPERM"),
            (
                "reg_no_mlock_258_pages",
                reg(mem.at(0), 257 * 4096 + 1, 0),
                "EPERM",
            ),
            ("reg_no_mlock_unmapped", reg(fa, 4096, 0), "EPERM"),
            (
                "reg_no_mlock_wrapping",
                reg(u64::MAX - 100, 200, 0),
                "EINVAL",
            ),
        ]
    });
    crate::rdma::set_memlock(old)?;
    for (name, obs, want) in no_mlock? {
        r.expect(name, &obs, want);
    }
    let dest = SocketAddr::new(ip, 4711);
    r.expect(
        "reg_for_dest_zero_length",
        &res_obs(&s.get_mr_for_dest(&dest, mem.at(0), 0, 0)),
        "EINVAL",
    );
    r.expect(
        "reg_for_dest_258_pages",
        &res_obs(&s.get_mr_for_dest(&dest, mem.at(0), 257 * 4096 + 1, 0)),
        "EMSGSIZE",
    );
    r.expect(
        "reg_for_dest_unmapped",
        &res_obs(&s.get_mr_for_dest(&dest, fa, 4096, 0)),
        "EFAULT",
    );
    r.expect(
        "free_unknown_cookie",
        &res_obs(&s.free_mr(0x0bad_c0de, 0)),
        "EINVAL",
    );
    r.expect(
        "free_unknown_cookie_invalidate",
        &res_obs(&s.free_mr(0x0bad_c0de, RDS_RDMA_INVALIDATE)),
        "EINVAL",
    );
    r.expect("free_cookie_0_flush", &res_obs(&s.free_mr(0, 0)), "OK");
    Ok(())
}
