//! `/proc/sys/net/rds`: the five sysctls of C RDS, with their modes, default values and write
//! behaviour. Every value changed is restored.

use crate::util::{res_obs, sysctl_path, sysctl_read, sysctl_write, SysctlGuard};
use crate::Report;
use std::os::unix::fs::PermissionsExt;

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let dir = std::fs::metadata("/proc/sys/net/rds").map(|m| m.is_dir());
    r.expect(
        "sysctl_dir",
        &dir.map_or_else(|e| format!("{e}"), |d| format!("dir={d}")),
        "dir=true",
    );
    for (name, default) in [
        ("reconnect_min_delay_ms", None),
        ("reconnect_max_delay_ms", Some("1000")),
        ("max_unacked_packets", Some("8")),
        ("max_unacked_bytes", Some("16777216")),
        ("ping_enable", Some("1")),
    ] {
        let mode = std::fs::metadata(sysctl_path(name))
            .map(|m| format!("{:o}", m.permissions().mode() & 0o7777));
        r.expect(
            &format!("sysctl_{name}_mode"),
            &mode.unwrap_or_else(|e| format!("absent({})", e.kind())),
            "644",
        );
        let v = sysctl_read(name).unwrap_or_else(|e| format!("unreadable({})", e.kind()));
        match default {
            Some(d) => r.expect(&format!("sysctl_{name}_default"), &v, d),
            // One jiffy in milliseconds: depends on HZ; C and rds_rs must agree.
            None => r.check(
                &format!("sysctl_{name}_default"),
                &v,
                match v.parse::<u64>() {
                    Ok(ms) if (1..=10).contains(&ms) => Ok(()),
                    _ => Err("expected one jiffy in ms".into()),
                },
            ),
        }
    }

    // Writes: integers are taken, garbage refused; the reconnect delays keep min <= max by
    // refusing values outside [min, max] (proc_doulongvec_ms_jiffies_minmax).
    {
        let _g = SysctlGuard::new("max_unacked_packets")?;
        let w = sysctl_write("max_unacked_packets", "16");
        r.expect(
            "sysctl_write_max_unacked_packets",
            &format!(
                "{} now={}",
                res_obs(&w),
                sysctl_read("max_unacked_packets").unwrap_or_default()
            ),
            "OK now=16",
        );
        let w = sysctl_write("max_unacked_packets", "abc");
        r.expect(
            "sysctl_write_garbage",
            &format!(
                "{} now={}",
                res_obs(&w),
                sysctl_read("max_unacked_packets").unwrap_or_default()
            ),
            "EINVAL now=16",
        );
    }
    r.expect(
        "sysctl_max_unacked_packets_restored",
        &sysctl_read("max_unacked_packets").unwrap_or_default(),
        "8",
    );
    {
        let _g = SysctlGuard::new("ping_enable")?;
        let w = sysctl_write("ping_enable", "0");
        r.expect(
            "sysctl_write_ping_enable",
            &format!(
                "{} now={}",
                res_obs(&w),
                sysctl_read("ping_enable").unwrap_or_default()
            ),
            "OK now=0",
        );
    }
    r.expect(
        "sysctl_ping_enable_restored",
        &sysctl_read("ping_enable").unwrap_or_default(),
        "1",
    );
    {
        let _g = SysctlGuard::new("reconnect_min_delay_ms")?;
        let min = sysctl_read("reconnect_min_delay_ms").unwrap_or_default();
        let w = sysctl_write("reconnect_min_delay_ms", "5000");
        let now = sysctl_read("reconnect_min_delay_ms").unwrap_or_default();
        r.expect(
            "sysctl_min_delay_above_max",
            &format!("{} unchanged={}", res_obs(&w), now == min),
            "EINVAL unchanged=true",
        );
        let w = sysctl_write("reconnect_min_delay_ms", "100");
        r.expect(
            "sysctl_min_delay_in_range",
            &format!(
                "{} now={}",
                res_obs(&w),
                sysctl_read("reconnect_min_delay_ms").unwrap_or_default()
            ),
            "OK now=100",
        );
    }
    {
        let _g = SysctlGuard::new("reconnect_max_delay_ms")?;
        let w = sysctl_write("reconnect_max_delay_ms", "0");
        r.expect(
            "sysctl_max_delay_below_min",
            &format!(
                "{} now={}",
                res_obs(&w),
                sysctl_read("reconnect_max_delay_ms").unwrap_or_default()
            ),
            "EINVAL now=1000",
        );
    }
    Ok(())
}
