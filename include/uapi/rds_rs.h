/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * rds_rs.h - rds-rs's extensions to the RDS user ABI (linux/rds.h).
 *
 * Everything in linux/rds.h works unchanged with rds_rs.ko; this header adds what rds-rs
 * offers beyond Linux's C RDS. See Documentation/rdma.md in the rds-rs tree.
 */
#ifndef _UAPI_RDS_RS_H
#define _UAPI_RDS_RS_H

#include <linux/types.h>
#include <linux/socket.h>
#include <linux/rds.h>

/*
 * The barrier (from RDS's founding design).
 *
 * Every RDMA or atomic operation a socket sends gets an id, counting up from 1 per socket and
 * destination (address and port). A socket that has sent operations to more than 64
 * destinations forgets those with nothing outstanding; a forgotten destination's next ids
 * continue above every id the socket has issued, so ids to a destination always increase,
 * and its mark is the largest id issued when it was forgotten. To learn an operation's id, add an RDS_CMSG_RDMA_ID control
 * message to the sendmsg that carries it: its data is a __u64 user address, where the id is
 * written when sendmsg accepts the operation.
 *
 * The kernel keeps, per socket and destination, the high-water mark of completed operations:
 * the largest id H such that every operation with an id up to H has completed locally. Failed,
 * cancelled and dropped operations complete too: the mark means "the buffers of these
 * operations are free again", not "they succeeded" (RDS_CMSG_RDMA_STATUS notifications say
 * that).
 *
 * setsockopt(fd, SOL_RDS, RDS_BARRIER, &args, sizeof(args)) writes the mark to mark_addr (if
 * not 0). With wait_id != 0 it first waits until the mark reaches wait_id; a non-blocking
 * socket, or flags RDS_RDMA_DONTWAIT, does not wait: the mark is written and the call fails
 * with EAGAIN if wait_id is not reached. Errors: EINVAL for a wrong optlen, unknown flags, a bad
 * destination, or a wait_id that was never issued; EFAULT; ETIMEDOUT (SO_RCVTIMEO); EINTR
 * (a signal arrived; with SA_RESTART the call is restarted).
 */
#define RDS_BARRIER		4	/* was deprecated in linux/rds.h; reused here */
#define RDS_CMSG_RDMA_ID	64	/* __u64 user address receiving the op's id */

struct rds_barrier_args {
	struct __kernel_sockaddr_storage dest;	/* AF_INET or AF_INET6 destination */
	__u64	wait_id;	/* wait until the mark reaches this id; 0: do not wait */
	__u64	mark_addr;	/* user address of a __u64 that receives the mark; 0: none */
	__u64	flags;		/* RDS_RDMA_DONTWAIT */
};

#endif /* _UAPI_RDS_RS_H */
