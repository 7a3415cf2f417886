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
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 <{tag} | key | slot> <from host:port> <to host:port>" >&2
  exit 2
fi
what=$1 from=$2 to=$3 batch=${BATCH:-500}

cli() {
  local hp=$1
  shift
  redis-cli ${REDIS_USER:+--user "$REDIS_USER"} -h "${hp%:*}" -p "${hp##*:}" "$@"
}
# a reply that is an error (redis-cli exits 0 on one): stop there
must() {
  local out
  out=$(cli "$@")
  if [[ $out == ERR* || $out == NOAUTH* || $out == NOPERM* ]]; then
    echo "move-slot: $2 $3 ${4:-}: $out" >&2
    return 1
  fi
  printf '%s' "$out"
}

if [[ $what =~ ^[0-9]+$ ]]; then slot=$what; else slot=$(must "$from" CLUSTER KEYSLOT "$what"); fi
from_id=$(must "$from" CLUSTER MYID)
to_id=$(must "$to" CLUSTER MYID)
auth=()
if [ -n "${REDISCLI_AUTH:-}" ]; then
  if [ -n "${REDIS_USER:-}" ]; then auth=(AUTH2 "$REDIS_USER" "$REDISCLI_AUTH"); else auth=(AUTH "$REDISCLI_AUTH"); fi
fi

# the new master first, so that the old one's ASK redirections find it importing; a refusal of
# the old one (it does not own the slot) puts the new one back as it was
must "$to" CLUSTER SETSLOT "$slot" IMPORTING "$from_id" >/dev/null
if ! must "$from" CLUSTER SETSLOT "$slot" MIGRATING "$to_id" >/dev/null; then
  cli "$to" CLUSTER SETSLOT "$slot" STABLE >/dev/null
  exit 1
fi

moved=0
while :; do
  list=$(must "$from" CLUSTER GETKEYSINSLOT "$slot" "$batch")
  [ -z "$list" ] && break
  mapfile -t keys <<<"$list"
  must "$from" MIGRATE "${to%:*}" "${to##*:}" "" 0 5000 "${auth[@]}" KEYS "${keys[@]}" >/dev/null
  moved=$((moved + ${#keys[@]}))
done
left=$(must "$from" CLUSTER COUNTKEYSINSLOT "$slot")
if [ "$left" != 0 ]; then
  echo "move-slot: $left keys of slot $slot still on $from; the slot stays migrating: run again" >&2
  exit 1
fi

# the new owner, the old one, then every other master (as redis-cli --cluster does)
masters=$(cli "$from" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "@"); print a[1] }')
must "$to" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
must "$from" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
for m in $masters; do
  [ "$m" = "$to" ] || [ "$m" = "$from" ] && continue
  must "$m" CLUSTER SETSLOT "$slot" NODE "$to_id" >/dev/null
done
echo "slot $slot: $moved keys moved from $from to $to"
