// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for kernel macros and fields used by rds-rs (see helpers.h). The macros pass
 * KBUILD_MODNAME, so the resources they create are attributed to rds_rs.
 */
#include <linux/cred.h>
#include <linux/interrupt.h>
#include <linux/llist.h>
#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
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

size_t rds_rs_offsetof_sk_sndtimeo(void)
{
	return offsetof(struct sock, sk_sndtimeo);
}

size_t rds_rs_sizeof_msghdr(void)
{
	return sizeof(struct msghdr);
}

size_t rds_rs_offsetof_msg_flags(void)
{
	return offsetof(struct msghdr, msg_flags);
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

ssize_t rds_rs_msg_get_page(struct msghdr *msg, struct page **page, size_t *start)
{
	return iov_iter_get_pages2(&msg->msg_iter, page, PAGE_SIZE, 1, start);
}

void rds_rs_put_page(struct page *page)
{
	put_page(page);
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

u32 rds_rs_random_u32(void)
{
	return get_random_u32();
}

/*
 * How long a connection stays idle (nothing queued, unacknowledged or in transmission, no
 * message either way) before the reaper takes it, in milliseconds. The test build exposes it
 * in debugfs (testhooks.c).
 */
unsigned int rds_rs_conn_idle_ms = 10000;

unsigned long rds_rs_conn_idle_jiffies(void)
{
	return msecs_to_jiffies(READ_ONCE(rds_rs_conn_idle_ms));
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

/* Implemented in Rust (bindings/sys.rs): reloads its copies of the values above. */
void rds_rs_sysctl_changed(void);

static int rds_rs_sysctl_int(const struct ctl_table *table, int write, void *buffer,
			     size_t *lenp, loff_t *ppos)
{
	int ret = proc_dointvec(table, write, buffer, lenp, ppos);

	if (write && !ret)
		rds_rs_sysctl_changed();
	return ret;
}

static int rds_rs_sysctl_ms(const struct ctl_table *table, int write, void *buffer,
			    size_t *lenp, loff_t *ppos)
{
	int ret = proc_doulongvec_ms_jiffies_minmax(table, write, buffer, lenp, ppos);

	if (write && !ret)
		rds_rs_sysctl_changed();
	return ret;
}

static struct ctl_table rds_rs_sysctl_table[] = {
	{
		.procname	= "reconnect_min_delay_ms",
		.data		= &rds_rs_reconnect_min_jiffies,
		.maxlen		= sizeof(unsigned long),
		.mode		= 0644,
		.proc_handler	= rds_rs_sysctl_ms,
		.extra1		= &rds_rs_reconnect_min,
		.extra2		= &rds_rs_reconnect_max_jiffies,
	},
	{
		.procname	= "reconnect_max_delay_ms",
		.data		= &rds_rs_reconnect_max_jiffies,
		.maxlen		= sizeof(unsigned long),
		.mode		= 0644,
		.proc_handler	= rds_rs_sysctl_ms,
		.extra1		= &rds_rs_reconnect_min_jiffies,
		.extra2		= &rds_rs_reconnect_max,
	},
	{
		.procname	= "max_unacked_packets",
		.data		= &rds_rs_max_unacked_packets,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= rds_rs_sysctl_int,
	},
	{
		.procname	= "max_unacked_bytes",
		.data		= &rds_rs_max_unacked_bytes,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= rds_rs_sysctl_int,
	},
	{
		.procname	= "ping_enable",
		.data		= &rds_rs_ping_enable,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= rds_rs_sysctl_int,
	},
};

static struct ctl_table_header *rds_rs_sysctl_header;

int rds_rs_sysctl_register(void)
{
	rds_rs_reconnect_min = msecs_to_jiffies(1);
	rds_rs_reconnect_min_jiffies = rds_rs_reconnect_min;
	rds_rs_sysctl_changed();
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

/* Gates (bindings/sync.rs): the wait queue and the lockdep annotations of a Rust flag. */
void rds_rs_gate_init(struct rds_rs_gate *g, const char *name, struct lock_class_key *key)
{
	init_waitqueue_head(&g->wq);
	lockdep_init_map(&g->map, name, key, 0);
}

void rds_rs_gate_acquired(struct rds_rs_gate *g, bool try)
{
	if (try)
		lock_map_acquire_try(&g->map);
	else
		lock_map_acquire(&g->map);
}

void rds_rs_gate_released(struct rds_rs_gate *g)
{
	lock_map_release(&g->map);
}

void rds_rs_gate_wait(struct rds_rs_gate *g, rds_rs_cond_fn cond, void *arg)
{
	wait_event(g->wq, cond(arg));
}

void rds_rs_gate_wake(struct rds_rs_gate *g)
{
	wake_up(&g->wq);
}

/* RCU read-side critical sections (bindings/rcu.rs), with their lockdep annotations. */
void rds_rs_rcu_read_lock(void)
{
	rcu_read_lock();
}

void rds_rs_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/* Work items (bindings/sys.rs): as the kernel crate's init_work_with_key, one class per site. */
void rds_rs_init_work(struct work_struct *w, work_func_t fn, const char *name,
		      struct lock_class_key *key)
{
	__init_work(w, 0);
	w->data = (atomic_long_t)WORK_DATA_INIT();
	lockdep_init_map(&w->lockdep_map, name, key, 0);
	INIT_LIST_HEAD(&w->entry);
	w->func = fn;
}

bool rds_rs_queue_work(struct workqueue_struct *wq, struct work_struct *w)
{
	return queue_work(wq, w);
}

/* Contexts and locks (bindings/sync.rs). */
void rds_rs_might_sleep(void)
{
	might_sleep();
}

/*
 * Values whose destructors sleep, dropped in process context: any context may hand a node to
 * rds_rs_defer(); a work item on system_unbound_wq hands each back to Rust (rds_rs_run_deferred),
 * oldest first. llist_add() returns true when the list was empty: the work is then queued (a
 * work item that is running may be queued again; one that is pending will see the node).
 */
static LLIST_HEAD(rds_rs_deferred);

static void rds_rs_deferred_work_fn(struct work_struct *work)
{
	struct llist_node *node = llist_reverse_order(llist_del_all(&rds_rs_deferred));

	while (node) {
		struct llist_node *next = node->next;

		rds_rs_run_deferred(node);
		node = next;
		cond_resched();
	}
}

static DECLARE_WORK(rds_rs_deferred_work, rds_rs_deferred_work_fn);

void rds_rs_defer(struct llist_node *node)
{
	if (llist_add(node, &rds_rs_deferred))
		queue_work(system_unbound_wq, &rds_rs_deferred_work);
}

/*
 * Until nothing is left: a deferred drop may defer more. Not from a work item: the module's
 * workqueue is WQ_MEM_RECLAIM and must not wait for system_unbound_wq (check_flush_dependency
 * warns), and a work item (a connection's send work delivering a loopback RDMA message) has
 * no caller waiting for the values to go; they go when the deferred work runs.
 */
void rds_rs_defer_flush(void)
{
	if (current_work())
		return;
	do {
		flush_work(&rds_rs_deferred_work);
	} while (!llist_empty(&rds_rs_deferred));
}

/* Delayed work (bindings/sys.rs). One lockdep class for all of them. */
void rds_rs_init_delayed_work(struct delayed_work *dw, work_func_t fn)
{
	INIT_DELAYED_WORK(dw, fn);
}

bool rds_rs_queue_delayed_work(struct workqueue_struct *wq, struct delayed_work *dw,
			       unsigned long delay)
{
	return queue_delayed_work(wq, dw, delay);
}

bool rds_rs_cancel_delayed_work_sync(struct delayed_work *dw)
{
	return cancel_delayed_work_sync(dw);
}

unsigned long rds_rs_msecs_to_jiffies(unsigned int ms)
{
	return msecs_to_jiffies(ms);
}

unsigned long rds_rs_sysctl_reconnect_min_jiffies(void)
{
	return READ_ONCE(rds_rs_reconnect_min_jiffies);
}

unsigned long rds_rs_sysctl_reconnect_max_jiffies(void)
{
	return READ_ONCE(rds_rs_reconnect_max_jiffies);
}

/* Payload pages and the iovecs of a sendmsg/recvmsg (bindings/net.rs). */
size_t rds_rs_msg_copy_page_from(struct msghdr *msg, struct page *page, size_t off, size_t len)
{
	return copy_page_from_iter(page, off, len, &msg->msg_iter);
}

size_t rds_rs_msg_copy_page_to(struct msghdr *msg, struct page *page, size_t off, size_t len)
{
	return copy_page_to_iter(page, off, len, &msg->msg_iter);
}

/* The socket lock (lock_sock) and its lockdep check. */
void rds_rs_lock_sock(struct sock *sk)
{
	lock_sock(sk);
}

void rds_rs_release_sock(struct sock *sk)
{
	release_sock(sk);
}

void rds_rs_sock_owned_by_me(struct sock *sk)
{
	sock_owned_by_me(sk);
}

/*
 * Locked memory charged to the user who created a socket (as io_uring charges its creator):
 * user->locked_vm against RLIMIT_MEMLOCK (unless CAP_IPC_LOCK), and the creator's mm's
 * pinned_vm for /proc/PID/status (VmPin).
 */
struct user_struct *rds_rs_current_user(void)
{
	return get_current_user();
}

void rds_rs_free_uid(struct user_struct *user)
{
	free_uid(user);
}

int rds_rs_user_charge(struct user_struct *user, struct mm_struct *mm, unsigned long pages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long cur = atomic_long_read(&user->locked_vm), new;
	bool unlimited = capable(CAP_IPC_LOCK);

	do {
		new = cur + pages;
		if (new < cur || (!unlimited && new > limit))
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
	if (mm)
		atomic64_add(pages, &mm->pinned_vm);
	return 0;
}

void rds_rs_user_uncharge(struct user_struct *user, struct mm_struct *mm, unsigned long pages)
{
	atomic_long_sub(pages, &user->locked_vm);
	if (mm)
		atomic64_sub(pages, &mm->pinned_vm);
}
