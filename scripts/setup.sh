#!/usr/bin/env bash
# Idempotent host set-up for rds-rs: Debian packages, bindgen-cli, virtme-ng.
# Safe to run any number of times; each step is skipped when already done.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

DEB_PKGS=(linux-source-6.12 rustc-web rust-web-src clang libclang-dev lld llvm
  flex bison bc libelf-dev libssl-dev pahole kmod cpio
  qemu-system-x86 iproute2 rdma-core ibverbs-utils rdmacm-utils perftest
  ibverbs-providers libibverbs-dev librdmacm-dev   # rxe/siw providers; badpeer's verbs headers
  python3-pip python3-venv busybox-static rsync
  linux-perf tcpdump iputils-ping   # profiles in the guests; the kernel's RDS selftest
  libseccomp-dev libcap-ng-dev      # virtiofsd's build
  python3-matplotlib)   # the chart of `make bench`

missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
else
  info "Debian packages present"
fi

if ! "$BINDGEN" --version 2>/dev/null | grep -q "$BINDGEN_VERSION"; then
  step "installing bindgen-cli $BINDGEN_VERSION from crates.io"
  cargo install --locked --quiet --version "$BINDGEN_VERSION" --root "$TOOLS_DIR" bindgen-cli \
    || die "cargo install bindgen-cli failed"
else
  info "bindgen-cli $BINDGEN_VERSION present"
fi

# virtiofsd (the Rust one; Debian 12 has none, and QEMU's old C daemon takes other options):
# with it vng exports the host's filesystem to the guests over virtio-fs, whose page cache
# makes a program's second start cheap, instead of 9p without a cache, where every exec
# reads the binary and its libraries from the host again (measured under load in a debug
# guest: 0.64 s against 1.36 s per /bin/true).
if ! "$VIRTIOFSD" --version 2>/dev/null | grep -q "$VIRTIOFSD_VERSION"; then
  step "installing virtiofsd $VIRTIOFSD_VERSION from crates.io"
  cargo install --locked --quiet --version "$VIRTIOFSD_VERSION" --root "$TOOLS_DIR" virtiofsd \
    || die "cargo install virtiofsd failed"
else
  info "virtiofsd $VIRTIOFSD_VERSION present"
fi

if ! "$VNG" --version 2>/dev/null | grep -q "$VNG_VERSION"; then
  step "installing virtme-ng $VNG_VERSION from PyPI"
  python3 -m venv "$TOOLS_DIR/venv" || die "python venv failed"
  "$TOOLS_DIR/venv/bin/pip" install -q "virtme-ng==$VNG_VERSION" || die "pip install virtme-ng failed"
else
  info "virtme-ng $VNG_VERSION present"
fi

