/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Hand-written C helpers for kernel macros and for struct fields that Rust should not reach into
 * directly. Static inline functions are wrapped automatically by bindgen --wrap-static-fns; the
 * helpers here cover macros (wait_event_*, init_waitqueue_head, alloc_workqueue, ...), fields
 * read with READ_ONCE, and the few places where the C layout (msghdr bitfields, sk_wq under
 * RCU) is better handled in C.
 */
#ifndef RDS_RS_HELPERS_H
#define RDS_RS_HELPERS_H

#include <linux/types.h>
#include <linux/sockptr.h>
#include <linux/wait.h>
#include <linux/poll.h>
#include <linux/llist.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

struct sock;
struct socket;
struct msghdr;
struct file;
struct net;
struct workqueue_struct;


/* copy_from_sockptr: 0, or -EFAULT if the (user or kernel) source cannot be read. */
int rds_rs_copy_from_sockptr(void *dst, sockptr_t src, size_t size);

/* Layout facts of struct sock, checked against the Rust bindings at module init. */
size_t rds_rs_sizeof_sock(void);
size_t rds_rs_offsetof_sk_destruct(void);
size_t rds_rs_offsetof_sk_sndtimeo(void);
size_t rds_rs_sizeof_msghdr(void);
size_t rds_rs_offsetof_msg_flags(void);

/* A condition evaluated by the wait helpers; it may be called many times and must not sleep. */
typedef bool (*rds_rs_cond_fn)(void *arg);

/* struct sock: fields read with READ_ONCE, the socket's wait queue, error state. */
bool rds_rs_sk_has_error(struct sock *sk);
bool rds_rs_sk_nonblocking(struct sock *sk);
void rds_rs_sk_wake(struct sock *sk);
long rds_rs_sk_wait(struct sock *sk, long timeo, rds_rs_cond_fn cond, void *arg);
void rds_rs_sock_poll_wait(struct file *file, struct socket *sock, poll_table *wait);

/* Free-standing wait queues. */
struct wait_queue_head *rds_rs_poll_waitq_get(void);
void rds_rs_wq_wake(struct wait_queue_head *wq);
long rds_rs_wq_wait(struct wait_queue_head *wq, long timeo, rds_rs_cond_fn cond, void *arg);
void rds_rs_poll_wait(struct file *file, struct wait_queue_head *wq, poll_table *wait);

/* struct msghdr. */
size_t rds_rs_msg_copy_from(struct msghdr *msg, void *dst, size_t len);
size_t rds_rs_msg_copy_to(struct msghdr *msg, const void *src, size_t len);
size_t rds_rs_msg_left(struct msghdr *msg);
const void *rds_rs_msg_kernel_control(struct msghdr *msg, size_t *len);

/* Workqueues, time, user memory. */
struct workqueue_struct *rds_rs_alloc_workqueue(const char *name);
s64 rds_rs_real_time_ns(void);
u64 rds_rs_local_clock(void);
bool rds_rs_user_writable(void __user *addr, size_t len);

/* User memory for RDMA: pinning, copying through kernel mappings, mlock accounting. */
struct page;
struct mm_struct;
int rds_rs_pin_user_pages(unsigned long start, int nr_pages, bool write, bool longterm,
			  struct page **pages);
void rds_rs_unpin_user_pages(struct page **pages, unsigned long nr_pages, bool dirty);
void rds_rs_page_read(struct page *page, size_t offset, void *dst, size_t len);
/* Zero-copy send: the next piece (at most to the end of a page) of a sendmsg's data, by
 * reference (iov_iter_get_pages2, which advances the iterator); and the reference's put. */
ssize_t rds_rs_msg_get_page(struct msghdr *msg, struct page **page, size_t *start);
void rds_rs_put_page(struct page *page);
void rds_rs_page_write(struct page *page, size_t offset, const void *src, size_t len);
void rds_rs_page_copy(struct page *dst, size_t dst_off, struct page *src, size_t src_off,
		      size_t len);
bool rds_rs_can_do_mlock(void);
struct mm_struct *rds_rs_mm_get(void);
void rds_rs_mm_put(struct mm_struct *mm);
u32 rds_rs_random_u32(void);

/* The reaper's idle time. */
extern unsigned int rds_rs_conn_idle_ms;
unsigned long rds_rs_conn_idle_jiffies(void);

/* Per-namespace exit hook and /proc/sys/net/rds. */
int rds_rs_pernet_register(void (*exit)(struct net *net));
void rds_rs_pernet_unregister(void);
int rds_rs_sysctl_register(void);
void rds_rs_sysctl_unregister(void);
unsigned int rds_rs_sysctl_ping_enable(void);
unsigned int rds_rs_sysctl_max_unacked_packets(void);
unsigned int rds_rs_sysctl_max_unacked_bytes(void);


/*
 * A flag owned by one task at a time, seen by lockdep as a lock: its wait queue and lockdep map
 * (bindings/sync.rs, Gate). The flag itself is a Rust atomic.
 */
struct rds_rs_gate {
	wait_queue_head_t wq;
	struct lockdep_map map;
};
struct lock_class_key;
void rds_rs_gate_init(struct rds_rs_gate *g, const char *name, struct lock_class_key *key);
void rds_rs_gate_acquired(struct rds_rs_gate *g, bool try);
void rds_rs_gate_released(struct rds_rs_gate *g);
void rds_rs_gate_wait(struct rds_rs_gate *g, rds_rs_cond_fn cond, void *arg);
void rds_rs_gate_wake(struct rds_rs_gate *g);

/* RCU read-side critical sections (bindings/rcu.rs). */
void rds_rs_rcu_read_lock(void);
void rds_rs_rcu_read_unlock(void);

/* Work items whose callback gets a proof of process context (bindings/sys.rs, Work). */
void rds_rs_init_work(struct work_struct *w, work_func_t fn, const char *name,
		      struct lock_class_key *key);
bool rds_rs_queue_work(struct workqueue_struct *wq, struct work_struct *w);

/* Contexts, bottom-half spinlocks, deferred drops (bindings/sync.rs). */
struct llist_node;
void rds_rs_might_sleep(void);
void rds_rs_defer(struct llist_node *node);
void rds_rs_defer_flush(void);
/* Implemented in Rust (bindings/sync.rs). */
void rds_rs_run_deferred(struct llist_node *node);

/* Delayed work and time (bindings/sys.rs). */
struct delayed_work;
void rds_rs_init_delayed_work(struct delayed_work *dw, work_func_t fn);
bool rds_rs_queue_delayed_work(struct workqueue_struct *wq, struct delayed_work *dw,
			       unsigned long delay);
bool rds_rs_cancel_delayed_work_sync(struct delayed_work *dw);
unsigned long rds_rs_msecs_to_jiffies(unsigned int ms);
unsigned long rds_rs_sysctl_reconnect_min_jiffies(void);
unsigned long rds_rs_sysctl_reconnect_max_jiffies(void);

/* Payload pages, the socket lock. */
size_t rds_rs_msg_copy_page_from(struct msghdr *msg, struct page *page, size_t off, size_t len);
size_t rds_rs_msg_copy_page_to(struct msghdr *msg, struct page *page, size_t off, size_t len);
void rds_rs_lock_sock(struct sock *sk);
void rds_rs_release_sock(struct sock *sk);
void rds_rs_sock_owned_by_me(struct sock *sk);

/* Locked memory charged to a socket's creator (bindings/mm.rs). */
struct user_struct;
struct user_struct *rds_rs_current_user(void);
void rds_rs_free_uid(struct user_struct *user);
int rds_rs_user_charge(struct user_struct *user, struct mm_struct *mm, unsigned long pages);
void rds_rs_user_uncharge(struct user_struct *user, struct mm_struct *mm, unsigned long pages);

#endif
