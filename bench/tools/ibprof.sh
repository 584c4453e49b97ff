#!/bin/bash
# ibprof.sh OUT KDIR TOOLS IMPL [MODULE]: rds-pingpong 64 B depth 1 over rxe (veth pair) with one
# implementation (IMPL c: the kernel's rds.ko + rds_rdma.ko; rs: MODULE), for the TB-counting
# plugin (tbcount.c, LBPLUG_TRIGGER = address of ksys_sync): after a warm-up run, `sync`
# (snapshot A), a SHORT-second run, `sync` (B), a LONG-second run, `sync` (C). (C-B)-(B-A) is
# LONG-SHORT seconds of steady exchanges, process start/exit and the warm-up cancelled out;
# the exchanges are the difference of the two runs' sent= counts. kallsyms saved with the
# module(s) loaded.
OUT=$1 KDIR=$2 TOOLS=$3 IMPL=$4 M=$5
SHORT=${SHORT:-2} LONG=${LONG:-10}
MODULE=/dev/null
. /work/main/tests/guest/common.sh
exec > $OUT/prof.log 2>&1
W=$(mktemp -d); cp $TOOLS/rds-pingpong $W/
veth_rdma_up rxe || { echo "no rxe"; exit 1; }
if [ "$IMPL" = c ]; then
  insmod $KDIR/net/rds/rds.ko && insmod $KDIR/net/rds/rds_rdma.ko || exit 1
else
  cp $M $W/m.ko; insmod $W/m.ko || exit 1
fi
pp() { timeout $(($1+60)) $W/rds-pingpong -T $1 -q 64 -a 64 -d 1 -r 192.0.2.2 -s 192.0.2.1 2>&1 | grep summary; }
echo "warmup $(pp 1)"
cat /proc/kallsyms > $OUT/kallsyms.txt
cat /proc/modules > $OUT/modules.txt
sync
echo "short $(pp $SHORT)"
sync
echo "long $(pp $LONG)"
sync
echo done
