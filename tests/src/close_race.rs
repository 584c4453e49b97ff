//! Closing a socket while other threads use it: sending in a loop, blocked in `recvmsg`,
//! blocked in `poll`; and sockets opened, used and closed by many threads at once. Nothing
//! may crash or hang (the harness checks the kernel log and kmemleak); the observations are
//! the coarse, deterministic outcomes.
//!
//! A descriptor closed in one thread can be used by number in another: the kernel holds the
//! file for the duration of a system call that started before the close, and refuses later
//! calls with `EBADF`. No thread here opens descriptors while a raced descriptor is in use, so
//! its number is not reused under the racing thread.
//!
//! Ports 4490-4499 on 127.0.0.1.

use crate::util::{bound, err_name, res_obs, v4, Counters};
use crate::Report;
use librds::{recv_fd, send_to_fd, RdsSocket};
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Runs `f` on a thread and waits at most `limit` for its result.
fn bounded<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> (mpsc::Receiver<T>, Duration) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    (rx, limit)
}

fn close_fd(fd: RawFd) {
    // SAFETY: `fd` was released from its owner with `into_raw_fd` and is closed exactly once.
    unsafe { libc::close(fd) };
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let lo = [127, 0, 0, 1];
    let rcv = Arc::new(bound(v4(lo, 4490))?);
    let stop = Arc::new(AtomicBool::new(false));
    let (rcv2, stop2) = (rcv.clone(), stop.clone());
    let drainer = std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        let mut n = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            if rcv2
                .wait_readable(Duration::from_millis(50))
                .unwrap_or(false)
            {
                while rcv2.recv(&mut buf, libc::MSG_DONTWAIT).is_ok() {
                    n += 1;
                }
            }
        }
        n
    });

    // One thread sends in a loop while another closes the socket.
    let s = bound(v4(lo, 4491))?;
    let fd = s.into_raw_fd();
    let dest = v4(lo, 4490);
    let (rx, limit) = bounded(Duration::from_secs(20), move || {
        let t0 = Instant::now();
        let mut ok = 0u64;
        loop {
            match send_to_fd(fd, &[7u8; 64], &dest, libc::MSG_DONTWAIT) {
                Ok(_) => ok += 1,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN)) => {
                    std::thread::yield_now()
                }
                Err(e) => return (err_name(&e), ok),
            }
            if t0.elapsed() > Duration::from_secs(15) {
                return ("never_failed".into(), ok);
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    close_fd(fd);
    let obs = match rx.recv_timeout(limit) {
        Ok((end, ok)) => format!("ended={end} sent_some={}", ok > 0),
        Err(_) => return Err("sender thread did not end".into()),
    };
    r.expect("close_while_sending", &obs, "ended=EBADF sent_some=true");

    // A recvmsg blocked when another thread closes the descriptor keeps the socket alive and
    // bound until it returns: a message sent after the close still reaches it.
    let t = bound(v4(lo, 4492))?;
    let _ = t.set_recv_timeout(Some(Duration::from_secs(10)));
    let fd = t.into_raw_fd();
    let (rx, limit) = bounded(Duration::from_secs(20), move || {
        let mut buf = [0u8; 64];
        recv_fd(fd, &mut buf, 0)
    });
    std::thread::sleep(Duration::from_millis(300));
    close_fd(fd);
    std::thread::sleep(Duration::from_millis(200));
    let sent = rcv.send_to(b"after", v4(lo, 4492));
    let obs = match rx.recv_timeout(limit) {
        Ok(res) => format!(
            "{} recv={}",
            res_obs(&sent),
            res.map_or_else(|e| err_name(&e), |n| n.to_string())
        ),
        Err(_) => return Err("blocked recv did not return".into()),
    };
    r.expect("close_while_recv_blocked_then_message", &obs, "OK recv=5");
    // Once that recvmsg returned the socket is gone: its port drops messages.
    std::thread::sleep(Duration::from_millis(100));
    let before = Counters::take(&rcv)?;
    let sent = rcv.send_to(b"gone", v4(lo, 4492));
    std::thread::sleep(Duration::from_millis(300));
    let after = Counters::take(&rcv)?;
    r.expect(
        "port_released_after_recv_returned",
        &format!(
            "{} recv_drop_no_sock={}",
            res_obs(&sent),
            after.delta_obs(&before, "recv_drop_no_sock")
        ),
        "OK recv_drop_no_sock=+1",
    );

    // Blocked recvmsg, close, and nothing arrives: the receive timeout ends it.
    let t = bound(v4(lo, 4493))?;
    let _ = t.set_recv_timeout(Some(Duration::from_millis(1500)));
    let fd = t.into_raw_fd();
    let (rx, limit) = bounded(Duration::from_secs(20), move || {
        let mut buf = [0u8; 64];
        recv_fd(fd, &mut buf, 0)
    });
    std::thread::sleep(Duration::from_millis(300));
    close_fd(fd);
    let obs = match rx.recv_timeout(limit) {
        Ok(res) => res_obs(&res),
        Err(_) => return Err("blocked recv did not return".into()),
    };
    r.expect("close_while_recv_blocked_timeout", &obs, "ETIMEDOUT");

    // Blocked poll, close, then a message for the closed socket: the wakeup finds the
    // descriptor gone (POLLNVAL).
    let t = bound(v4(lo, 4494))?;
    // The first poll of a socket may report a past congestion map update (C's quirk, see the
    // poll suite): take it now.
    let _ = t.poll(libc::POLLIN, Duration::ZERO);
    let fd = t.into_raw_fd();
    let (rx, limit) = bounded(Duration::from_secs(20), move || {
        let t0 = Instant::now();
        let r = librds::poll_fds(&[(fd, libc::POLLIN)], Duration::from_secs(5));
        (r, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    close_fd(fd);
    std::thread::sleep(Duration::from_millis(200));
    let sent = rcv.send_to(b"wake", v4(lo, 4494));
    let obs = match rx.recv_timeout(limit) {
        Ok((Ok(ev), took)) => {
            // SAFETY: F_GETFD has no memory-safety preconditions.
            let valid = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
            println!("# poll returned {ev:?} after {took:?}; fd {fd} valid now: {valid}");
            format!("{} poll={}", res_obs(&sent), crate::poll::ev_names(ev[0]))
        }
        Ok((Err(e), _)) => err_name(&e),

        Err(_) => return Err("blocked poll did not return".into()),
    };
    r.expect(
        "close_while_poll_blocked_then_message",
        &obs,
        "OK poll=NVAL",
    );

    // The receiver goes away while a sender keeps sending to it: sends still succeed.
    let gone = bound(v4(lo, 4495))?;
    let sender = bound(v4(lo, 4496))?;
    let gone_fd = gone.into_raw_fd();
    let sender = Arc::new(sender);
    let s2 = sender.clone();
    let (rx, limit) = bounded(Duration::from_secs(20), move || {
        let t0 = Instant::now();
        let mut errors = Vec::new();
        while t0.elapsed() < Duration::from_millis(800) {
            if let Err(e) = s2.send_to(&[1u8; 32], v4([127, 0, 0, 1], 4495)) {
                errors.push(err_name(&e));
            }
        }
        errors
    });
    std::thread::sleep(Duration::from_millis(300));
    close_fd(gone_fd);
    let obs = match rx.recv_timeout(limit) {
        Ok(errs) if errs.is_empty() => "errors=none".to_string(),
        Ok(errs) => format!("errors={}", errs[0]),
        Err(_) => return Err("sender thread did not end".into()),
    };
    r.expect("receiver_closed_while_sending", &obs, "errors=none");

    // Many threads: open, bind, send, close, over and over, while one socket receives.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut errors = 0;
                for _ in 0..100 {
                    let Ok(s) = RdsSocket::new() else {
                        errors += 1;
                        continue;
                    };
                    if s.bind(v4([127, 0, 0, 1], 0)).is_err()
                        || s.send_to(b"churn", v4([127, 0, 0, 1], 4490)).is_err()
                    {
                        errors += 1;
                    }
                }
                errors
            })
        })
        .collect();
    let mut errors = 0;
    for t in threads {
        errors += t.join().map_err(|_| "churn thread panicked")?;
    }
    r.expect("churn_threads", &format!("errors={errors}"), "errors=0");
    stop.store(true, Ordering::Relaxed);
    let received = drainer.join().map_err(|_| "drainer panicked")?;
    r.expect(
        "drainer_received",
        &format!("some={}", received > 0),
        "some=true",
    );
    Ok(())
}
