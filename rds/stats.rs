// SPDX-License-Identifier: GPL-2.0

//! Statistics counters, named as C RDS names them.
//!
//! C counterpart: `net/rds/stats.c` (per-CPU counters summed by `RDS_INFO_COUNTERS`). Here they
//! are global atomic counters; the names and their order come from [`crate::proto::Stat`].

use crate::proto::{Stat, STAT_NAMES};
use core::sync::atomic::{AtomicU64, Ordering};

/// The number of counters.
pub(crate) const COUNT: usize = STAT_NAMES.len();

/// The counters, indexed by [`Stat::index`].
static COUNTERS: [AtomicU64; COUNT] = [const { AtomicU64::new(0) }; COUNT];

/// Adds `n` to a counter.
pub(crate) fn add(stat: Stat, n: u64) {
    if let Some(c) = COUNTERS.get(stat.index()) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// Adds one to a counter.
pub(crate) fn inc(stat: Stat) {
    add(stat, 1);
}

/// The current value of a counter.
#[cfg(rds_test)]
pub(crate) fn get(stat: Stat) -> u64 {
    COUNTERS
        .get(stat.index())
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

/// The current value of every counter, in C's order, with its name.
pub(crate) fn snapshot() -> impl Iterator<Item = (&'static str, u64)> {
    STAT_NAMES
        .iter()
        .zip(COUNTERS.iter())
        .map(|(name, c)| (*name, c.load(Ordering::Relaxed)))
}
