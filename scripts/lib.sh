# Shared settings and helpers for the rds-rs scripts (sourced, not run).
CACHE_DIR=${RDS_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rds-rs}
TOOLS_DIR=$CACHE_DIR/tools
BINDGEN_VERSION=0.73.2
VNG_VERSION=1.42
BINDGEN=$TOOLS_DIR/bin/bindgen
VIRTIOFSD_VERSION=1.14.0
VIRTIOFSD=$TOOLS_DIR/bin/virtiofsd
VNG=$TOOLS_DIR/venv/bin/vng
KRUSTC=/usr/bin/rustc
JOBS=${JOBS:-3}
mkdir -p "$CACHE_DIR" "$TOOLS_DIR"
export PATH="$TOOLS_DIR/bin:$TOOLS_DIR/venv/bin:$PATH"

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
info() { printf '    %s\n' "$*" >&2; }
die()  { printf 'ERROR: %s\n' "$*" >&2; exit 1; }
