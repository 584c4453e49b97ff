// SPDX-License-Identifier: GPL-2.0
/*
 * Test hooks of rds_rs, built only into the test build of the module (RDS_RS_TEST): knobs and
 * triggers under /sys/kernel/debug/rds_rs (root only), and the tasklet that lets the loopback
 * transport deliver from softirq context. See Documentation/testing.md.
 *
 *   loop_hold        while non-zero, the loopback transport leaves messages queued
 *   loop_ack_hold    while non-zero, loopback delivers but does not acknowledge
 *   loop_reset_every non-zero N: loopback resets a connection every 1..2N frames (random)
 *   loop_softirq     while non-zero, loopback delivers from a tasklet (softirq context)
 *   loop_ring        non-zero N (softirq mode): a connection holds at most N 4 KiB fragments
 *                    in flight; a fuller one takes messages in parts (backpressure)
 *   conn_idle_ms     the reaper's idle time
 *   ib_service_break non-zero: the next registration on an iWARP device finds the device's
 *                    service connection failed (read back as 0 once consumed)
 *   ib_route_delay_ms  the IB transport's ROUTE_RESOLVED handler sleeps this long after it
 *                    built the QP, before it installs it (widens the window of a teardown)
 *   ib_request_delay_ms the IB transport's handler of a connection request sleeps this long
 *                      before it looks at the request (both ends' requests leave first);
 *   ib_fence_hold_ms   an iWARP device's fence work sleeps this long before its fence round
 *                    (a slow fence: deregistrations must not wait for it)
 *   ib_accept_delay_ms the IB transport's accept sleeps this long after it built the QP,
 *                    before it publishes the path (widens the window of a destroy)
 *   ib_established_delay_ms  the IB transport's ESTABLISHED handler sleeps this long before
 *                    it marks the connection up (the QP's first completions come first)
 *   ib_fence_expire  non-zero: the next fences after a deregistration on an iWARP device
 *                    are treated as overdue at once (as if their QPs had made no progress
 *                    for the bound); read back as 0 once consumed
 *   guess_refill_hold while non-zero, the rate limit on a socket's failed r_key lookups
 *                    regains no tokens (its clock stands still), so a test can keep a socket
 *                    over its rate however slowly the machine runs
 *   reset            write anything: every connection is reset (dropped and reconnected)
 *   inject           write [laddr 16][faddr 16][tos 1][header 48][payload]: a frame arrives
 *                    on that loopback connection of the initial namespace
 */
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/interrupt.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "helpers.h"
#include "testhooks.h"

static struct dentry *rds_rs_test_dir;
static u32 rds_rs_loop_hold_val;
static u32 rds_rs_loop_ack_hold_val;
static u32 rds_rs_loop_reset_every_val;
static u32 rds_rs_loop_softirq_val;
static u32 rds_rs_loop_ring_val;
static u32 rds_rs_ib_service_break_val;
static u32 rds_rs_ib_route_delay_ms_val;
static u32 rds_rs_ib_accept_delay_ms_val;
static u32 rds_rs_ib_request_delay_ms_val;
static u32 rds_rs_ib_fence_hold_ms_val;
static u32 rds_rs_ib_established_delay_ms_val;
static u32 rds_rs_ib_fence_expire_val;
static u32 rds_rs_guess_refill_hold_val;

u32 rds_rs_test_loop_hold(void)
{
	return READ_ONCE(rds_rs_loop_hold_val);
}

u32 rds_rs_test_guess_refill_hold(void)
{
	return READ_ONCE(rds_rs_guess_refill_hold_val);
}

u32 rds_rs_test_loop_ack_hold(void)
{
	return READ_ONCE(rds_rs_loop_ack_hold_val);
}

u32 rds_rs_test_loop_reset_every(void)
{
	return READ_ONCE(rds_rs_loop_reset_every_val);
}

u32 rds_rs_test_loop_softirq(void)
{
	return READ_ONCE(rds_rs_loop_softirq_val);
}

u32 rds_rs_test_loop_ring(void)
{
	return READ_ONCE(rds_rs_loop_ring_val);
}

/* Consumed: reads as 0 again once a registration acted on it. */
u32 rds_rs_test_ib_service_break(void)
{
	return xchg(&rds_rs_ib_service_break_val, 0);
}

/* Consumed: reads as 0 again once a deregistration acted on it. */
u32 rds_rs_test_ib_fence_expire(void)
{
	return xchg(&rds_rs_ib_fence_expire_val, 0);
}

u32 rds_rs_test_ib_route_delay_ms(void)
{
	return READ_ONCE(rds_rs_ib_route_delay_ms_val);
}

u32 rds_rs_test_ib_fence_hold_ms(void)
{
	return READ_ONCE(rds_rs_ib_fence_hold_ms_val);
}

u32 rds_rs_test_ib_request_delay_ms(void)
{
	return READ_ONCE(rds_rs_ib_request_delay_ms_val);
}

u32 rds_rs_test_ib_accept_delay_ms(void)
{
	return READ_ONCE(rds_rs_ib_accept_delay_ms_val);
}

u32 rds_rs_test_ib_established_delay_ms(void)
{
	return READ_ONCE(rds_rs_ib_established_delay_ms_val);
}

static void rds_rs_test_tasklet_fn(struct tasklet_struct *t)
{
	rds_rs_test_softirq_run();
}

static DECLARE_TASKLET(rds_rs_test_tasklet, rds_rs_test_tasklet_fn);

void rds_rs_test_tasklet_schedule(void)
{
	tasklet_schedule(&rds_rs_test_tasklet);
}

/* Waits until the tasklet is not running (a delivery in progress has finished). */
void rds_rs_test_tasklet_wait(void)
{
	tasklet_unlock_wait(&rds_rs_test_tasklet);
}

static ssize_t rds_rs_test_reset_write(struct file *file, const char __user *buf, size_t len,
				       loff_t *ppos)
{
	int ret = rds_rs_test_reset_all();

	return ret ? ret : len;
}

static const struct file_operations rds_rs_test_reset_fops = {
	.owner = THIS_MODULE,
	.write = rds_rs_test_reset_write,
};

/* At most a header and 1 MiB + 1 of payload, plus the addressing. */
#define RDS_RS_INJECT_MAX (16 + 16 + 1 + 48 + (1 << 20) + 1)

static ssize_t rds_rs_test_inject_write(struct file *file, const char __user *buf, size_t len,
					loff_t *ppos)
{
	u8 *kbuf;
	int ret;

	if (len > RDS_RS_INJECT_MAX)
		return -EMSGSIZE;
	kbuf = vmemdup_user(buf, len);
	if (IS_ERR(kbuf))
		return PTR_ERR(kbuf);
	ret = rds_rs_test_inject(kbuf, len);
	kvfree(kbuf);
	return ret ? ret : len;
}

static const struct file_operations rds_rs_test_inject_fops = {
	.owner = THIS_MODULE,
	.write = rds_rs_test_inject_write,
};

int rds_rs_testhooks_init(void)
{
	rds_rs_test_dir = debugfs_create_dir("rds_rs", NULL);
	debugfs_create_u32("loop_hold", 0600, rds_rs_test_dir, &rds_rs_loop_hold_val);
	debugfs_create_u32("loop_ack_hold", 0600, rds_rs_test_dir, &rds_rs_loop_ack_hold_val);
	debugfs_create_u32("guess_refill_hold", 0600, rds_rs_test_dir,
			   &rds_rs_guess_refill_hold_val);
	debugfs_create_u32("loop_reset_every", 0600, rds_rs_test_dir,
			   &rds_rs_loop_reset_every_val);
	debugfs_create_u32("loop_softirq", 0600, rds_rs_test_dir, &rds_rs_loop_softirq_val);
	debugfs_create_u32("loop_ring", 0600, rds_rs_test_dir, &rds_rs_loop_ring_val);
	debugfs_create_u32("ib_service_break", 0600, rds_rs_test_dir,
			   &rds_rs_ib_service_break_val);
	debugfs_create_u32("ib_route_delay_ms", 0600, rds_rs_test_dir,
			   &rds_rs_ib_route_delay_ms_val);
	debugfs_create_u32("ib_accept_delay_ms", 0600, rds_rs_test_dir,
			   &rds_rs_ib_accept_delay_ms_val);
	debugfs_create_u32("ib_request_delay_ms", 0600, rds_rs_test_dir,
			   &rds_rs_ib_request_delay_ms_val);
	debugfs_create_u32("ib_fence_hold_ms", 0600, rds_rs_test_dir,
			   &rds_rs_ib_fence_hold_ms_val);
	debugfs_create_u32("ib_established_delay_ms", 0600, rds_rs_test_dir,
			   &rds_rs_ib_established_delay_ms_val);
	debugfs_create_u32("ib_fence_expire", 0600, rds_rs_test_dir,
			   &rds_rs_ib_fence_expire_val);
	debugfs_create_u32("conn_idle_ms", 0600, rds_rs_test_dir, &rds_rs_conn_idle_ms);
	debugfs_create_file("reset", 0200, rds_rs_test_dir, NULL, &rds_rs_test_reset_fops);
	debugfs_create_file("inject", 0200, rds_rs_test_dir, NULL, &rds_rs_test_inject_fops);
	return 0;
}

/* Removing the files waits for writers in progress; then the tasklet is stopped. */
void rds_rs_testhooks_exit(void)
{
	debugfs_remove_recursive(rds_rs_test_dir);
	rds_rs_test_dir = NULL;
	tasklet_kill(&rds_rs_test_tasklet);
}
