#!/usr/bin/env bash
# The Criterion micro-benchmarks (dataplane/benches/hot.rs), one line each: the median
# time per call, between Criterion's lower and upper bounds.
#
#   bench/micro.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -q -p seckill-dataplane --bench hot 2>/dev/null | awk '
  /^[a-z].*\// && !/^Benchmarking/ { name = $0; sub(/ +time:.*/, "", name) }
  /time: +\[/ { sub(/.*time: +\[/, ""); sub(/\]/, "");
                printf "%-48s %10s %-3s  (%s %s … %s %s)\n", name, $3, $4, $1, $2, $5, $6 }'
