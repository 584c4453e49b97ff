#!/usr/bin/env bash
# Build (or reuse) a guest kernel from Debian's linux-source-6.12.
#   scripts/kernel.sh plain|debug|leak -> prints the build directory on stdout
# The build lives in $CACHE_DIR (outside git), keyed by the kernel package version, the rustc and
# bindgen versions, the config fragments, the patches and RECIPE below. A matching finished build
# is reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

# Bump when a change to this script changes what it builds (not for messages or comments).
RECIPE=1

variant=${1:?usage: kernel.sh plain|debug|leak}
case "$variant" in
  plain) frags=("$top/kernel/base.config" "$top/kernel/plain.config"); llvm=() ;;
  debug) frags=("$top/kernel/base.config" "$top/kernel/debug.config"); llvm=(LLVM=1) ;;
  leak) frags=("$top/kernel/base.config" "$top/kernel/plain.config" "$top/kernel/leak.config")
        llvm=() ;;
  *) die "unknown kernel variant '$variant' (plain, debug or leak)" ;;
esac

srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) || die "linux-source-6.12 not installed (run scripts/setup.sh)"
rustcver=$("$KRUSTC" --version) || die "$KRUSTC missing (run scripts/setup.sh)"
bindgenver=$("$BINDGEN" --version) || die "$BINDGEN missing (run scripts/setup.sh)"
key=$( { echo "$srcver"; echo "$rustcver"; echo "$variant"; echo "$bindgenver";
         echo "recipe $RECIPE"; cat "${frags[@]}"; cat "$top"/kernel/patches/*.patch 2>/dev/null || true; } | sha256sum | cut -c1-16)
# One build directory per variant, at a stable path (Kbuild's saved commands hold absolute
# paths, so a moved tree rebuilds from scratch). The key of the finished build is kept in it.
out=$CACHE_DIR/kernel/$variant
# One caller at a time per variant: a second waits for the first's build and then reuses it.
mkdir -p "$CACHE_DIR/kernel"
exec 9> "$CACHE_DIR/kernel/$variant.lock"
flock 9
if [ -f "$out/.rds-rs-done" ] && [ "$(cat "$out/.rds-rs-key" 2>/dev/null)" = "$key" ]; then
  info "kernel $variant: cached ($out)"
  echo "$out"; exit 0
fi

src=$CACHE_DIR/src/linux-$srcver
if [ ! -f "$src/.rds-rs-extracted" ]; then
  step "extracting linux-source $srcver"
  rm -rf "$src"; mkdir -p "$src"
  tar -xf /usr/src/linux-source-6.12.tar.xz -C "$src" --strip-components=1 || die "extracting kernel source failed"
  for p in "$top"/kernel/patches/*.patch; do
    [ -e "$p" ] || continue
    patch -d "$src" -p1 -s < "$p" || die "applying $p failed"
  done
  touch "$src/.rds-rs-extracted"
fi

# A build of another source tree starts from scratch; otherwise Kbuild rebuilds only what the
# changed configuration or toolchain affects (also resuming an interrupted build).
[ "$(readlink "$out/source" 2>/dev/null)" = "$src" ] || rm -rf "$out"
rm -f "$out/.rds-rs-done"
mkdir -p "$out"
kmake=(make -C "$src" O="$out" ARCH=x86_64 "${llvm[@]}" RUSTC="$KRUSTC" HOSTRUSTC="$KRUSTC" BINDGEN="$BINDGEN")
step "configuring $variant kernel ($srcver, $rustcver)"
"${kmake[@]}" -s tinyconfig >/dev/null || die "make tinyconfig failed"
(cd "$src" && ARCH=x86_64 scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" "${frags[@]}" >/dev/null) \
  || die "merging config fragments failed"
"${kmake[@]}" -s olddefconfig >/dev/null || die "make olddefconfig failed"
"${kmake[@]}" -s rustavailable >/dev/null || die "Rust is not available for this kernel (make rustavailable)"
# Every option a fragment asks for must have survived olddefconfig.
bad=$(cat "${frags[@]}" | sed -n 's/^\(CONFIG_[A-Z0-9_]*\)=\(.*\)$/\1=\2/p; s/^# \(CONFIG_[A-Z0-9_]*\) is not set$/\1=n/p' | while IFS== read -r k v; do
  have=$(sed -n "s/^$k=\(.*\)/\1/p" "$out/.config"); [ -n "$have" ] || have=n
  [ "$have" = "$v" ] || echo "$k wanted $v got $have"
done)
[ -z "$bad" ] || die "kernel config did not take these options:
$bad"

step "building $variant kernel with -j$JOBS (minutes; cached afterwards)"
"${kmake[@]}" -j"$JOBS" -s bzImage modules > "$out/build.log" 2>&1 || { tail -40 "$out/build.log" >&2; die "kernel build failed (log: $out/build.log)"; }
echo "$key" > "$out/.rds-rs-key"
touch "$out/.rds-rs-done"
info "kernel $variant: built ($out)"
echo "$out"
