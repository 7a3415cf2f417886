#!/usr/bin/env bash
# Moves one hash slot of a Redis Cluster to another master, keys and all, while callgate's calls
# flow (docs/redis.md, "Moving a busy account or carrier to another master"). It is Redis
# Cluster's own procedure: CLUSTER SETSLOT IMPORTING on the new master, MIGRATING on the old
# one, MIGRATE of the slot's keys in batches, then CLUSTER SETSLOT NODE on every master.
#
#   move-slot.sh <{tag} | key | slot> <from host:port> <to host:port>
#
#   {tag}   a callgate tag in braces: '{a:acme}' (an account), '{p:sbc-1}' (a peer),
#           '{out:carrier-1}' (a carrier); or any key of the slot; or the slot's number
#   BATCH   keys per MIGRATE (default 500: each blocks the old master for a few ms)
#   REDISCLI_AUTH, REDIS_USER   the password (and ACL user) of redis-cli and of MIGRATE
#
# Call records (`}:call:in:<id>`, `}:call:out:<id>`) move last, after every log, holds set and
# tombstone: a release or refresh that finds its record on the old master and its holds already
# moved then fails before it writes anything, and is sent again. MIGRATE replaces a key the new
# master has already, so a run that stopped midway can be run again to finish: with records
# last, the only such key is a release's tombstone written again there, and the old copy it
# gets back expires at most the move's length sooner (tombstones last a minute). Plain TCP only (no TLS options are
# passed); the slot's key names are read in one reply.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 <{tag} | key | slot> <from host:port> <to host:port>" >&2
  exit 2
fi
what=$1 from=$2 to=$3 batch=${BATCH:-500}
if ! [[ $batch =~ ^[1-9][0-9]*$ ]]; then
  echo "move-slot: BATCH must be a positive integer, got '$batch'" >&2
  exit 2
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT

cli() {
  local hp=$1
  shift
  redis-cli ${REDIS_USER:+--user "$REDIS_USER"} -h "${hp%:*}" -p "${hp##*:}" "$@"
}
# Redis' error replies (redis-cli exits 0 on one, and prints it on standard output)
ERRORS='^(ERR|WRONGTYPE|MOVED|ASK|TRYAGAIN|CLUSTERDOWN|CROSSSLOT|LOADING|BUSY|BUSYKEY|NOAUTH|WRONGPASS|NOPERM|IOERR|READONLY|MASTERDOWN|NOSCRIPT|OOM)( |$)'
# one command's reply; a failed connection or an error reply stops the script with it said
must() {
  local out
  if ! out=$(cli "$@" 2>"$err"); then
    echo "move-slot: $1: $(cat "$err")${out:-redis-cli failed}" >&2
    return 1
  fi
  if [[ $3 != GETKEYSINSLOT && $out =~ $ERRORS ]]; then
    echo "move-slot: $1: $2 $3 ${4:-}: $out" >&2
    return 1
  fi
  printf '%s' "$out"
}
# a MIGRATE argument in double quotes (redis-cli's own quoting, on standard input)
quote() {
  local s=${1//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}

if [[ $what =~ ^[0-9]+$ ]]; then slot=$what; else slot=$(must "$from" CLUSTER KEYSLOT "$what"); fi
from_id=$(must "$from" CLUSTER MYID)
to_id=$(must "$to" CLUSTER MYID)
# the new master's address as the old master knows it: the one MIGRATE connects to from there
to_addr=$(must "$from" CLUSTER NODES | awk -v id="$to_id" '$1 == id { split($2, a, "@"); print a[1] }')
if [ -z "$to_addr" ]; then
  echo "move-slot: $from does not know $to ($to_id) as a node of its Cluster" >&2
  exit 1
fi

# the new master first, so that the old one's ASK redirections find it importing; a refusal of
# the old one (it does not own the slot) puts the new one back as it was
must "$to" CLUSTER SETSLOT "$slot" IMPORTING "$from_id" >/dev/null
if ! must "$from" CLUSTER SETSLOT "$slot" MIGRATING "$to_id" >/dev/null; then
  cli "$to" CLUSTER SETSLOT "$slot" STABLE >/dev/null
  exit 1
fi
step=keys
stopped() {
  if [ "$step" = keys ]; then
    echo "move-slot: stopped with slot $slot migrating from $from to $to: run the same command again to finish" >&2
  else
    echo "move-slot: stopped while giving slot $slot to $to_id: run CLUSTER SETSLOT $slot NODE $to_id on every master" >&2
  fi
}
trap stopped ERR
trap 'stopped; exit 130' INT
trap 'stopped; exit 143' TERM

# MIGRATE through standard input, so that no password shows in the process list
migrate() {
  local line="MIGRATE ${to_addr%:*} ${to_addr##*:} \"\" 0 5000 REPLACE"
  if [ -n "${REDISCLI_AUTH:-}" ]; then
    if [ -n "${REDIS_USER:-}" ]; then
      line+=" AUTH2 $(quote "$REDIS_USER") $(quote "$REDISCLI_AUTH")"
    else
      line+=" AUTH $(quote "$REDISCLI_AUTH")"
    fi
  fi
  line+=" KEYS"
  local k
  for k in "$@"; do
    k=${k//\\/\\\\}
    line+=" \"${k//\"/\\\"}\"" # quote()'s, without a subshell per key
  done
  local out
  out=$(printf '%s\n' "$line" | cli "$from" 2>"$err") || {
    echo "move-slot: $from: MIGRATE: $(cat "$err")${out:-redis-cli failed}" >&2
    return 1
  }
  if [[ $out != OK && $out != NOKEY ]]; then
    echo "move-slot: $from: MIGRATE: $out" >&2
    return 1
  fi
}

moved=0
before=-1
while :; do
  count=$(must "$from" CLUSTER COUNTKEYSINSLOT "$slot")
  [ "$count" = 0 ] && break
  # a pass that left as many keys as it found (names MIGRATE did not find) would loop forever
  if [ "$count" = "$before" ]; then
    echo "move-slot: $count keys of slot $slot stay on $from: a pass over them moved none" >&2
    false
  fi
  before=$count
  list=$(must "$from" CLUSTER GETKEYSINSLOT "$slot" "$count")
  # logs, holds, tombstones and the rest first, the call records last
  record='\}:call:(in|out):[^:]*$'
  mapfile -t keys < <(grep -Ev "$record" <<<"$list" || true)
  mapfile -t records < <(grep -E "$record" <<<"$list" || true)
  for group in keys records; do
    declare -n g=$group
    for ((i = 0; i < ${#g[@]}; i += batch)); do
      chunk=("${g[@]:i:batch}")
      migrate "${chunk[@]}"
      moved=$((moved + ${#chunk[@]}))
    done
    unset -n g
  done
done

# the new owner, the old one, then every other master (as redis-cli --cluster does)
step=node
masters=$(must "$from" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ && $3 !~ /myself/ { split($2, a, "@"); print a[1] }')
must "$to" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
must "$from" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
for m in $masters; do
  [ "$m" = "$to_addr" ] && continue
  must "$m" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
done
trap - ERR INT TERM
echo "slot $slot: $moved keys moved from $from to $to"
