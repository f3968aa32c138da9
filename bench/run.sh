#!/usr/bin/env bash
# `just bench`: every benchmark side by side in one run, and bench/results.md with the
# machine, the date, a table a target (bench/targets.py), then the commands and what they
# printed.
#
#   bench/run.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5}
for tool in wrk nginx redis-benchmark bc perf valgrind; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install wrk nginx-light redis-tools bc linux-perf valgrind" >&2; exit 1; }
done
cargo build --release -q
out=bench/results.md
run() {
  echo "== $*" >&2
  local text
  text=$("$@" 2>&1 | grep -v '^\s*$' || true)
  printf '%s\n' "$text" >&2
  printf '### `%s`\n\n```\n%s\n```\n\n' "$*" "$text" >> "$out.new"
}
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
{
  echo "# Benchmark results"
  echo
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
  git diff --quiet HEAD 2>/dev/null || commit="$commit with uncommitted changes"
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, \`just bench $rounds $secs\`."
  echo "Machine: $(nproc) cores ($cpu), $(free -g | awk '/Mem:/ {print $2}') GiB, kernel $(uname -r)."
  echo "The load generators share the cores with what they measure, so only ratios within one run mean much."
  echo
} > "$out.head"
: > "$out.new"
# The refusals' target is judged on this one: twice the rounds and one, as this machine's
# speed changes from minute to minute and a median of three follows it.
run bench/http-ceiling.sh 1 "$((rounds * 2 + 1))" "$secs"
run bench/http-ceiling.sh 2 "$rounds" "$secs"
run bench/node-instructions.sh "$secs"
run bench/script-cost.sh "$rounds" 40000
run bench/script-instructions.sh 4096
run bench/redis-ceiling.sh "$rounds" "$secs" 1
run bench/sim-vs-wrk.sh "$rounds" "$secs" 64
run bench/metrics-cost.sh "$rounds" "$secs"
run bench/webhooks.sh "$rounds" "$secs"
run bench/launch.sh 1 search
# The run that separates the node from its load: the node alone on one core.
run env PIN=1 bench/launch.sh 1 search
run bench/scaling.sh 10 8000
run bench/growth.sh "$rounds" 2 1000000
run bench/queue.sh "$rounds" "$secs"
run bench/profile.sh 10 20
run bench/micro.sh
echo "The launch plots: [launch.svg](launch.svg), and pinned [launch-pinned.svg](launch-pinned.svg)." >> "$out.new"
# The targets first, a table each, read off what the runs printed; then the runs.
{
  cat "$out.head"
  echo "## Targets"
  echo
  python3 bench/targets.py "$out.new" "$(nproc) cores, $cpu"
  echo "## The runs"
  echo
  cat "$out.new"
} > "$out.tmp"
rm -f "$out.head" "$out.new"
mv "$out.tmp" "$out"
echo "written: $out" >&2
