#!/usr/bin/env bash
# Installs lora-worker on a GPU host (docs/operating.md). Idempotent: a second run changes nothing and says so.
# It lays out what the worker owns: the binary, the unit, the config, the API token, the handoff root, the state
# dir, and the model root when it is missing (empty: the SDXL base checkpoint is the operator's to place there).
# The trainer's environment and the CLIP tokenizers are the operator's to bring too; doctor names each with the
# command that brings it. Needs from the host: bash, coreutils, sed, grep, cmp (diffutils) and getent; on a real
# host also groupadd, useradd, usermod and systemctl, with systemd running (where it is not, install.sh stops before
# it changes anything). No curl: the health gate speaks HTTP over bash's /dev/tcp.
#
#   install.sh [--binary PATH]      install or re-install; run as root from the repository (or a release dir)
#   install.sh --upgrade PATH       scp-and-restart: atomic swap of the binary (the old one kept as .prev),
#                                   restart, health gate, automatic rollback to .prev if the gate fails
#
#   --dry-run            print what would change, change nothing
#   --root DIR           install into DIR, a scratch tree: accounts are never created or changed, owners are
#                        applied only where the names exist on this machine, nothing is started unless
#                        --systemctl names a service manager to use, and a new config names the paths under DIR
#   --systemctl CMD      the systemctl to run (default: systemctl); tests pass a stand-in that starts the
#   --journalctl CMD     binary from --root; --journalctl likewise (default: journalctl)
#   --user NAME          service user, written into the unit's User= (default llmuser)
#   --group NAME         handoff group and the unit's Group= (default arbotrain)
#   --arbo-uid N         the arbo container's uid, added to the group if a user has it here (default 1000)
#   --health-url URL     what the health gate polls (default: from listen in config.toml)
#   --health-timeout S   how long the worker gets to answer GET /healthz (default 60)
set -euo pipefail
umask 022

readonly UNIT_NAME=lora-worker.service
HERE=$(cd "$(dirname "$0")" && pwd)
SELF="$HERE/$(basename "$0")"
readonly HERE SELF

ROOT=""
DRY_RUN=0
UPGRADE=""
BINARY="$HERE/dist/lora-worker"
SVC_USER=llmuser
SVC_GROUP=arbotrain
ARBO_UID=1000
HEALTH_URL=""
HEALTH_TIMEOUT=60
SYSTEMCTL=""
JOURNALCTL=journalctl

usage() {
  sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT=${2:?--root needs a directory}; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --upgrade) UPGRADE=${2:?--upgrade needs the new binary}; shift 2 ;;
    --binary) BINARY=${2:?--binary needs a path}; shift 2 ;;
    --user) SVC_USER=${2:?}; shift 2 ;;
    --group) SVC_GROUP=${2:?}; shift 2 ;;
    --arbo-uid) ARBO_UID=${2:?}; shift 2 ;;
    --health-url) HEALTH_URL=${2:?}; shift 2 ;;
    --health-timeout) HEALTH_TIMEOUT=${2:?}; shift 2 ;;
    --systemctl) SYSTEMCTL=${2:?}; shift 2 ;;
    --journalctl) JOURNALCTL=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "install.sh: unknown argument $1" >&2; usage ;;
  esac
done

die() { echo "install.sh: $*" >&2; exit 1; }

# Said up front, before anything changes: every command this script runs, and which package brings it.
require_commands() {
  local missing=() cmd
  local needed=(basename dirname install mkdir mktemp mv rm stat chmod chown cmp cut grep head id od sed sleep timeout tr getent)
  if [[ -z $ROOT ]]; then needed+=(groupadd useradd usermod); fi
  if ((MANAGE_SERVICE)); then needed+=("$SYSTEMCTL"); fi
  for cmd in "${needed[@]}"; do command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd"); done
  ((${#missing[@]} == 0)) || die "this host lacks ${missing[*]}: install.sh needs coreutils, sed, grep, diffutils (cmp), libc-bin (getent), passwd (groupadd, useradd, usermod) and systemd; nothing changed"
}

[[ $SVC_USER =~ ^[a-z_][a-z0-9_-]*$ ]] || die "--user $SVC_USER is not a user name"
[[ $SVC_GROUP =~ ^[a-z_][a-z0-9_-]*$ ]] || die "--group $SVC_GROUP is not a group name"
[[ $ARBO_UID =~ ^[0-9]+$ ]] || die "--arbo-uid $ARBO_UID is not a number"
[[ $HEALTH_TIMEOUT =~ ^[0-9]+$ ]] || die "--health-timeout $HEALTH_TIMEOUT is not a number of seconds"
if [[ -n $ROOT ]]; then
  mkdir -p "$ROOT" 2>/dev/null || [[ -d $ROOT ]] || die "--root $ROOT is not a directory"
  ROOT=$(cd "$ROOT" && pwd)
fi

readonly OPT="$ROOT/opt/lora-worker"
readonly BIN="$OPT/lora-worker"
readonly ETC="$ROOT/etc/lora-worker"
readonly CONFIG="$ETC/config.toml"
readonly TOKEN="$ETC/token"
readonly UNIT="$ROOT/etc/systemd/system/$UNIT_NAME"
readonly STATE="$ROOT/var/lib/lora-worker"
readonly HANDOFF="$ROOT/worktank/arbo/train"
readonly MODELS="$ROOT/worktank/models"

# Without --root this is the real host; with it, the service is managed only through an explicit --systemctl.
MANAGE_SERVICE=0
if [[ -z $ROOT || -n $SYSTEMCTL ]]; then MANAGE_SERVICE=1; fi
SYSTEMCTL=${SYSTEMCTL:-systemctl}
require_commands

CHANGES=0
UNOWNED=()
declare -A PLANNED_DIRS=() # directories a --dry-run has already reported it would create

# change DESCRIPTION COMMAND...: one host change, run and reported, or with --dry-run only reported.
change() {
  CHANGES=$((CHANGES + 1))
  if ((DRY_RUN)); then
    echo "would: $1"
    return 0
  fi
  echo "change: $1"
  shift
  "$@"
}

note() { echo "note: $*"; }

declare -A IDS=() # getent answers, looked up once per name
id_of() { # id_of passwd|group NAME: sets ID to the numeric id, empty when the name does not exist
  local key="$1:$2" entry
  if [[ -z ${IDS[$key]+set} ]]; then
    entry=$(getent "$1" "$2" || true)
    IDS[$key]=$(echo "$entry" | cut -d: -f3)
  fi
  ID=${IDS[$key]}
}

# atomic_copy SRC DEST MODE: readers see the old file or the new one, never a partial one.
atomic_copy() {
  install -m "$3" "$1" "$2.new.$$"
  mv -f "$2.new.$$" "$2"
}

# ensure_attrs PATH MODE USER GROUP: owner first, since chown may clear a setgid bit; the extra leading
# zero makes chmod clear a stray setgid bit on a directory too.
ensure_attrs() {
  local path=$1 mode=$2 user=$3 group=$4 uid gid want have
  [[ -e $path ]] || return 0
  have=$(stat -c '%u:%g %a' "$path")
  id_of passwd "$user" && uid=$ID
  id_of group "$group" && gid=$ID
  if [[ -z $uid || -z $gid ]]; then
    if [[ -n $ROOT ]]; then
      UNOWNED+=("$path ($user:$group)")
    else
      ((DRY_RUN)) || die "cannot chown $path: $user or $group does not exist"
      change "chown $user:$group $path" true
    fi
  elif ((EUID != 0)); then
    UNOWNED+=("$path ($user:$group)")
  elif [[ ${have% *} != "$uid:$gid" ]]; then
    change "chown $user:$group $path" chown "$user:$group" "$path"
  fi
  printf -v want '%o' "$((8#$mode))"
  [[ ${have#* } == "$want" ]] || change "chmod $mode $path" chmod "00$want" "$path"
}

ensure_dir() { # ensure_dir PATH MODE USER GROUP
  if [[ ! -d $1 && -z ${PLANNED_DIRS[$1]:-} ]]; then
    ensure_parent "${1%/*}"
    PLANNED_DIRS[$1]=1
    change "create directory $1 (mode $2)" install -d -m "$2" "$1"
  fi
  ensure_attrs "$1" "$2" "$3" "$4"
}

ensure_parent() { # ensure_parent DIR: created when missing, an existing one is the operator's and left alone
  [[ -d $1 || -n ${PLANNED_DIRS[$1]:-} ]] && return 0
  PLANNED_DIRS[$1]=1
  change "create directory $1" mkdir -p "$1"
}

ensure_file() { # ensure_file SRC DEST MODE: the content of SRC, owned by root
  if [[ ! -f $2 ]] || ! cmp -s "$1" "$2"; then
    change "install $2" atomic_copy "$1" "$2" "$3"
  fi
  ensure_attrs "$2" "$3" root root
}

ensure_accounts() {
  if [[ -n $ROOT ]]; then
    note "--root: the group $SVC_GROUP, the user $SVC_USER and their memberships are not created or changed"
    return
  fi
  getent group "$SVC_GROUP" >/dev/null || change "create group $SVC_GROUP" groupadd --system "$SVC_GROUP"
  if ! getent passwd "$SVC_USER" >/dev/null; then
    change "create system user $SVC_USER (it must be able to run the training venv: doctor checks)" \
      useradd --system --gid "$SVC_GROUP" --home-dir /var/lib/lora-worker --no-create-home --shell /usr/sbin/nologin "$SVC_USER"
  fi
  ensure_member "$SVC_USER"
  local arbo_user
  arbo_user=$(getent passwd "$ARBO_UID" | cut -d: -f1 || true)
  if [[ -n $arbo_user ]]; then ensure_member "$arbo_user"; fi
  # A container's groups come from compose, not from the host's /etc/group: arbo needs the gid itself.
  id_of group "$SVC_GROUP"
  note "arbo's compose needs group_add: [\"${ID:-<the gid $SVC_GROUP gets>}\"] (the gid of $SVC_GROUP) for its uid $ARBO_UID to use $HANDOFF"
}

ensure_member() { # ensure_member USER: USER is in the service group
  if id -nG "$1" 2>/dev/null | tr ' ' '\n' | grep -qx "$SVC_GROUP"; then return; fi
  change "add $1 to group $SVC_GROUP" usermod -a -G "$SVC_GROUP" "$1"
}

create_token() { # 32 random bytes as hex, one token per line; never readable by others, even for a moment
  (
    umask 077
    head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$TOKEN.new.$$"
    echo >>"$TOKEN.new.$$"
    chmod 0640 "$TOKEN.new.$$"
  )
  mv -f "$TOKEN.new.$$" "$TOKEN"
}

write_default_config() { # every key commented out at its default, under its meaning: the binary's own list
  "$BINARY" config template >"$CONFIG.new.$$" || die "$BINARY config template failed; nothing written to $CONFIG"
  [[ -z $ROOT ]] || root_paths "$CONFIG.new.$$"
  chmod 0644 "$CONFIG.new.$$"
  mv -f "$CONFIG.new.$$" "$CONFIG"
}

# root_paths FILE: under --root the paths install.sh lays out are set to their places in the scratch tree, so
# the worker and doctor there look at what was installed, never at this machine's own /var/lib or /worktank.
root_paths() {
  local line replaced=0
  local -A rooted=(
    ['# state_dir = "/var/lib/lora-worker"']="state_dir = \"$STATE\""
    ['# handoff_root = "/worktank/arbo/train"']="handoff_root = \"$HANDOFF\""
    ['# model_roots = ["/worktank/models"]']="model_roots = [\"$MODELS\"]"
    ['# token_file = "/etc/lora-worker/token"']="token_file = \"$TOKEN\""
    ['# read_token_file = "/etc/lora-worker/read-token"']="read_token_file = \"$ETC/read-token\""
  )
  while IFS= read -r line; do
    if [[ -n $line && -n ${rooted[$line]+set} ]]; then
      printf '%s  # --root: in place of %s\n' "${rooted[$line]}" "${line#*= }"
      replaced=$((replaced + 1))
    else
      printf '%s\n' "$line"
    fi
  done <"$1" >"$1.rooted"
  ((replaced == ${#rooted[@]})) || die "the config template lacks a default path line; nothing written to $CONFIG"
  mv -f "$1.rooted" "$1"
}

render_unit() { # the repository's unit with this host's user and group
  sed -e "s/^User=.*/User=$SVC_USER/" -e "s/^Group=.*/Group=$SVC_GROUP/" "$HERE/lora-worker.service" >"$1"
}

# replace_binary NEW: the new binary is staged beside the old one first (so NEW may even be $BIN.prev),
# the old one is kept as .prev, and rename(2) makes the swap atomic: a restart at any moment finds a binary.
replace_binary() {
  if [[ ! -f $BIN ]]; then
    change "install $BIN ($NEW_VERSION)" atomic_copy "$1" "$BIN" 0755
    return
  fi
  ROLLBACK=1
  change "install $BIN ($NEW_VERSION), keeping the current one as $BIN.prev" swap_binary "$1"
}

swap_binary() {
  install -m 0755 "$1" "$BIN.new.$$"
  atomic_copy "$BIN" "$BIN.prev" 0755
  mv -f "$BIN.new.$$" "$BIN"
}

health_url() {
  local listen host
  [[ -z $HEALTH_URL ]] || { echo "$HEALTH_URL"; return; }
  listen=$(sed -n 's/^[[:space:]]*listen[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$CONFIG" 2>/dev/null | head -n 1)
  listen=${listen:-0.0.0.0:8203}
  host=${listen%:*}
  case $host in 0.0.0.0) host=127.0.0.1 ;; "[::]") host="[::1]" ;; esac
  echo "http://$host:${listen##*:}/healthz"
}

# get_ok URL: one GET over bash's /dev/tcp, at most 2 s; true when it answers 200 with {"status":"ok",...}.
get_ok() {
  [[ $1 =~ ^http://(\[([^]]+)\]|([^/:]+)):([0-9]+)(/.*)?$ ]] || return 1
  local host=${BASH_REMATCH[2]:-${BASH_REMATCH[3]}} port=${BASH_REMATCH[4]} path=${BASH_REMATCH[5]:-/}
  local answer
  # shellcheck disable=SC2016 # expanded by the inner bash, from its arguments
  answer=$(timeout 2 "$BASH" -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" "$3" "$1" >&3
    cat <&3' _ "$host" "$port" "$path" 2>/dev/null) || return 1
  [[ $answer == "HTTP/1."[01]" 200 "* && $answer == *'"status":"ok"'* ]]
}

healthy() { # healthy DEADLINE_S: GET /healthz answers {"status":"ok",...} before the deadline
  local url deadline=$((SECONDS + $1))
  url=$(health_url)
  while ((SECONDS < deadline)); do
    get_ok "$url" && return 0
    sleep 0.2
  done
  return 1
}

show_journal() {
  echo "--- last lines of the journal ($JOURNALCTL -u $UNIT_NAME) ---" >&2
  "$JOURNALCTL" -u "$UNIT_NAME" -n 40 --no-pager >&2 || true
  echo "---" >&2
}

# health_gate: the worker answers, or the previous binary is put back (when there is one) and we fail loudly.
health_gate() {
  ((DRY_RUN)) && return 0
  local url
  url=$(health_url)
  if healthy "$HEALTH_TIMEOUT"; then
    echo "ok: $url answers"
    return 0
  fi
  echo "install.sh: FAILED: $url did not answer within ${HEALTH_TIMEOUT} s" >&2
  show_journal
  ((ROLLBACK)) || exit 1
  echo "install.sh: rolling back to $BIN.prev" >&2
  atomic_copy "$BIN.prev" "$BIN" 0755
  "$SYSTEMCTL" restart "$UNIT_NAME"
  if healthy "$HEALTH_TIMEOUT"; then
    echo "install.sh: rolled back: the previous binary is running again and $url answers" >&2
  else
    echo "install.sh: the previous binary does not answer either" >&2
    show_journal
  fi
  exit 1
}

# require_systemd WOULD: the service steps need systemd running as PID 1, so where it is not (a container, a
# chroot, a box booted without it: systemctl answers "offline") the run stops before changing anything; WOULD
# says what it would have done. A dry run notes it and goes on listing, since it changes nothing anyway.
require_systemd() {
  ((MANAGE_SERVICE)) || return 0
  local state why
  state=$("$SYSTEMCTL" is-system-running 2>/dev/null) || true
  case $state in initializing | starting | running | degraded | maintenance) return 0 ;; esac
  why="systemd is not running here ($SYSTEMCTL is-system-running answers \"${state:-nothing}\": a container, a chroot or a box booted without it)"
  if ((DRY_RUN)); then
    note "$why: a real run stops here and changes nothing; what it would change where systemd runs:"
    return 0
  fi
  die "$why; install.sh needs it to start and health-check $UNIT_NAME, and before that would have $1; nothing changed (run it on a host booted with systemd; --dry-run lists each change)"
}

run_doctor() {
  local args=(doctor --config "$CONFIG" --user "$SVC_USER" --group "$SVC_GROUP")
  [[ -z $ROOT ]] || args+=(--dev-dir "$ROOT/dev")
  if ((DRY_RUN)); then
    echo "would: run $BIN ${args[*]}"
    return
  fi
  echo "doctor:"
  if ! "$BIN" "${args[@]}" | sed 's/^/  /'; then
    die "doctor found problems (FAIL lines above); fix them and run install.sh again. The unit is installed but was not enabled or restarted."
  fi
}

summary() {
  if ((${#UNOWNED[@]} > 0)); then
    note "owners not applied (the names do not exist on this machine, or not running as root): ${UNOWNED[*]}"
  fi
  if ((CHANGES == 0)); then
    echo "nothing to change: the host already matches"
  elif ((DRY_RUN)); then
    echo "$CHANGES changes would be made (dry run: nothing changed)"
  else
    echo "$CHANGES changes made"
  fi
}

preflight() { # preflight BINARY
  [[ -f $1 && -x $1 ]] || die "no executable at $1 (build it: bun run build)"
  NEW_VERSION=$("$1" --version 2>/dev/null) || die "$1 does not run (--version failed); nothing changed"
  if [[ -z $ROOT ]] && ((!DRY_RUN && EUID != 0)); then die "run as root (or pass --dry-run or --root DIR)"; fi
}

install_host() {
  preflight "$BINARY"
  [[ -f $HERE/lora-worker.service ]] || die "no $HERE/lora-worker.service next to install.sh"
  require_systemd "laid out the accounts, the binary, the config, the token, the directories and the unit, run doctor and enabled the unit"
  local before unit_changed=0
  RENDER_DIR=$(mktemp -d)
  trap 'rm -rf "$RENDER_DIR"' EXIT
  render_unit "$RENDER_DIR/$UNIT_NAME"

  ensure_accounts
  ensure_dir "$OPT" 0755 root root
  if [[ ! -f $BIN ]] || ! cmp -s "$BINARY" "$BIN"; then replace_binary "$BINARY"; fi
  ensure_attrs "$BIN" 0755 root root
  [[ $SELF == "$OPT/install.sh" ]] || ensure_file "$SELF" "$OPT/install.sh" 0755
  ensure_dir "$ETC" 0755 root root
  if [[ ! -e $CONFIG ]]; then change "write $CONFIG (all defaults; edit it, install.sh never overwrites it)" write_default_config; fi
  if [[ ! -e $TOKEN ]]; then change "create the API token $TOKEN (mode 0640)" create_token; fi
  ensure_attrs "$TOKEN" 0640 root "$SVC_GROUP"
  ensure_parent "${HANDOFF%/*}"
  ensure_dir "$HANDOFF" 2770 root "$SVC_GROUP"
  ensure_dir "$STATE" 0700 "$SVC_USER" "$SVC_GROUP"
  # model_roots' default: made when missing, for the operator to place the SDXL base checkpoint in; an existing
  # one is the operator's (perhaps shared with other services) and keeps its owner and mode.
  if [[ ! -d $MODELS ]]; then
    ensure_parent "${MODELS%/*}"
    change "create directory $MODELS (mode 0755: place the SDXL base checkpoint here)" install -d -m 0755 "$MODELS"
  fi
  # trainer.tokenizer_dir's default: `lora-worker tokenizers import` fills it (docs/operating.md, "Prove a deployment").
  ensure_dir "$STATE/tokenizers" 0755 "$SVC_USER" "$SVC_GROUP"
  before=$CHANGES
  ensure_parent "${UNIT%/*}"
  ensure_file "$RENDER_DIR/$UNIT_NAME" "$UNIT" 0644
  ((CHANGES == before)) || unit_changed=1

  if ((!MANAGE_SERVICE)); then
    note "--root without --systemctl: doctor, enable, restart and the health gate are skipped"
    summary
    return
  fi
  local host_changes=$CHANGES
  ((!unit_changed)) || change "reload systemd units" "$SYSTEMCTL" daemon-reload
  run_doctor
  "$SYSTEMCTL" is-enabled --quiet "$UNIT_NAME" 2>/dev/null || change "enable $UNIT_NAME" "$SYSTEMCTL" enable "$UNIT_NAME"
  if ((host_changes > 0)) || ! "$SYSTEMCTL" is-active --quiet "$UNIT_NAME" 2>/dev/null; then
    change "restart $UNIT_NAME" "$SYSTEMCTL" restart "$UNIT_NAME"
  fi
  health_gate
  summary
}

upgrade() {
  preflight "$UPGRADE"
  [[ -f $BIN ]] || die "$BIN is not installed: run install.sh first"
  if cmp -s "$UPGRADE" "$BIN"; then
    echo "nothing to change: $UPGRADE is already the installed binary"
    return
  fi
  require_systemd "swapped $BIN for $UPGRADE, keeping the current one as $BIN.prev to roll back to"
  replace_binary "$UPGRADE"
  if ((MANAGE_SERVICE)); then
    change "restart $UNIT_NAME" "$SYSTEMCTL" restart "$UNIT_NAME"
    health_gate
  else
    note "--root without --systemctl: restart and the health gate are skipped"
  fi
  summary
}

ROLLBACK=0
if [[ -n $UPGRADE ]]; then upgrade; else install_host; fi
