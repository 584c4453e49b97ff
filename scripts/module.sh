#!/usr/bin/env bash
# Build rds_rs.ko for a kernel build directory.
#   scripts/module.sh KDIR [test]  -> prints the path of rds_rs.ko on stdout
# Without `test`, the build users get; with it, the test build (KUnit suite and test hooks
# compiled in, see Kbuild), which `make test` loads. Each is built in
# target/kmod/<kernel build name>[-test]/ (a copy of the module sources), so builds for the
# plain and the debug kernel, and the two variants, do not overwrite each other. Bindings are
# generated again whenever the kernel or the binding inputs change. Any compiler warning fails
# the build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
kdir=${1:?usage: module.sh KDIR [test]}
variant=${2:-}
testflag=(); suffix=
case "$variant" in
  test) testflag=(RDS_RS_TEST=1); suffix=-test ;;
  '') ;;
  *) die "unknown module variant '$variant' (test or nothing)" ;;
esac
[ -f "$kdir/.rds-rs-done" ] || die "$kdir is not a finished kernel build"
llvm=(); grep -q '^CONFIG_CC_IS_CLANG=y' "$kdir/.config" && llvm=(LLVM=1)

dest=$top/target/kmod/$(basename "$kdir")$suffix
mkdir -p "$dest"
# One build of a variant at a time (quick runs and make test may overlap).
exec 9> "$dest.lock"
flock 9
rsync -a --delete --exclude 'generated/' --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
  --exclude '*.mod*' --exclude 'modules.order' --exclude 'Module.symvers' --exclude '*.d' \
  --include 'Kbuild' --include 'rds/***' --include 'rds_loop/***' --include 'rds_ib/***' --include 'rds_tcp/***' --include 'bindings/***' \
  --include 'proto/' --include 'proto/src/***' --exclude '*' \
  "$top/" "$dest/"

gen=$dest/bindings/generated
key=$( { echo "$kdir"; cat "$kdir/.rds-rs-key"; cat "$top/bindings/gen-bindings.sh" "$top/bindings/wrapper.h" "$top/bindings/helpers.h" "$top/bindings/ib_glue.h" "$top/bindings/tcp_glue.h" "$top/bindings/testhooks.h"; } | sha256sum | cut -c1-16)
if [ "$(cat "$gen/.key" 2>/dev/null)" != "$key" ]; then
  step "generating bindings for $(basename "$kdir")"
  rm -rf "$gen"
  BINDGEN=$BINDGEN "$dest/bindings/gen-bindings.sh" "$kdir" "$gen" 2> "$dest/bindgen.log" \
    || { cat "$dest/bindgen.log" >&2; die "bindgen failed"; }
  echo "$key" > "$gen/.key"
fi

step "building rds_rs.ko for $(basename "$kdir")${variant:+ ($variant build)}"
if ! make -C "$kdir" M="$dest" "${llvm[@]}" "${testflag[@]}" RUSTC="$KRUSTC" BINDGEN="$BINDGEN" -j"$JOBS" modules \
    > "$dest/build.log" 2>&1; then
  cat "$dest/build.log" >&2; die "module build failed"
fi
if grep -E -i '(^|[^a-z_])(warning|error)(\[|:)' "$dest/build.log" >&2; then
  die "module build printed warnings (log: $dest/build.log)"
fi
echo "$dest/rds_rs.ko"
