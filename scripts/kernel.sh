#!/usr/bin/env bash
# Build (or reuse) a guest kernel from Debian's linux-source-6.12.
#   scripts/kernel.sh plain|debug      -> prints the build directory on stdout
# The build lives in $CACHE_DIR (outside git), keyed by the kernel package version, the rustc
# version, the config fragments, the patches and this script. A matching finished build is reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

variant=${1:?usage: kernel.sh plain|debug}
case "$variant" in
  plain) frags=("$top/kernel/base.config" "$top/kernel/plain.config"); llvm=() ;;
  debug) frags=("$top/kernel/base.config" "$top/kernel/debug.config"); llvm=(LLVM=1) ;;
  *) die "unknown kernel variant '$variant' (plain or debug)" ;;
esac

srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) || die "linux-source-6.12 not installed (run scripts/setup.sh)"
rustcver=$("$KRUSTC" --version) || die "$KRUSTC missing (run scripts/setup.sh)"
key=$( { echo "$srcver"; echo "$rustcver"; echo "$variant"; "$BINDGEN" --version;
         cat "${frags[@]}" "$0"; cat "$top"/kernel/patches/*.patch 2>/dev/null || true; } | sha256sum | cut -c1-16)
out=$CACHE_DIR/kernel/$variant-$key
if [ -f "$out/.rds-rs-done" ]; then
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

# One cached build per variant: an unfinished build of this key is resumed; otherwise the
# previous build of the variant, if any, becomes this one and Kbuild rebuilds only what the
# change affects (the same source version only: a new source tree starts from scratch).
if [ ! -d "$out" ]; then
  for d in "$CACHE_DIR/kernel/$variant-"*; do
    [ -d "$d" ] || continue
    if [ "$(readlink "$d/source")" = "$src" ] && [ ! -d "$out" ]; then
      rm -f "$d/.rds-rs-done"; mv "$d" "$out"
    else
      rm -rf "$d"
    fi
  done
fi
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
touch "$out/.rds-rs-done"
info "kernel $variant: built ($out)"
echo "$out"
