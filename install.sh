#!/usr/bin/env bash
# Installs lora-worker on a GPU host: the binary into /opt/lora-worker, the unit, and a config
# only if none exists. --root DIR installs into a scratch tree (no systemctl, no users touched).
set -euo pipefail

usage() { echo "usage: install.sh [--root DIR] [--binary PATH]" >&2; exit 2; }

ROOT=""
BINARY="$(dirname "$0")/dist/lora-worker"
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT=${2:?}; shift 2 ;;
    --binary) BINARY=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done

[ -x "$BINARY" ] || { echo "install.sh: no executable at $BINARY (run: bun run build)" >&2; exit 1; }
UNIT_SRC="$(dirname "$0")/lora-worker.service"

changed=0
place() { # place SRC DEST MODE: copy only when the content differs
  if [ -f "$2" ] && cmp -s "$1" "$2"; then return; fi
  install -D -m "$3" "$1" "$2.new" && mv -f "$2.new" "$2"
  echo "installed $2"; changed=1
}

place "$BINARY" "$ROOT/opt/lora-worker/lora-worker" 0755
place "$UNIT_SRC" "$ROOT/etc/systemd/system/lora-worker.service" 0644
if [ ! -e "$ROOT/etc/lora-worker/config.toml" ]; then
  install -d -m 0755 "$ROOT/etc/lora-worker"
  printf '# lora-worker configuration; every key and its default is in the README.\n' > "$ROOT/etc/lora-worker/config.toml"
  echo "created $ROOT/etc/lora-worker/config.toml"; changed=1
fi

if [ -z "$ROOT" ] && [ "$changed" = 1 ]; then
  systemctl daemon-reload
  systemctl enable lora-worker.service
  systemctl restart lora-worker.service
fi
[ "$changed" = 1 ] || echo "nothing to change"
