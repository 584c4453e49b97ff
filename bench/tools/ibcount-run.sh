#!/bin/bash
# run.sh NAME IMPL [MODULE]: one guest (plain kernel, 1 vCPU, -icount shift=0,sleep=off) with the
# counting plugin triggered at ksys_sync; results in /tmp/ibcount/NAME (tb.txt.1.. snapshots)
K=/root/.cache/rds-rs/kernel/plain
T=$(awk '$3=="ksys_sync"{print $1}' $K/System.map)
D=/tmp/ibcount/$1; mkdir -p $D
cd /work/main && LBPLUG_TRIGGER=$T LBPLUG_OUT=$D/tb.txt python3 tests/harness.py one --kernel $K --out $D --timeout 1200 --cpus 1 "--qemu-opts=-icount shift=0,sleep=off -plugin /tmp/ibcount/libtbcount.so" -- /tmp/ibcount/ibprof.sh $D $K /work/main/target/release $2 $3 > $D.out 2>&1
