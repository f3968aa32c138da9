#!/usr/bin/env bash
# The performance guard of `just test`: instructions, counted under valgrind's callgrind,
# where time on a shared machine moves by a third from one hour to the next. The node's
# instructions a request (its shard's thread, user space) for `GET /api/time`, a sold-out
# purchase, a purchase that holds a unit (its shopper's token already verified by the
# shard, as after a shopper's first look at the sale) and one by a shopper new to the
# shard (their JWT, EdDSA, verified in full), and Redis's instructions per order of the
# purchase script, one and sixteen a call; each against bench/instructions.baseline. Fails
# if any row is more than 10% above its baseline, naming the row and by how much.
#
# Counts depend on the machine (glibc, sha2 and memchr pick their code by the CPU's
# features at run time) and on the toolchain: the baseline keeps one block a machine
# (the CPU's model and features, rustc, redis-server, valgrind), and on a machine it has
# no block for, the comparison is skipped, and says so. A row a block lacks (one counted
# only since the block was written) is shown and not compared.
#
# The node counted is the release build the short fault drills of `just test` have made
# (the same cargo command): no build of its own after them. The dev build was tried and
# is not used: under callgrind it answers a hundred times fewer requests a second (8
# purchases in 3 s), too few for a count that repeats.
#
#   bench/instructions-guard.sh                  # compare with this machine's baseline
#   bench/instructions-guard.sh --update "WHY"   # measure and rewrite this machine's block
#   NODE=path/to/seckill-dataplane bench/instructions-guard.sh   # count that build, none made
# A baseline moves only in a commit that says why (WHY is kept beside the figures).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=bench/instructions.baseline
limit=10
update=
if [ "${1:-}" = --update ]; then
  update=${2:?--update needs the reason the baseline moves}
fi
for tool in valgrind callgrind_control wrk redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: just setup (apt-get install valgrind wrk redis-tools)" >&2; exit 1; }
done
features=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'sse4_2|avx|avx2|avx512f|avx512bw|bmi2|sha_ni|aes|pclmulqdq' | sort | xargs)
machine="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $features; $(rustc -V | cut -d' ' -f1-2); redis $(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/'); $(valgrind --version)"
if [ -z "$update" ] && ! grep -qxF "machine: $machine" "$baseline" 2>/dev/null; then
  echo "instruction guard: SKIPPED, $baseline has no block for this machine ($machine)."
  echo "  Counts compare only on a like machine and toolchain; to start one: bench/instructions-guard.sh --update \"WHY\""
  exit 0
fi

# The build bench/drill.sh made (the same command): nothing to build after it.
[ -n "${NODE:-}" ] && NODE=$(realpath "$NODE") || cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
. bench/callgrind.sh
# The purchase script as Redis runs it: its generated prelude and all.
cargo run -q --release -p seckill-core --example script -- purchase.lua >"$work/purchase.lua"
count_secs=4
start_redis

counted_node node "${NODE:-$bin/seckill-dataplane}"
sold_out_campaign
buy_the_unit "$url"
open_campaign stock 50000000 1
# Shoppers whose tokens the shard has verified (what a shopper who looked at the sale
# first costs), and shoppers new to it, whose token (a JWT, EdDSA) is verified in full.
shopper_tokens "$work/tokens" 6000 guard
shopper_tokens "$work/fresh" 6000 fresh
new_shoppers_script "$work/buy.lua"
known_shoppers_script "$work/know.lua"
TOKENS="$work/tokens" wrk -t1 -c8 -d300s --timeout 30s -s "$work/know.lua" "$url" >/dev/null 2>&1
sleep 0.5
count_route node time 200 "$url/api/time"
count_route node soldout 409 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
TOKENS="$work/tokens" BUY_PATH=/api/campaigns/stock/purchase QTY=1 \
  count_route node purchase 200 -s "$work/buy.lua" "$url"
TOKENS="$work/fresh" BUY_PATH=/api/campaigns/stock/purchase QTY=1 \
  count_route node newshopper 200 -s "$work/buy.lua" "$url"
kill "$vg"; wait "$vg" 2>/dev/null || true
for n in 1 16; do
  purchase_args "$n"
  per_order "script$n" 1024 "$n" "$work/purchase.lua" \
      "${purchase_keys[@]}" "${purchase_argv[@]}" >> "$work/node/counts"
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
python3 - "$baseline" "$work/node/counts" "$machine" "$limit" "$update" "$commit" "$count_secs" <<'PY'
import datetime, sys
path, counts, machine, limit, update, commit, secs = sys.argv[1:]
labels = {"time": "node, GET /api/time (a request)", "soldout": "node, purchase sold out (a request)",
          "purchase": "node, purchase held (a request)",
          "newshopper": "node, purchase held, a new shopper's JWT verified",
          "script1": "Redis, purchase script, 1 a call (an order)",
          "script16": "Redis, purchase script, 16 a call (an order)"}
now = {}
for line in open(counts):
    f = line.split()
    if len(f) == 3 and int(f[1]) == 0:
        sys.exit(f"instruction guard: wrk had no answer to count for {labels.get(f[0], f[0])}")
    now[f[0]] = int(f[2]) / int(f[1]) if len(f) == 3 else float(f[1])
missing = [k for k in labels if k not in now]
if missing:
    sys.exit(f"instruction guard: no count for {', '.join(missing)}")
# The file: a header of comments, then one block a machine, each "machine: ..." then
# "why: ..." then a row a count ("key instructions  # label").
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = []
header = [l for l in lines if l.startswith("#")]
blocks, cur = {}, None
for l in lines:
    if l.startswith("machine: "):
        cur = l[len("machine: "):]
        blocks[cur] = {"why": "", "rows": {}}
    elif cur and l.startswith("why: "):
        blocks[cur]["why"] = l[len("why: "):]
    elif cur and l.strip() and not l.startswith("#"):
        key, value = l.split()[:2]
        blocks[cur]["rows"][key] = float(value)
print(f"instructions counted (callgrind; the node's release build, 1 shard, wrk -t1 -c8 -d{secs}s a route;"
      " Redis, 1,024 and 2,048 orders)")
if update:
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    blocks[machine] = {"why": f"{today}, commit {commit}: {update}", "rows": now}
    with open(path, "w") as out:
        out.write("\n".join(header) + "\n")
        for m, b in blocks.items():
            out.write(f"\nmachine: {m}\nwhy: {b['why']}\n")
            for k in labels:
                if k in b["rows"]:
                    out.write(f"{k:9} {b['rows'][k]:10.0f}   # {labels[k]}\n")
    for k in labels:
        print(f"  {labels[k]:46} {now[k]:10.0f}")
    print(f"written: this machine's block of {path}")
    sys.exit(0)
base = blocks[machine]["rows"]
failed = []
for k in labels:
    if k not in base:
        print(f"  {labels[k]:46} {now[k]:10.0f}  no row in this machine's block: shown, not compared")
        continue
    change = (now[k] - base[k]) / base[k] * 100
    over = change > float(limit)
    failed += [k] if over else []
    print(f"  {labels[k]:46} {now[k]:10.0f}  baseline {base[k]:10.0f}  {change:+6.1f}%{'  OVER +' + limit + '%' if over else ''}")
if failed:
    sys.exit(f"instruction guard: FAILED, {len(failed)} row(s) more than {limit}% above {path}: "
             + "; ".join(f"{labels[k]} {(now[k] - base[k]) / base[k] * 100:+.1f}%" for k in failed)
             + ". A change that has to cost more says so in the commit that runs"
             " bench/instructions-guard.sh --update \"WHY\".")
print(f"instruction guard: passed (every row within +{limit}% of {path})")
PY
