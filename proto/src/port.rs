//! Port selection for `bind(2)`, as `rds_add_bound` in `net/rds/bind.c` does it.

/// `RDS_FLAG_PROBE_PORT`: the source port of multipath probes; never bound by a socket.
pub const PROBE_PORT: u16 = 1;

/// The ports `bind` tries, in order, for a requested port (host order).
///
/// A non-zero request yields just that port (the caller refuses [`PROBE_PORT`] first). Port 0
/// yields every bindable port once, starting at `max(random, 2)` and wrapping around, skipping
/// 0 and [`PROBE_PORT`]: `start..=65535` then `2..start`.
pub fn bind_candidates(
    requested: u16,
    random: u16,
) -> core::iter::Chain<core::ops::RangeInclusive<u16>, core::ops::Range<u16>> {
    if requested != 0 {
        // `requested..requested` is empty: the request alone.
        return (requested..=requested).chain(requested..requested);
    }
    let start = if random < 2 { 2 } else { random };
    (start..=u16::MAX).chain(2..start)
}
