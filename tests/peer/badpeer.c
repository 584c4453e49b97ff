// SPDX-License-Identifier: GPL-2.0
/*
 * badpeer: a user-space RDS/IB peer that misbehaves on purpose (issue 10).
 *
 *   badpeer LOCAL-IP SERVER-IP SCENARIO [TOS [DPORT [SECONDS]]]
 *
 * Connects with rdma_cm from LOCAL-IP to SERVER-IP:18634 (the RDS/IB port) with the private
 * data of the scenario, and, for the data scenarios, sends the scenario's SENDs once the
 * connection is established. It reports what happened on stdout, one event a line:
 *
 *   event <name> t=<ms> [details]       cm events, completions, frames received
 *   sent message len=<n> fnv=<hash>     a message the server must deliver (good ones)
 *   result <outcome> t=<ms> [details]   the last line; outcome is one of
 *       rejected      the server refused the connection request (reason = its reject int)
 *       disconnected  the server dropped the established connection
 *       stayed        the connection was still up after the linger; we disconnected
 *       accepted      a connect-only scenario was accepted (we disconnected)
 *       timeout       nothing decisive happened before the deadline
 *       error         rdma_cm or verbs failed before the experiment (see the message)
 *
 * and exits 0 when the experiment ran (whatever its outcome: the guest script judges it),
 * 2 on a usage or set-up error, 3 when the overall bound (SECONDS, default 20) expired.
 *
 * The wire (see ../shared/notes/ib-transport.md, proto/src/ib.rs): the private data is
 * struct rds_ib_connect_private (IPv4: saddr, daddr, major, minor, minor_mask, tos, 3
 * reserved, ack_seq be64 @16, credit be32 @24; 32 bytes); every SEND is a 48-byte RDS header
 * (big-endian) followed by at most 4096 data bytes; a message of h_len bytes is
 * max(1, ceil(h_len / 4096)) SENDs, each with the full header.
 *
 * Scenarios:
 *   connection requests, all refused by rds_rs (but short_private_8 on RoCE):
 *     bad_version      3.0
 *     bad_version_5    5.0 (minor mask 3)
 *     short_private    6 bytes: the destination address is cut in half (rdma_cm pads the
 *                      request with zeros on IB/RoCE, so the server sees daddr 192.0.0.0)
 *     short_private_8  8 bytes: the addresses alone. On IB/RoCE the server sees them
 *                      followed by zeros, which is a request of major version 0, taken as
 *                      4.0 (as C does: an old peer's request): accepted there; on iWARP,
 *                      where the length is exact, refused as too short
 *     no_private       no private data (zeros on IB/RoCE: daddr 0)
 *     zero_daddr       a 3.1 request for address 0.0.0.0
 *     loopback_saddr   a 3.1 request from 127.0.0.1
 *     same_connection  a good 3.1 request (run it with the TOS of a connection that is up
 *                      between the two addresses): to the server, the peer restarted; it
 *                      refuses the request and drops its connection as stale (as C)
 *   after a good 3.1 handshake, SENDs that must make rds_rs drop the connection:
 *     short_fragment   a SEND of 20 bytes (less than a header)
 *     too_long         48 + 4097 bytes (more than the server's receive buffers hold)
 *     wrong_length     h_len 100 with 50 data bytes
 *     bad_checksum     a 64-byte message whose h_csum is off by one
 *     len_over_1mib    the first fragment (4096 bytes) of a message of 1 MiB + 1
 *     mismatched_fragments  the first fragment of an 8 KiB message, then a second with
 *                      another sequence number
 *     long_last_fragment  a 5000-byte message as 4096 + 1000 bytes (904 are due)
 *     bad_cong_map     a congestion-map frame (flag 0x01, ports 0) of 100 bytes (8192 due)
 *     truncated_ext    a good message whose extension area ends with an RDMA_DEST header
 *                      (8 bytes) 2 bytes before its end
 *     rdma_write_bad_rkey  an RDMA WRITE of 64 bytes with an rkey the server never gave
 *                      (the server's QP goes to the error state, without an error
 *                      completion of its own on soft-RoCE: its receives are flushed); the
 *                      peer then keeps its end of the connection: the server must drop it
 *   and messages that must be delivered (the connection stays up):
 *     unknown_ext      a 100-byte message with extension types 4, 9, 200 (unknown in 6.12)
 *     good             a 9000-byte message (3 fragments)
 *     replay           a 100-byte message, then the same SEND again (sequence 1 again, not
 *                      marked RETRANSMITTED): rds_rs delivers it once and counts a replay
 *                      (rs_recv_drop_replay); C would deliver it twice
 *
 * Data messages go from port 40000 to DPORT (default 4000) with ACK_REQUIRED, sequence 1;
 * the server's frames that arrive (acks) are reported as "event frame ...".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RDS_IB_PORT 18634
#define HDR_LEN 48
#define FRAG 4096
#define RECV_LEN (HDR_LEN + FRAG)
#define NRECV 16
#define MAX_SENDS 4
#define SEND_SLOT (HDR_LEN + FRAG + 64) /* room for the 4097-byte fragment */
#define SPORT 40000
#define FLAG_CONG_BITMAP 0x01
#define FLAG_ACK_REQUIRED 0x02
#define LINGER_MS 2000 /* how long a good scenario waits for a drop that must not come */

static struct timespec t0;

static long ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
}

static void on_alarm(int sig)
{
	char line[64];
	int n;

	(void)sig;
	n = snprintf(line, sizeof(line), "result timeout t=%ld overall bound\n", ms());
	if (write(1, line, n) < 0)
		_exit(4);
	_exit(3);
}

/* ---- the RDS header ------------------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static uint16_t get16(const uint8_t *p)
{
	return p[0] << 8 | p[1];
}

/*
 * h_csum: the Internet checksum of the 48 header bytes with the field zeroed, as
 * rds_message_make_checksum (ip_fast_csum). Summing big-endian words and storing the result
 * big-endian gives the bytes Linux writes.
 */
static uint16_t hdr_csum(const uint8_t *h)
{
	uint32_t sum = 0;

	for (int i = 0; i < HDR_LEN; i += 2)
		if (i != 30)
			sum += get16(h + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

struct hdr {
	uint64_t seq, ack;
	uint32_t len;
	uint16_t sport, dport;
	uint8_t flags;
	uint8_t ext[16];
};

/* Encodes `h` into 48 bytes; `csum_delta` is added to the right checksum (0: correct). */
static void hdr_encode(uint8_t *out, const struct hdr *h, int csum_delta)
{
	uint16_t c;

	memset(out, 0, HDR_LEN);
	put64(out, h->seq);
	put64(out + 8, h->ack);
	put32(out + 16, h->len);
	put16(out + 20, h->sport);
	put16(out + 22, h->dport);
	out[24] = h->flags;
	memcpy(out + 32, h->ext, 16);
	c = hdr_csum(out) + csum_delta;
	if (csum_delta && c == 0) /* 0 would mean "unchecked" */
		c = 1;
	put16(out + 30, c);
}

/* The payload byte at offset `i` of a message (what the server's receiver hashes). */
static uint8_t pattern(uint32_t i)
{
	return (uint8_t)(i * 7 + (i >> 8) + 1);
}

static uint32_t fnv(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* ---- scenarios ------------------------------------------------------------------------ */

enum kind { CONNECT_ONLY, DATA_BAD, DATA_GOOD };

struct scenario {
	const char *name;
	enum kind kind;
};

static const struct scenario scenarios[] = {
	{ "bad_version", CONNECT_ONLY },
	{ "bad_version_5", CONNECT_ONLY },
	{ "short_private", CONNECT_ONLY },
	{ "short_private_8", CONNECT_ONLY },
	{ "no_private", CONNECT_ONLY },
	{ "zero_daddr", CONNECT_ONLY },
	{ "loopback_saddr", CONNECT_ONLY },
	{ "same_connection", CONNECT_ONLY },
	{ "short_fragment", DATA_BAD },
	{ "too_long", DATA_BAD },
	{ "wrong_length", DATA_BAD },
	{ "bad_checksum", DATA_BAD },
	{ "len_over_1mib", DATA_BAD },
	{ "mismatched_fragments", DATA_BAD },
	{ "long_last_fragment", DATA_BAD },
	{ "bad_cong_map", DATA_BAD },
	{ "truncated_ext", DATA_BAD },
	{ "rdma_write_bad_rkey", DATA_BAD },
	{ "unknown_ext", DATA_GOOD },
	{ "replay", DATA_GOOD },
	{ "good", DATA_GOOD },
};

/* The request's private data; returns its length. */
static size_t build_private(const char *sc, uint8_t *p, struct in_addr s, struct in_addr d,
			    uint8_t tos)
{
	memset(p, 0, 56);
	if (!strcmp(sc, "loopback_saddr"))
		s.s_addr = htonl(INADDR_LOOPBACK);
	if (!strcmp(sc, "zero_daddr"))
		d.s_addr = 0;
	memcpy(p, &s.s_addr, 4);
	memcpy(p + 4, &d.s_addr, 4);
	p[8] = 3; /* major */
	p[9] = 1; /* minor */
	put16(p + 10, 0x0003); /* minor mask */
	p[12] = tos;
	if (!strcmp(sc, "bad_version"))
		p[9] = 0;
	if (!strcmp(sc, "bad_version_5")) {
		p[8] = 5;
		p[9] = 0;
	}
	if (!strcmp(sc, "short_private"))
		return 6;
	if (!strcmp(sc, "short_private_8"))
		return 8;
	if (!strcmp(sc, "no_private"))
		return 0;
	return 32;
}

struct send {
	uint8_t *buf;
	size_t len;
};

/* Fills one SEND: a header, then `data` payload bytes starting at message offset `off`. */
static size_t frame(uint8_t *buf, const struct hdr *h, int csum_delta, uint32_t off,
		    uint32_t data)
{
	hdr_encode(buf, h, csum_delta);
	for (uint32_t i = 0; i < data; i++)
		buf[HDR_LEN + i] = pattern(off + i);
	return HDR_LEN + data;
}

/* The SENDs of a data scenario into `slots`; returns how many. */
static int build_sends(const char *sc, uint16_t dport, uint8_t *slots, struct send *out)
{
	struct hdr h = { .seq = 1, .sport = SPORT, .dport = dport, .flags = FLAG_ACK_REQUIRED };
	int n = 0;

#define SLOT (slots + n * SEND_SLOT)
#define ADD(len_)                                                                         \
	do {                                                                              \
		out[n].buf = SLOT;                                                        \
		out[n].len = (len_);                                                      \
		n++;                                                                      \
	} while (0)

	if (!strcmp(sc, "short_fragment")) {
		h.len = 64;
		frame(SLOT, &h, 0, 0, 64);
		ADD(20);
	} else if (!strcmp(sc, "too_long")) {
		h.len = FRAG + 1;
		ADD(frame(SLOT, &h, 0, 0, FRAG + 1));
	} else if (!strcmp(sc, "wrong_length")) {
		h.len = 100;
		ADD(frame(SLOT, &h, 0, 0, 50));
	} else if (!strcmp(sc, "bad_checksum")) {
		h.len = 64;
		ADD(frame(SLOT, &h, 1, 0, 64));
	} else if (!strcmp(sc, "len_over_1mib")) {
		h.len = (1u << 20) + 1;
		ADD(frame(SLOT, &h, 0, 0, FRAG));
	} else if (!strcmp(sc, "mismatched_fragments")) {
		h.len = 2 * FRAG;
		ADD(frame(SLOT, &h, 0, 0, FRAG));
		h.seq = 2;
		ADD(frame(SLOT, &h, 0, FRAG, FRAG));
	} else if (!strcmp(sc, "long_last_fragment")) {
		h.len = 5000;
		ADD(frame(SLOT, &h, 0, 0, FRAG));
		ADD(frame(SLOT, &h, 0, FRAG, 1000));
	} else if (!strcmp(sc, "bad_cong_map")) {
		h.sport = h.dport = 0;
		h.flags = FLAG_CONG_BITMAP;
		h.len = 100;
		ADD(frame(SLOT, &h, 0, 0, 100));
	} else if (!strcmp(sc, "truncated_ext")) {
		/* 13 zero-length unknown (type 4) headers, then RDMA_DEST (type 3, 8 bytes) at
		 * byte 13 of the 16-byte area: its payload would run 6 bytes past the end. */
		memset(h.ext, 4, 13);
		h.ext[13] = 3;
		h.len = 64;
		ADD(frame(SLOT, &h, 0, 0, 64));
	} else if (!strcmp(sc, "rdma_write_bad_rkey")) {
		memset(SLOT, 0xab, 64);
		ADD(64); /* posted as an RDMA WRITE (see main) */
	} else if (!strcmp(sc, "unknown_ext")) {
		h.ext[0] = 4;
		h.ext[1] = 9;
		h.ext[2] = 200;
		h.len = 100;
		ADD(frame(SLOT, &h, 0, 0, 100));
	} else if (!strcmp(sc, "replay")) {
		/* The same message twice, sequence 1 both times, not marked RETRANSMITTED. */
		h.len = 100;
		ADD(frame(SLOT, &h, 0, 0, 100));
		ADD(frame(SLOT, &h, 0, 0, 100));
	} else if (!strcmp(sc, "good")) {
		h.len = 9000;
		for (uint32_t off = 0; off < h.len; off += FRAG) {
			uint32_t d = h.len - off < FRAG ? h.len - off : FRAG;

			ADD(frame(SLOT, &h, 0, off, d));
		}
	}
#undef ADD
#undef SLOT
	return n;
}

/* Says what the receiver must see for the message of a good scenario. */
static void print_message(const struct send *first, uint16_t dport)
{
	uint32_t len = get32(first->buf + 16);
	uint8_t *msg = malloc(len ? len : 1);

	if (!msg)
		return;
	for (uint32_t i = 0; i < len; i++)
		msg[i] = pattern(i);
	printf("sent message len=%u fnv=%08x sport=%u dport=%u\n", len, fnv(msg, len), SPORT,
	       dport);
	free(msg);
}

/* ---- rdma_cm and verbs ------------------------------------------------------------------ */

struct peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem; /* NRECV receive buffers, then MAX_SENDS send slots */
	int qp_ok;
	int posted_sends, completed_sends;
};

/*
 * Waits until the deadline (ms since start) for a cm event; returns its type (the event is
 * acked; `priv` gets up to 56 bytes of its private data and `status` its status), or -1 on
 * timeout. With `cq_too`, completions are polled and reported meanwhile.
 */
static int wait_event(struct peer *p, long deadline, uint8_t *priv, int *plen, int *status,
		      int cq_too);

static const char *wc_name(int s)
{
	return ibv_wc_status_str(s);
}

static void poll_cq(struct peer *p)
{
	struct ibv_wc wc[8];
	int n;

	if (!p->cq)
		return;
	while ((n = ibv_poll_cq(p->cq, 8, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id >= NRECV) {
				p->completed_sends++;
				printf("event send_done t=%ld slot=%lu status=%s\n", ms(),
				       (unsigned long)(wc[i].wr_id - NRECV), wc_name(wc[i].status));
			} else if (wc[i].status != IBV_WC_SUCCESS) {
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					printf("event recv_error t=%ld status=%s\n", ms(),
					       wc_name(wc[i].status));
			} else {
				const uint8_t *h = p->mem + wc[i].wr_id * RECV_LEN;

				printf("event frame t=%ld bytes=%u seq=%llu ack=%llu len=%u sport=%u "
				       "dport=%u flags=0x%02x\n",
				       ms(), wc[i].byte_len, (unsigned long long)get64(h),
				       (unsigned long long)get64(h + 8), get32(h + 16), get16(h + 20),
				       get16(h + 22), h[24]);
				/* Give the buffer back (a peer must keep receiving). */
				struct ibv_sge sge = { .addr = (uintptr_t)h, .length = RECV_LEN,
						       .lkey = p->mr->lkey };
				struct ibv_recv_wr wr = { .wr_id = wc[i].wr_id, .sg_list = &sge,
							  .num_sge = 1 }, *bad;
				if (ibv_post_recv(p->id->qp, &wr, &bad))
					printf("event repost_failed t=%ld\n", ms());
			}
		}
	}
}

static int wait_event(struct peer *p, long deadline, uint8_t *priv, int *plen, int *status,
		      int cq_too)
{
	struct pollfd pfd = { .fd = p->ch->fd, .events = POLLIN };

	for (;;) {
		long left = deadline - ms();
		struct rdma_cm_event *ev;
		int type;

		if (cq_too)
			poll_cq(p);
		if (left <= 0)
			return -1;
		if (poll(&pfd, 1, cq_too && left > 20 ? 20 : left) <= 0)
			continue;
		if (rdma_get_cm_event(p->ch, &ev))
			return -1;
		type = ev->event;
		if (status)
			*status = ev->status;
		if (priv && plen) {
			int n = ev->param.conn.private_data_len;

			if (n > 56)
				n = 56;
			*plen = ev->param.conn.private_data ? n : 0;
			if (*plen)
				memcpy(priv, ev->param.conn.private_data, *plen);
		}
		printf("event cm_%s t=%ld status=%d\n", rdma_event_str(type), ms(), ev->status);
		rdma_ack_cm_event(ev);
		return type;
	}
}

static int setup_qp(struct peer *p)
{
	struct ibv_qp_init_attr qa;
	size_t memlen = NRECV * RECV_LEN + MAX_SENDS * SEND_SLOT;

	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = p->pd ? ibv_create_cq(p->id->verbs, NRECV + MAX_SENDS + 4, NULL, NULL, 0) : NULL;
	p->mem = calloc(1, memlen);
	if (!p->pd || !p->cq || !p->mem)
		return -1;
	p->mr = ibv_reg_mr(p->pd, p->mem, memlen, IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		return -1;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = p->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = MAX_SENDS;
	qa.cap.max_recv_wr = NRECV;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(p->id, p->pd, &qa))
		return -1;
	p->qp_ok = 1;
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(p->mem + i * RECV_LEN),
				       .length = RECV_LEN, .lkey = p->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(p->id->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

static void teardown(struct peer *p)
{
	if (p->qp_ok)
		rdma_destroy_qp(p->id);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
	free(p->mem);
}

static int fail(struct peer *p, const char *what)
{
	printf("result error t=%ld %s: %s\n", ms(), what, strerror(errno));
	fflush(stdout);
	teardown(p);
	return 2;
}

int main(int argc, char **argv)
{
	struct peer p = { 0 };
	const struct scenario *sc = NULL;
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
	uint8_t priv[56], reply[56];
	struct rdma_conn_param cp;
	struct send sends[MAX_SENDS];
	int tos = 7, dport = 4000, seconds = 20, type, status = 0, rlen = 0, nsend = 0;
	long deadline, hard_end;
	size_t plen;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4)
		for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
			if (!strcmp(argv[3], scenarios[i].name))
				sc = &scenarios[i];
	if (argc < 4 || argc > 7 || !sc || inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
		fprintf(stderr, "usage: badpeer LOCAL-IP SERVER-IP SCENARIO [TOS [DPORT [SECONDS]]]\n"
				"scenarios:");
		for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
			fprintf(stderr, " %s", scenarios[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	if (argc > 4)
		tos = atoi(argv[4]);
	if (argc > 5)
		dport = atoi(argv[5]);
	if (argc > 6)
		seconds = atoi(argv[6]);
	if (tos < 0 || tos > 255 || dport <= 0 || dport > 65535 || seconds < 2) {
		fprintf(stderr, "badpeer: bad TOS, DPORT or SECONDS\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(seconds);
	/* The experiment ends a second before the alarm, the teardown 200 ms before it. */
	deadline = seconds * 1000L - 1000;
	hard_end = seconds * 1000L - 200;
	dst.sin_port = htons(RDS_IB_PORT);
	printf("scenario %s tos=%d dport=%d\n", sc->name, tos, dport);

	p.ch = rdma_create_event_channel();
	if (!p.ch)
		return fail(&p, "rdma_create_event_channel");
	if (rdma_create_id(p.ch, &p.id, NULL, RDMA_PS_TCP))
		return fail(&p, "rdma_create_id");
	if (rdma_resolve_addr(p.id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 5000))
		return fail(&p, "rdma_resolve_addr");
	if (wait_event(&p, deadline, NULL, NULL, &status, 0) != RDMA_CM_EVENT_ADDR_RESOLVED) {
		errno = -status;
		return fail(&p, "address resolution");
	}
	if (rdma_resolve_route(p.id, 5000))
		return fail(&p, "rdma_resolve_route");
	if (wait_event(&p, deadline, NULL, NULL, &status, 0) != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		errno = -status;
		return fail(&p, "route resolution");
	}
	if (setup_qp(&p))
		return fail(&p, "QP set-up");
	if (sc->kind != CONNECT_ONLY)
		nsend = build_sends(sc->name, dport, p.mem + NRECV * RECV_LEN, sends);
	if (sc->kind == DATA_GOOD && nsend)
		print_message(&sends[0], dport);

	plen = build_private(sc->name, priv, src.sin_addr, dst.sin_addr, tos);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = plen ? priv : NULL;
	cp.private_data_len = plen;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	printf("event connect t=%ld private_len=%zu\n", ms(), plen);
	if (rdma_connect(p.id, &cp))
		return fail(&p, "rdma_connect");
	type = wait_event(&p, deadline, reply, &rlen, &status, 0);
	if (type == RDMA_CM_EVENT_REJECTED) {
		int reason = 0;

		if (rlen >= 4)
			memcpy(&reason, reply, 4);
		printf("result rejected t=%ld status=%d reason=%d reply_len=%d\n", ms(), status,
		       reason, rlen);
		teardown(&p);
		return 0;
	}
	if (type != RDMA_CM_EVENT_ESTABLISHED) {
		printf("result %s t=%ld cm event %s status=%d\n", type < 0 ? "timeout" : "error", ms(),
		       type < 0 ? "none" : rdma_event_str(type), status);
		teardown(&p);
		return 0;
	}
	if (rlen >= 12)
		printf("event version t=%ld %u.%u mask=0x%04x\n", ms(), reply[8], reply[9],
		       get16(reply + 10));
	else
		printf("event version t=%ld none (reply private data %d bytes)\n", ms(), rlen);

	if (sc->kind == CONNECT_ONLY) {
		/* A request rds_rs should have refused got in: say so and leave. */
		rdma_disconnect(p.id);
		wait_event(&p, ms() + 2000 < hard_end ? ms() + 2000 : hard_end, NULL, NULL, NULL, 1);
		printf("result accepted t=%ld\n", ms());
		teardown(&p);
		return 0;
	}

	for (int i = 0; i < nsend; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)sends[i].buf, .length = sends[i].len,
				       .lkey = p.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = NRECV + i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED |
							(i + 1 == nsend ? IBV_SEND_SOLICITED : 0) },
				   *bad;

		if (!strcmp(sc->name, "rdma_write_bad_rkey")) {
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = 0x10000;
			wr.wr.rdma.rkey = 0x5eed1234;
		}

		if (ibv_post_send(p.id->qp, &wr, &bad)) {
			printf("result error t=%ld ibv_post_send %d: %s\n", ms(), i, strerror(errno));
			rdma_disconnect(p.id);
			teardown(&p);
			return 2;
		}
		printf("event posted t=%ld slot=%d bytes=%zu\n", ms(), i, sends[i].len);
	}
	p.posted_sends = nsend;

	{
		long sent_at = ms();
		long until = sc->kind == DATA_GOOD && sent_at + LINGER_MS < deadline ?
				     sent_at + LINGER_MS :
				     deadline;

		for (;;) {
			type = wait_event(&p, until, NULL, NULL, &status, 1);
			if (type == RDMA_CM_EVENT_DISCONNECTED) {
				poll_cq(&p);
				printf("result disconnected t=%ld after_send_ms=%ld sends_done=%d/%d\n",
				       ms(), ms() - sent_at, p.completed_sends, p.posted_sends);
				rdma_disconnect(p.id);
				teardown(&p);
				return 0;
			}
			if (type < 0)
				break;
			/* Other events (none expected): keep waiting. */
		}
		if (sc->kind == DATA_GOOD) {
			printf("result stayed t=%ld sends_done=%d/%d\n", ms(), p.completed_sends,
			       p.posted_sends);
		} else {
			printf("result timeout t=%ld no disconnect sends_done=%d/%d\n", ms(),
			       p.completed_sends, p.posted_sends);
		}
		fflush(stdout);
		rdma_disconnect(p.id);
		/* Wait for our disconnect to complete (DISCONNECTED), bounded by the alarm. */
		wait_event(&p, ms() + 2000 < hard_end ? ms() + 2000 : hard_end, NULL, NULL, NULL, 1);
		teardown(&p);
	}
	return 0;
}
