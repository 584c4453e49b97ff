/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test hooks of the test build of rds_rs (RDS_RS_TEST, see testhooks.c): knobs and triggers
 * under /sys/kernel/debug/rds_rs, and the loopback transport's softirq delivery. Declared in
 * every build (for bindgen); defined and used only in the test build.
 */
#ifndef RDS_RS_TESTHOOKS_H
#define RDS_RS_TESTHOOKS_H

#include <linux/types.h>

int rds_rs_testhooks_init(void);
void rds_rs_testhooks_exit(void);

/* Knobs. */
u32 rds_rs_test_loop_hold(void);
u32 rds_rs_test_loop_ack_hold(void);
u32 rds_rs_test_guess_refill_hold(void);
u32 rds_rs_test_loop_reset_every(void);
u32 rds_rs_test_loop_softirq(void);
u32 rds_rs_test_loop_ring(void);
/* Nonzero once: the next registration on an iWARP device finds its service connection failed. */
u32 rds_rs_test_ib_service_break(void);
u32 rds_rs_test_ib_route_delay_ms(void);
u32 rds_rs_test_ib_accept_delay_ms(void);
u32 rds_rs_test_ib_request_delay_ms(void);
u32 rds_rs_test_ib_fence_hold_ms(void);
u32 rds_rs_test_ib_established_delay_ms(void);
/* Nonzero once: the next fences after a deregistration on iWARP are treated as overdue. */
u32 rds_rs_test_ib_fence_expire(void);

/* The softirq delivery of the loopback transport: a tasklet that calls rds_rs_test_softirq_run. */
void rds_rs_test_tasklet_schedule(void);
void rds_rs_test_tasklet_wait(void);

/* Implemented in Rust (bindings/testhooks.rs). */
void rds_rs_test_softirq_run(void);
int rds_rs_test_reset_all(void);
int rds_rs_test_inject(const u8 *buf, size_t len);

#endif
