#!/usr/bin/env python3
"""The stops of the machine's cores during launches, what held them, and the slow purchases
beside them.

Each core takes a timer sample every millisecond whatever it runs, its idle task included
(`perf record -e cpu-clock/period=1000000/`), with `sched:sched_switch` beside it to know
which thread it holds. A core that took no timer sample for 5 ms or more, with no records
lost or throttled then, is taken to have stopped: its virtual CPU was not running, or its
kernel held the timer off. Switches may still show in a stop (the scheduler's tick came
and went), so they do not end one. Such a stop shows nowhere else: the guest counts it as
the thread's run time, or as idle time. A stop while the core idled counts too: a thread
woken then waits it out.

What a core held when it stopped names where the time went: the first thread other than
the launch's own (the node, Redis, the simulator) and the idle task among the one it held
as the stop began and those it switched to during it, else the one it held. A thread of
the launch means its virtual CPU stopped under it; another program's thread means that
program held the core, its time out of the recording's sight.

Each launch's purchases come from the simulator's `--trace` (the instant each latency is
measured from, on the monotonic clock, and the latency), lined up with the stops (`perf
record -k CLOCK_MONOTONIC`): how many purchases slower than 10 ms were in flight while a
core was stopped (any core: the node, Redis and the simulator are all on a purchase's
way), beside how many of all purchases were; and each launch's p99 and p99.9 of all its
purchases beside those of the purchases in flight during no stop (those queued behind a stop
while it drains count): near the tail the launch would have on cores that never stop.

From the same switches: which threads other than the launch's own, the bench's and the
kernel's ran on each core while the launch ran (by thread name), and for how long.

    bench/stalls.py SCRIPT_1 DROPPED_1 TRACE_1 [SCRIPT_2 DROPPED_2 TRACE_2 ...]

SCRIPT is `perf script -F cpu,time,event,pid,trace` of a launch's recording, DROPPED the
`PERF_RECORD_LOST` and `PERF_RECORD_(UN)THROTTLE` lines of `perf report -D` of it.
"""
import csv
import os
import re
import sys

STOP_S = 0.005   # a core without a timer sample this long, idle or not, had stopped
SLOW_MS = 10.0   # the target's p99

# The launch's own threads (and the bench's), the idle task, the recording and the
# kernel's threads, by name (a thread's name, up to 15 characters).
OURS = re.compile(r"^(seckill|redis-server|bio_|io_thd_|tokio-runtime-w|iou-wrk|perf|python3|sleep|bash|awk|"
                  r"taskset|swapper|ksoftirqd|kworker|rcu_|migration|kdamond|cpuhp|idle_inject|"
                  r"watchdog|jbd2|kswapd|kcompactd|khugepaged|irq/)")
# The launch's own threads and the idle task: a stop under one of them is its virtual CPU's.
LAUNCH = re.compile(r"^(seckill|redis-server|bio_|io_thd_|iou-wrk|swapper)")


def dropped(path):
    """Per core, the spans its recording throttled, and the instants it lost records."""
    spans, lost, began = {}, [], {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^\s*(-?\d+)\s+(\d+)\s+\S+\s+\[\S+\]: PERF_RECORD_(LOST|THROTTLE|UNTHROTTLE)", line)
            if not m:
                continue
            cpu, t, what = int(m.group(1)), int(m.group(2)) / 1e9, m.group(3)
            if what == "LOST":
                lost.append((cpu, t))
            elif what == "THROTTLE":
                began[cpu] = t
            elif cpu in began:
                spans.setdefault(cpu, []).append((began.pop(cpu), t))
    for cpu, t in began.items():
        spans.setdefault(cpu, []).append((t, float("inf")))
    return spans, lost


def stops(path, spans, lost):
    """(core, start, end, idle, holder) of every stop in a recording, and (core, name,
    start, end) of every turn of a thread other than the launch's own and the kernel's;
    None when the recording holds nothing. A holder is (thread name, thread id)."""
    line_re = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+([0-9.]+):\s+(\S+):(.*)$")
    switch_re = re.compile(r"prev_comm=(.*?) prev_pid=.* next_comm=(.*?) next_pid=(\d+)")
    sampled, held, since, found, others, seen = {}, {}, {}, [], [], False
    # Per core: the thread it held at its last sample, and those it switched to since.
    at_sample, switched = {}, {}

    def recorded(cpu, a, b):
        return (not any(x <= b and a <= y for x, y in spans.get(cpu, []))
                and not any(c in (cpu, -1) and a <= t <= b for c, t in lost))

    with open(path) as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            seen = True
            cpu, t, event, rest = int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
            if event.startswith("cpu-clock"):
                before = sampled.get(cpu)
                if before is not None and t - before >= STOP_S and recorded(cpu, before, t):
                    first = at_sample.get(cpu, ("?", -1))
                    holders = [first] + switched.get(cpu, [])
                    holder = next((h for h in holders if not LAUNCH.match(h[0])), first)
                    found.append((cpu, before, t, first[1] == 0, holder))
                sampled[cpu] = t
                at_sample[cpu], switched[cpu] = held.get(cpu, ("?", -1)), []
            elif event == "sched:sched_switch":
                sw = switch_re.search(rest)
                if sw:
                    prev = sw.group(1)
                    if cpu in since and not OURS.match(prev):
                        others.append((cpu, prev, since[cpu], t))
                    held[cpu], since[cpu] = (sw.group(2), int(sw.group(3))), t
                    switched.setdefault(cpu, []).append(held[cpu])
    return (found, others) if seen else None


def described(holder):
    """A thread by name, and for one outside the launch its process and niceness, read
    from /proc while it still runs."""
    name, tid = holder
    if LAUNCH.match(name) or tid <= 0:
        return "the idle task" if tid == 0 else name
    try:
        status = dict(l.split(":", 1) for l in open(f"/proc/{tid}/status") if ":" in l)
        pid = int(status["Tgid"])
        nice = open(f"/proc/{tid}/stat").read().rsplit(")", 1)[1].split()[16]
        return f"{name} (thread {tid} of {open(f'/proc/{pid}/comm').read().strip()}, pid {pid}, nice {nice})"
    except (OSError, KeyError, ValueError, IndexError):
        return f"{name} (thread {tid})"


def purchases(path):
    """(measured from, latency ms) of every purchase of a trace; [] without one."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [(float(r["monotonic_s"]), float(r["latency_ms"])) for r in csv.DictReader(f)]


def quantile(ordered, q):
    """The value at quantile q of an ordered list, the nearest rank above; 0 when empty."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def main(args):
    if len(args) < 3 or len(args) % 3:
        sys.exit(__doc__)
    total = slow = during = all_during = lost_records = idle = 0
    cores, ran, per_launch, holders, tails, gaps = {}, {}, [], {}, [], {}
    for i in range(0, len(args), 3):
        spans, lost = dropped(args[i + 1]) if os.path.exists(args[i + 1]) else ({}, [])
        lost_records += len(lost)
        recording, bought = stops(args[i], spans, lost), purchases(args[i + 2])
        if recording is None or not bought:
            per_launch.append("not recorded" if recording is None else "no trace")
            continue
        found, others = recording
        # From the first purchase planned to the last one answered.
        begin, end = bought[0][0], max(at + ms / 1000 for at, ms in bought)
        found = [s for s in found if s[2] >= begin and s[1] <= end]
        for cpu, name, a, b in others:
            if b >= begin and a <= end:
                n, ms, longest = ran.get((cpu, name), (0, 0.0, 0.0))
                ran[(cpu, name)] = (n + 1, ms + (b - a) * 1000, max(longest, (b - a) * 1000))

        def stopped(at, ms):
            return any(a <= at + ms / 1000 and at <= b for _, a, b, _, _ in found)

        hit = [stopped(at, ms) for at, ms in bought]
        clear = sorted(ms for (at, ms), h in zip(bought, hit) if not h)
        every = sorted(ms for _, ms in bought)
        tails.append((quantile(every, 0.99), quantile(clear, 0.99),
                      quantile(every, 0.999), quantile(clear, 0.999)))
        total += len(bought)
        slow += sum(1 for at, ms in bought if ms > SLOW_MS)
        during += sum(1 for (at, ms), h in zip(bought, hit) if h and ms > SLOW_MS)
        all_during += sum(hit)
        began = {}
        for cpu, a, b, was_idle, holder in found:
            began.setdefault(holder, []).append(a)
        for holder, starts in began.items():
            gaps.setdefault(holder, []).extend(y - x for x, y in zip(starts, starts[1:]))
        for cpu, a, b, was_idle, holder in found:
            n, ms, longest = cores.get(cpu, (0, 0.0, 0.0))
            cores[cpu] = (n + 1, ms + (b - a) * 1000, max(longest, (b - a) * 1000))
            idle += was_idle
            slow_in = sum(1 for at, ms in bought if ms > SLOW_MS and a <= at + ms / 1000 and at <= b)
            n, ms, longest, hits = holders.get(holder, (0, 0.0, 0.0, 0))
            holders[holder] = (n + 1, ms + (b - a) * 1000, max(longest, (b - a) * 1000), hits + slow_in)
        per_launch.append(f"{len(found)} ({sum(b - a for _, a, b, _, _ in found) * 1000:.0f} ms)")
    print("the cores' stops (no timer sample for 5 ms or more, none lost: taken as the "
          "virtual CPU not running or its timer held off), launch by launch: "
          + " ".join(per_launch) + "; by core: "
          + (", ".join(f"core {c}: {plural(n, 'stop')}, {ms:.0f} ms in all, the longest {longest:.1f} ms"
                       for c, (n, ms, longest) in sorted(cores.items())) or "none")
          + f"; {idle} of them while the core idled; records the recording lost: {lost_records}")
    def every(h):
        g = sorted(gaps.get(h, []))
        return f", one every {quantile(g, 0.5):.1f} s (the median gap)" if len(g) >= 2 else ""

    print("what the cores held when they stopped (the first thread not the launch's, else the one "
          "held; its stops, their time, the longest, slow purchases in flight, and how often it "
          "stopped a core within a launch): "
          + ("; ".join(f"{described(h)}: {plural(n, 'stop')}, {ms:.0f} ms, the longest {longest:.1f} ms, "
                       f"{hits} slow{every(h)}"
                       for h, (n, ms, longest, hits) in sorted(holders.items(), key=lambda x: -x[1][1])[:4])
             or "nothing"))
    by_core = {}
    for (cpu, name), (n, ms, longest) in ran.items():
        by_core.setdefault(cpu, []).append((ms, longest, name))
    print("other threads on the cores while the launches ran (by thread name, their time and "
          "longest turn): " + ("; ".join(
              f"core {cpu}: " + ", ".join(f"{name} {ms:.0f} ms (longest {longest:.1f} ms)"
                                          for ms, longest, name in sorted(v, reverse=True)[:3])
              for cpu, v in sorted(by_core.items())) or "none"))
    if total:
        rest = (slow - during) / total
        print(f"purchases slower than {SLOW_MS:.0f} ms: {slow} of {total} ({slow / total:.2%}); "
              f"in flight during a stop: {during} ({during / max(slow, 1):.0%} of them, against "
              f"{all_during / total:.1%} of all purchases); those not: {rest:.2%} of all purchases")
        # Near the tail a launch would have on cores that never stop: the purchases in
        # flight during none of the stops (those queued behind one still count).
        print("purchase p99 of each launch, of all its purchases → of those in flight during no "
              "stop: " + ", ".join(f"{a:.2f} → {b:.2f}" for a, b, _, _ in tails) + " ms; p99.9: "
              + ", ".join(f"{a:.2f} → {b:.2f}" for _, _, a, b in tails) + " ms")


if __name__ == "__main__":
    main(sys.argv[1:])
