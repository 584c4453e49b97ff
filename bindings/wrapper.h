/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel headers rds-rs binds to. bindgen reads this file at build time against the
 * configured kernel tree (see gen-bindings.sh); helpers.h declares the hand-written C helpers
 * for macros that bindgen cannot see.
 */
#include <linux/net.h>
#include <linux/socket.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include "helpers.h"
#include "ib_glue.h"
#include "tcp_glue.h"
#include "testhooks.h"
