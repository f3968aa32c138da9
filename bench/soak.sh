#!/usr/bin/env bash
# Soak: the launch scenario again and again for MINUTES against one node (its worker
# storing and delivering orders, its shards releasing holds that expire after 5 s),
# sampling the node's memory (RSS) and open files and Redis's memory once a second.
# Fails when a launch breaks the ledger, or when the node's RSS or open files grow from
# the second minute to the last beyond the bounds; writes bench/soak.csv and
# bench/soak.svg.
#
#   bench/soak.sh [MINUTES] [RATE]
#   RSS_BOUND_MB=16 FD_BOUND=16 bench/soak.sh 10     # the bounds (defaults shown)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10} rate=${2:-3000}
rss_bound_mb=${RSS_BOUND_MB:-16} fd_bound=${FD_BOUND:-16}
[ "$minutes" -ge 3 ] || { echo "MINUTES: at least 3 (the second minute is the reference)" >&2; exit 2; }
cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
start_redis
sed -e 's/^hold_ttl_s = .*/hold_ttl_s = 5/' config/campaigns/demo.toml > "$work/campaign.toml"
launch_node "$(nproc)"

csv=bench/soak.csv
echo "second,launches,rss_kb,open_files,redis_bytes" > "$csv"
echo 0 > "$work/launches"
(
  start=$(date +%s)
  while kill -0 "$node" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$node/status")
    fds=$(ls "/proc/$node/fd" | wc -l)
    mem=$(rcli -p "$rport" info memory | awk -F: '/^used_memory:/ {print $2+0}')
    echo "$(( $(date +%s) - start )),$(cat "$work/launches"),$rss,$fds,$mem" >> "$csv"
    sleep 1
  done
) &
pids+=($!)

end=$(( $(date +%s) + minutes * 60 ))
launches=0 failed=0
while [ "$(date +%s)" -lt "$end" ]; do
  if ! $bin/seckill-sim run --scenario config/scenarios/launch.toml \
      --target "http://127.0.0.1:$dport" --redis "$ops_redis" --redis-password-file "$ops_password_file" \
      --token-key "$shop_key" --create "$work/campaign.toml" --db "$work/orders.sqlite" --rate "$rate" \
      --seed "$launches" --p99-ms 1000 \
      --fail-on "oversell==0,violations==0,retry_mismatches==0,unanswered==0,missing==0,delivered_twice==0" \
      --json "$work/report.json" > "$work/launch.txt" 2>&1; then
    failed=$((failed + 1))
    echo "launch $((launches + 1)) failed:" >&2
    tail -20 "$work/launch.txt" >&2
  fi
  launches=$((launches + 1))
  echo "$launches" > "$work/launches"
  python3 - "$work/report.json" "$launches" <<'PY' >&2 || true
import json, sys
r = json.load(open(sys.argv[1]))
lat = r["purchase_latency"]
print(f"launch {sys.argv[2]}: {r['requests']} requests, purchase p99 {lat['p99_ms']:.1f} ms")
PY
done
kill "$node"; wait "$node" 2>/dev/null || true

python3 - "$csv" "$launches" "$failed" "$rss_bound_mb" "$fd_bound" bench/soak.svg <<'PY'
import csv, statistics, sys
path, launches, failed, rss_bound, fd_bound, svg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(path))]
last_s = rows[-1]["second"]
second = [r for r in rows if 60 <= r["second"] < 120]
final = [r for r in rows if r["second"] >= last_s - 60]
def med(rs, k): return statistics.median(r[k] for r in rs)
rss0, rss1 = med(second, "rss_kb") / 1024, med(final, "rss_kb") / 1024
fd0, fd1 = max(r["open_files"] for r in second), max(r["open_files"] for r in final)
mem0, mem1 = med(second, "redis_bytes") / 2**20, med(final, "redis_bytes") / 2**20
peak = max(r["rss_kb"] for r in rows) / 1024
print(f"soak: {last_s} s, {launches} launches ({failed} failed)")
print(f"node RSS      minute 2: {rss0:.1f} MB   last minute: {rss1:.1f} MB   peak {peak:.1f} MB   (bound +{rss_bound:.0f} MB)")
print(f"open files    minute 2: {fd0}   last minute: {fd1}   (bound +{fd_bound})")
per = (mem1 - mem0) / max(launches - 2, 1)
print(f"redis memory  minute 2: {mem0:.1f} MB   last minute: {mem1:.1f} MB   ({per:.2f} MB per launch: each keeps its campaign, orders and events)")
# The plot: RSS and open files against time, launches marked.
W, H, L, B = 760, 300, 60, 40
xs = lambda s: L + (W - L - 20) * s / max(last_s, 1)
top = max(peak * 1.2, 1)
ys = lambda mb: H - B - (H - B - 20) * mb / top
pts = " ".join(f"{xs(r['second']):.1f},{ys(r['rss_kb'] / 1024):.1f}" for r in rows)
fmax = max(max(r["open_files"] for r in rows) * 1.2, 1)
yf = lambda n: H - B - (H - B - 20) * n / fmax
fpts = " ".join(f"{xs(r['second']):.1f},{yf(r['open_files']):.1f}" for r in rows)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="14">node RSS (MB, blue) and open files (grey) over {last_s} s, {launches} launches</text>',
       f'<line x1="{L}" y1="{H-B}" x2="{W-20}" y2="{H-B}" stroke="black"/>',
       f'<line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>']
for i in range(5):
    mb = top * i / 4
    out.append(f'<text x="{L-6}" y="{ys(mb)+4:.1f}" text-anchor="end">{mb:.0f}</text>')
for m in range(0, last_s // 60 + 1):
    out.append(f'<text x="{xs(m*60):.1f}" y="{H-B+16}" text-anchor="middle">{m}m</text>')
out.append(f'<polyline fill="none" stroke="#999" stroke-width="1" points="{fpts}"/>')
out.append(f'<polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" points="{pts}"/>')
out.append('</svg>')
open(svg, "w").write("\n".join(out))
bad = []
if failed: bad.append(f"{failed} launches failed their checks")
if rss1 > rss0 + rss_bound: bad.append(f"RSS grew {rss1 - rss0:.1f} MB")
if fd1 > fd0 + fd_bound: bad.append(f"open files grew by {fd1 - fd0}")
print("verdict: " + ("; ".join(bad) if bad else "flat: no growth beyond the bounds, every launch's ledger held"))
sys.exit(1 if bad else 0)
PY
