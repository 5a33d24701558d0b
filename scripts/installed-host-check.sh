#!/usr/bin/env bash
# Runs the suite (default: `bun run test`; or `bun test` with the arguments given) as on a host where
# lora-worker is installed, without changing this host: in a private mount namespace, /etc is an overlay holding
# /etc/lora-worker/ (a config whose trainer paths do not exist, a token file and a read-token file) and an
# `llmuser` account, and HOME is a folder with a ~/.config/lora-worker that would mislead a test that read it.
# As root: `bash scripts/installed-host-check.sh [bun test arguments]`. A hermetic suite passes here as it does
# on a bare host.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then set -- run test; else set -- test "$@"; fi
scratch=$(mktemp -d /tmp/lora-worker-installed-host-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/upper/lora-worker" "$scratch/work" "$scratch/home/.config/lora-worker"
cat > "$scratch/upper/lora-worker/config.toml" <<'TOML'
listen = "0.0.0.0:8203"
state_dir = "/var/lib/lora-worker-not-here"
handoff_root = "/worktank/not-here"
model_roots = ["/worktank/models-not-here"]
[trainer]
accelerate = "/opt/not-here/.venv/bin/accelerate"
sd_scripts_dir = "/opt/not-here/sd-scripts"
TOML
echo "host-token-that-no-test-knows-0123456789" > "$scratch/upper/lora-worker/token"
echo "host-read-token-that-no-test-knows-012345" > "$scratch/upper/lora-worker/read-token"
cp "$scratch/upper/lora-worker/config.toml" "$scratch/home/.config/lora-worker/config.toml"
cp /etc/passwd /etc/group "$scratch/upper/"
echo "llmuser:x:1001:1001:lora-worker host account:/home/llmuser:/usr/sbin/nologin" >> "$scratch/upper/passwd"
echo "llmuser:x:1001:" >> "$scratch/upper/group"
echo "arbotrain:x:1002:llmuser" >> "$scratch/upper/group"
exec unshare --mount --propagation private bash -c '
  set -euo pipefail
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$0/upper,workdir=$0/work" /etc
  test -f /etc/lora-worker/config.toml && getent passwd llmuser >/dev/null
  HOME="$0/home" bun "$@"
' "$scratch" "$@"
