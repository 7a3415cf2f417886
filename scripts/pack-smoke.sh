#!/usr/bin/env bash
# The package as a user gets it: `npm pack` (prepack builds it), install the tarball with its
# dependencies from the npm registry in a scratch directory, then run the command and the library
# from there, away from the checkout (no src/, no devDependencies, no fixtures).
#
#   scripts/pack-smoke.sh        (.ci/run calls it; needs network access to the npm registry)
#
# Checks: the tarball's contents; `callgate --help` and `--version`; a replay of a small trace with
# its configuration; `import('callgate')`: the exact set of exported names (test/public-api.json),
# a CallGate on the memory store admitting a call, a RedisStore deciding on a real redis-server
# (the Lua scripts found in the installed package; ioredis installed as a peer); deep imports
# refused by the exports map; a TypeScript program using the types users need; and the SIP edge
# example, copied out of the repository, type-checked against the installed package.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/callgate-pack-XXXXXX")"
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
step() { printf '\n== pack-smoke: %s\n' "$*"; }
fail() { printf 'pack-smoke FAILED: %s\n' "$*" >&2; exit 1; }

step "on Node $(node --version), npm $(npm --version)"
step "npm pack (prepack builds dist/)"
cd "$repo"
tgz="$(npm pack --silent --pack-destination "$scratch" | tail -n 1)"
[ -f "$scratch/$tgz" ] || fail "npm pack produced no tarball"
contents="$(tar -tzf "$scratch/$tgz")"
for f in package/LICENSE package/README.md package/bin/callgate.js package/lua/admit.lua package/lua/admit-lone.lua \
  package/lua/includes/common.lua package/lua/includes/log.lua package/assets/report/app.js package/assets/report/style.css package/dist/src/index.js package/dist/src/index.d.ts package/dist/src/cli/main.js \
  package/schema/limits.schema.json; do
  grep -qx "$f" <<<"$contents" || fail "$f missing from $tgz"
done
if grep -Eq '^package/(src|test|fixtures|bench|scripts|\.ci)/' <<<"$contents"; then
  fail "the tarball holds files users do not need: $(grep -E '^package/(src|test|fixtures|bench|scripts|\.ci)/' <<<"$contents" | head -3)"
fi

step "npm install ./$tgz in $scratch"
cd "$scratch"
printf '{ "name": "callgate-smoke", "private": true, "type": "module" }\n' >package.json
# warnings shown: an EBADENGINE (a dependency that does not support this Node) fails the check
npm install --no-audit --no-fund --loglevel=warn "./$tgz" 2>&1 | tee "$scratch/install.log"
if grep -q EBADENGINE "$scratch/install.log"; then
  # expected below the supported versions (engines: >=22); .ci/run also runs this on Node 22 and 24
  if [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ]; then
    fail "npm install warned EBADENGINE on Node $(node --version): $(grep EBADENGINE "$scratch/install.log" | head -3)"
  fi
  echo "note: Node $(node --version) is not a supported version (engines: >=22): EBADENGINE expected"
fi
[ -d node_modules/ioredis ] || fail "ioredis (a peer dependency) was not installed"
[ ! -e node_modules/callgate/node_modules/ioredis ] || fail "callgate has its own ioredis: the application's must be the one used"
[ ! -e node_modules/callgate/src ] || fail "src/ shipped"
bin=node_modules/.bin/callgate

step "callgate --help / --version"
help="$("$bin" --help)"
for command in replay serve inspect merge-traces; do
  grep -Eq "^  $command " <<<"$help" || fail "--help does not list $command"
done
want_version="$(node -p "require('$repo/package.json').version")"
[ "$("$bin" --version)" = "$want_version" ] || fail "--version is not $want_version"

step "callgate replay (boundary fixture, memory store)"
"$bin" replay --config "$repo/fixtures/boundary.config.json" --trace "$repo/fixtures/boundary.trace.csv" \
  --json --decisions "$scratch/decisions.jsonl" >"$scratch/report.json"
node -e '
  const report = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const lines = require("fs").readFileSync(process.argv[2], "utf8").trim().split("\n");
  if (report.all_limits_held !== true) throw new Error("all_limits_held is not true");
  if (lines.length < 10) throw new Error(`only ${lines.length} decisions`);
  console.log(`${lines.length} decisions, every limit held`);
' "$scratch/report.json" "$scratch/decisions.jsonl"

step "callgate replay --html (the page's script and uPlot found in the installed package)"
"$bin" replay --config "$repo/fixtures/boundary.config.json" --trace "$repo/fixtures/boundary.trace.csv" \
  --html "$scratch/report.html" >/dev/null
grep -q 'uPlot' "$scratch/report.html" || fail "the HTML report has no uPlot"
grep -q 'script id="data"' "$scratch/report.html" || fail "the HTML report has no data"

step "import('callgate'): names, a memory-store CallGate, refused deep imports"
node --input-type=module -e '
  const api = await import("callgate");
  const want = JSON.parse(process.argv[1]).runtime.slice().sort();
  const got = Object.keys(api).sort();
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`exported names differ:\n  got  ${got.join(", ")}\n  want ${want.join(", ")}`);
  }
  const gate = await api.CallGate.create({
    config: { inbound: { peers: { p: [{ limit: 1, window: "PT1S" }] } } },
    store: new api.MemoryStore(),
  });
  const first = await gate.admit({ callId: "c1", peer: "p" });
  const second = await gate.admit({ callId: "c2", peer: "p" });
  if (!first.admitted || second.admitted || second.limitedBy !== "peer:p") throw new Error("wrong decisions");
  await gate.close();
  for (const deep of ["callgate/dist/src/admission/admission.js", "callgate/dist/src/store/redis/scripts.js", "callgate/lua/admit.lua"]) {
    try {
      await import(deep);
      throw new Error(`${deep} is importable`);
    } catch (err) {
      if (err.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw err;
    }
  }
  console.log(`${got.length} names; admitted, then refused by peer:p; deep imports refused`);
' "$(cat "$repo/test/public-api.json")"

step "RedisStore from the installed package on a real redis-server (unix socket)"
command -v redis-server >/dev/null || fail "redis-server is not on the PATH"
sock="$scratch/redis.sock"
redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$scratch" --logfile "$scratch/redis.log" &
redis_pid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "redis-server did not start: $(cat "$scratch/redis.log")"
node --input-type=module -e '
  const { CallGate, RedisStore, RECOMMENDED_REDIS_OPTIONS } = await import("callgate");
  const { Redis } = await import("ioredis");
  const redis = new Redis({ path: process.argv[1], ...RECOMMENDED_REDIS_OPTIONS });
  const gate = await CallGate.create({
    config: { inbound: { peers: { p: [{ limit: 2, window: "PT10S" }] } } },
    store: new RedisStore({ redis }),
  });
  const got = [];
  for (const id of ["a", "b", "c"]) got.push((await gate.admit({ callId: id, peer: "p" })).admitted);
  await gate.close();
  await redis.quit();
  if (JSON.stringify(got) !== "[true,true,false]") throw new Error(`decisions ${JSON.stringify(got)}`);
  console.log("on Redis: admitted, admitted, refused");
' "$sock"

step "TypeScript: the types users need, through the exports map"
{
  printf 'import { CallGate, MemoryStore } from "callgate";\n'
  printf 'import type { %s } from "callgate";\n' "$(node -p "JSON.parse(process.argv[1]).types.join(', ')" "$(cat "$repo/test/public-api.json")")"
  printf 'const gate: CallGate = await CallGate.create({ config: {}, store: new MemoryStore() } satisfies CallGateOptions);\n'
  printf 'const d: AdmissionDecision = await gate.admit({ callId: "c", peer: "p" } satisfies AdmitInput);\n'
  printf 'export const admitted: boolean = d.admitted;\n'
} >consumer.ts
node "$repo/node_modules/typescript/bin/tsc" --noEmit --strict --target es2022 --module nodenext --moduleResolution nodenext \
  --skipLibCheck --typeRoots "$repo/node_modules/@types" --types node consumer.ts || fail "consumer.ts does not type-check"
echo "consumer.ts type-checks"

step "TypeScript: examples/sip-edge copied out, against the installed package's types"
mkdir sip-edge
cp "$repo"/examples/sip-edge/*.ts sip-edge/
node "$repo/node_modules/typescript/bin/tsc" --noEmit --strict --target es2022 --module nodenext --moduleResolution nodenext \
  --skipLibCheck --typeRoots "$repo/node_modules/@types" --types node sip-edge/*.ts || fail "examples/sip-edge does not type-check"
echo "examples/sip-edge type-checks against the package (its sip.d.ts stands in for the sip package)"

step "ok"
