// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for kernel macros and fields used by rds-rs (see helpers.h). The macros pass
 * KBUILD_MODNAME, so the resources they create are attributed to rds_rs.
 */
#include <linux/debugfs.h>
#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/random.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/sysctl.h>
#include <linux/timekeeping.h>
#include <linux/uio.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include "helpers.h"

int rds_rs_copy_from_sockptr(void *dst, sockptr_t src, size_t size)
{
	return copy_from_sockptr(dst, src, size) ? -EFAULT : 0;
}

size_t rds_rs_sizeof_sock(void)
{
	return sizeof(struct sock);
}

size_t rds_rs_offsetof_sk_destruct(void)
{
	return offsetof(struct sock, sk_destruct);
}

struct ib_pd *rds_rs_ib_alloc_pd(struct ib_device *device, unsigned int flags)
{
	return ib_alloc_pd(device, flags);
}

struct rdma_cm_id *rds_rs_rdma_create_id(struct net *net, rdma_cm_event_handler event_handler,
					 void *context, enum rdma_ucm_port_space ps,
					 enum ib_qp_type qp_type)
{
	return rdma_create_id(net, event_handler, context, ps, qp_type);
}

int rds_rs_sk_sndbuf(struct sock *sk)
{
	return READ_ONCE(sk->sk_sndbuf);
}

int rds_rs_sk_rcvbuf(struct sock *sk)
{
	return READ_ONCE(sk->sk_rcvbuf);
}

long rds_rs_sk_sndtimeo(struct sock *sk)
{
	return READ_ONCE(sk->sk_sndtimeo);
}

long rds_rs_sk_rcvtimeo(struct sock *sk)
{
	return READ_ONCE(sk->sk_rcvtimeo);
}

bool rds_rs_sk_has_error(struct sock *sk)
{
	return READ_ONCE(sk->sk_err) || !skb_queue_empty_lockless(&sk->sk_error_queue);
}

bool rds_rs_sk_nonblocking(struct sock *sk)
{
	struct socket *sock = sk->sk_socket;

	return sock && sock->file && (READ_ONCE(sock->file->f_flags) & O_NONBLOCK);
}

/*
 * Wakes every task sleeping on the socket (readers, writers, pollers). The wait queue belongs to
 * the struct socket and is freed after an RCU grace period; sk_wq is NULL once the socket is
 * orphaned.
 */
void rds_rs_sk_wake(struct sock *sk)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_all(&wq->wait);
	rcu_read_unlock();
}

/*
 * Sleeps on the socket's wait queue until cond(arg) holds, the timeout (jiffies) runs out or a
 * signal arrives: > 0 (time left) when cond held, 0 on timeout, -ERESTARTSYS on a signal.
 * Called from a syscall on the socket, so the socket (and its wait queue) is alive.
 */
long rds_rs_sk_wait(struct sock *sk, long timeo, rds_rs_cond_fn cond, void *arg)
{
	/* An orphaned socket has no wait queue (sock_orphan): nothing to wait on. */
	if (sock_flag(sk, SOCK_DEAD) || !rcu_access_pointer(sk->sk_wq))
		return 0;
	return wait_event_interruptible_timeout(*sk_sleep(sk), cond(arg), timeo);
}

void rds_rs_sock_poll_wait(struct file *file, struct socket *sock, poll_table *wait)
{
	sock_poll_wait(file, sock, wait);
}

/*
 * The module's wait queue for congestion changes (C: rds_poll_waitq): pollers register on it,
 * so it lives as long as the module.
 */
static DECLARE_WAIT_QUEUE_HEAD(rds_rs_poll_waitq);

struct wait_queue_head *rds_rs_poll_waitq_get(void)
{
	return &rds_rs_poll_waitq;
}

void rds_rs_wq_wake(struct wait_queue_head *wq)
{
	if (wq_has_sleeper(wq))
		wake_up_all(wq);
}

long rds_rs_wq_wait(struct wait_queue_head *wq, long timeo, rds_rs_cond_fn cond, void *arg)
{
	return wait_event_interruptible_timeout(*wq, cond(arg), timeo);
}

void rds_rs_poll_wait(struct file *file, struct wait_queue_head *wq, poll_table *wait)
{
	poll_wait(file, wq, wait);
}

size_t rds_rs_msg_copy_from(struct msghdr *msg, void *dst, size_t len)
{
	return copy_from_iter(dst, len, &msg->msg_iter);
}

size_t rds_rs_msg_copy_to(struct msghdr *msg, const void *src, size_t len)
{
	return copy_to_iter(src, len, &msg->msg_iter);
}

size_t rds_rs_msg_left(struct msghdr *msg)
{
	return iov_iter_count(&msg->msg_iter);
}

void rds_rs_msg_revert(struct msghdr *msg, size_t len)
{
	iov_iter_revert(&msg->msg_iter, len);
}

/*
 * The control buffer of a sendmsg: the socket layer has copied it into the kernel (and
 * converted compat cmsgs). NULL with *len = 0 when there is none or it is still in user memory
 * (no in-kernel caller of RDS passes one).
 */
const void *rds_rs_msg_kernel_control(struct msghdr *msg, size_t *len)
{
	if (!msg->msg_control || msg->msg_control_is_user || !msg->msg_controllen) {
		*len = 0;
		return NULL;
	}
	*len = msg->msg_controllen;
	return msg->msg_control;
}

size_t rds_rs_msg_controllen(struct msghdr *msg)
{
	return msg->msg_controllen;
}

void *rds_rs_msg_name(struct msghdr *msg, int *namelen)
{
	*namelen = msg->msg_namelen;
	return msg->msg_name;
}

void rds_rs_msg_set_namelen(struct msghdr *msg, int namelen)
{
	msg->msg_namelen = namelen;
}

int rds_rs_msg_flags(struct msghdr *msg)
{
	return msg->msg_flags;
}

void rds_rs_msg_add_flags(struct msghdr *msg, int flags)
{
	msg->msg_flags |= flags;
}

struct workqueue_struct *rds_rs_alloc_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_MEM_RECLAIM, 0, name);
}

s64 rds_rs_real_time_ns(void)
{
	return ktime_get_real_ns();
}

u64 rds_rs_local_clock(void)
{
	return local_clock();
}

/*
 * Whether all of [addr, addr + len) is mapped writable user memory (faulting it in without
 * writing to it), as C RDS's info getsockopt finds out by pinning the pages.
 */
bool rds_rs_user_writable(void __user *addr, size_t len)
{
	return fault_in_safe_writeable(addr, len) == 0;
}

/*
 * Pins nr_pages user pages from start (page aligned); the number pinned or -errno. Long-term
 * pins (memory registrations) keep the pages out of movable zones, as RDMA drivers do.
 */
int rds_rs_pin_user_pages(unsigned long start, int nr_pages, bool write, bool longterm,
			  struct page **pages)
{
	unsigned int flags = (write ? FOLL_WRITE : 0) | (longterm ? FOLL_LONGTERM : 0);

	return pin_user_pages_fast(start, nr_pages, flags, pages);
}

void rds_rs_unpin_user_pages(struct page **pages, unsigned long nr_pages, bool dirty)
{
	unpin_user_pages_dirty_lock(pages, nr_pages, dirty);
}

void rds_rs_page_read(struct page *page, size_t offset, void *dst, size_t len)
{
	memcpy_from_page(dst, page, offset, len);
}

void rds_rs_page_write(struct page *page, size_t offset, const void *src, size_t len)
{
	memcpy_to_page(page, offset, src, len);
}

void rds_rs_page_copy(struct page *dst, size_t dst_off, struct page *src, size_t src_off,
		      size_t len)
{
	memcpy_page(dst, dst_off, src, src_off, len);
}

bool rds_rs_can_do_mlock(void)
{
	return can_do_mlock();
}

/* The calling task's mm with a reference (mmgrab), or NULL for a kernel thread. */
struct mm_struct *rds_rs_mm_get(void)
{
	struct mm_struct *mm = current->mm;

	if (mm)
		mmgrab(mm);
	return mm;
}

void rds_rs_mm_put(struct mm_struct *mm)
{
	mmdrop(mm);
}

int rds_rs_mm_account(struct mm_struct *mm, unsigned long pages, bool inc)
{
	return account_locked_vm(mm, pages, inc);
}

u32 rds_rs_random_u32(void)
{
	return get_random_u32();
}

/*
 * Test hooks. loop_hold: while non-zero, the loopback transport leaves messages queued on their
 * connections instead of delivering them, so tests can cancel or close with operations in
 * flight. Only root can reach debugfs.
 */
static struct dentry *rds_rs_debugfs_dir;
static u32 rds_rs_loop_hold_val;

int rds_rs_debugfs_init(void)
{
	rds_rs_debugfs_dir = debugfs_create_dir("rds_rs", NULL);
	debugfs_create_u32("loop_hold", 0600, rds_rs_debugfs_dir, &rds_rs_loop_hold_val);
	return 0;
}

void rds_rs_debugfs_exit(void)
{
	debugfs_remove_recursive(rds_rs_debugfs_dir);
	rds_rs_debugfs_dir = NULL;
}

bool rds_rs_loop_hold(void)
{
	return READ_ONCE(rds_rs_loop_hold_val) != 0;
}

static void (*rds_rs_net_exit_fn)(struct net *net);

static void __net_exit rds_rs_net_exit(struct net *net)
{
	rds_rs_net_exit_fn(net);
}

static struct pernet_operations rds_rs_net_ops = {
	.exit = rds_rs_net_exit,
};

int rds_rs_pernet_register(void (*exit)(struct net *net))
{
	rds_rs_net_exit_fn = exit;
	return register_pernet_subsys(&rds_rs_net_ops);
}

void rds_rs_pernet_unregister(void)
{
	unregister_pernet_subsys(&rds_rs_net_ops);
}

/* /proc/sys/net/rds: the same names, defaults and handlers as C RDS (net/rds/sysctl.c). */
static unsigned long rds_rs_reconnect_min = 1;
static unsigned long rds_rs_reconnect_max = ~0UL;
static unsigned long rds_rs_reconnect_min_jiffies;
static unsigned long rds_rs_reconnect_max_jiffies = HZ;
static unsigned int rds_rs_max_unacked_packets = 8;
static unsigned int rds_rs_max_unacked_bytes = 16 << 20;
static unsigned int rds_rs_ping_enable = 1;

static struct ctl_table rds_rs_sysctl_table[] = {
	{
		.procname	= "reconnect_min_delay_ms",
		.data		= &rds_rs_reconnect_min_jiffies,
		.maxlen		= sizeof(unsigned long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_ms_jiffies_minmax,
		.extra1		= &rds_rs_reconnect_min,
		.extra2		= &rds_rs_reconnect_max_jiffies,
	},
	{
		.procname	= "reconnect_max_delay_ms",
		.data		= &rds_rs_reconnect_max_jiffies,
		.maxlen		= sizeof(unsigned long),
		.mode		= 0644,
		.proc_handler	= proc_doulongvec_ms_jiffies_minmax,
		.extra1		= &rds_rs_reconnect_min_jiffies,
		.extra2		= &rds_rs_reconnect_max,
	},
	{
		.procname	= "max_unacked_packets",
		.data		= &rds_rs_max_unacked_packets,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec,
	},
	{
		.procname	= "max_unacked_bytes",
		.data		= &rds_rs_max_unacked_bytes,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec,
	},
	{
		.procname	= "ping_enable",
		.data		= &rds_rs_ping_enable,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec,
	},
};

static struct ctl_table_header *rds_rs_sysctl_header;

int rds_rs_sysctl_register(void)
{
	rds_rs_reconnect_min = msecs_to_jiffies(1);
	rds_rs_reconnect_min_jiffies = rds_rs_reconnect_min;
	rds_rs_sysctl_header = register_net_sysctl(&init_net, "net/rds", rds_rs_sysctl_table);
	return rds_rs_sysctl_header ? 0 : -ENOMEM;
}

void rds_rs_sysctl_unregister(void)
{
	unregister_net_sysctl_table(rds_rs_sysctl_header);
	rds_rs_sysctl_header = NULL;
}

unsigned int rds_rs_sysctl_ping_enable(void)
{
	return READ_ONCE(rds_rs_ping_enable);
}

unsigned int rds_rs_sysctl_max_unacked_packets(void)
{
	return READ_ONCE(rds_rs_max_unacked_packets);
}

unsigned int rds_rs_sysctl_max_unacked_bytes(void)
{
	return READ_ONCE(rds_rs_max_unacked_bytes);
}
