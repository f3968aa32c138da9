#!/usr/bin/env python3
"""The stops of the machine's cores during launches, and the slow purchases they made.

A core that holds a thread takes a timer sample every millisecond (`perf record -e
cpu-clock/period=1000000/`, with `sched:sched_switch` beside it to know what it holds).
A core that took no sample and switched nothing for 5 ms or more while a thread held it
did not run at all: a guest's scheduler cannot stop a running thread without its own
timer ticks, so the virtual CPU itself was off, the hypervisor's doing, out of reach of
anything on the machine. Such a stop shows nowhere else: the guest counts it as the
thread's run time, and this machine reports no steal time.

Each launch's purchases come from the simulator's `--trace` (planned instant on the
monotonic clock, latency), and are lined up with the stops (`perf record -k
CLOCK_MONOTONIC`): how many of the slow ones were in flight while a core was stopped.

From the same switches: what else ran on each core while the launch ran, besides the
launch's own processes and the kernel's threads: the machine's other services, which
take turns with whatever shares their core.

    bench/stalls.py SCRIPT_1 TRACE_1 [SCRIPT_2 TRACE_2 ...]

where SCRIPT is `perf script -F cpu,time,event,pid,trace` of a launch's recording.
"""
import csv
import re
import sys

STOP_S = 0.005   # a core silent this long while it held a thread had stopped
SLOW_MS = 10.0   # the target's p99


# The launch's own processes (and the bench's), the idle task, the recording and the
# kernel's threads.
OURS = re.compile(r"^(seckill|redis-server|tokio-rt-worker|iou-wrk|perf|python3|sleep|bash|awk|taskset|swapper|"
                  r"ksoftirqd|kworker|rcu_|migration|kdamond|cpuhp|idle_inject|watchdog)")


def stops(path):
    """(core, start, end) of every stop in a recording, and (core, name, start, end) of
    every run of a process other than the launch's own and the kernel's."""
    line_re = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+([0-9.]+):\s+(\S+):(.*)$")
    switch_re = re.compile(r"prev_comm=(.*?) prev_pid=.* next_comm=(.*?) next_pid=(\d+)")
    last, held, since, found, others = {}, {}, {}, [], []
    with open(path) as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            cpu, t, event, rest = int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
            before = last.get(cpu)
            if before is not None and t - before >= STOP_S and held.get(cpu, 0) != 0:
                found.append((cpu, before, t))
            last[cpu] = t
            if event == "sched:sched_switch":
                sw = switch_re.search(rest)
                if sw:
                    prev = sw.group(1)
                    if cpu in since and not OURS.match(prev):
                        others.append((cpu, prev, since[cpu], t))
                    held[cpu], since[cpu] = int(sw.group(3)), t
    return found, others


def purchases(path):
    """(planned, latency ms) of every purchase of a trace."""
    with open(path) as f:
        return [(float(r["monotonic_s"]), float(r["latency_ms"])) for r in csv.DictReader(f)]


def main(args):
    if len(args) < 2 or len(args) % 2:
        sys.exit(__doc__)
    total = slow = during = 0
    cores, ran = {}, {}
    per_launch = []
    for i in range(0, len(args), 2):
        (found, others), bought = stops(args[i]), purchases(args[i + 1])
        begin, end = (bought[0][0], bought[-1][0]) if bought else (0, 0)
        found = [s for s in found if s[2] >= begin and s[1] <= end + 1]
        for cpu, name, a, b in others:
            if b >= begin and a <= end + 1:
                n, ms, longest = ran.get((cpu, name), (0, 0.0, 0.0))
                ran[(cpu, name)] = (n + 1, ms + (b - a) * 1000, max(longest, (b - a) * 1000))
        late = [(at, ms) for at, ms in bought if ms > SLOW_MS]
        hit = [1 for at, ms in late if any(a <= at + ms / 1000 and at <= b for _, a, b in found)]
        total, slow, during = total + len(bought), slow + len(late), during + len(hit)
        for cpu, a, b in found:
            n, ms, longest = cores.get(cpu, (0, 0.0, 0.0))
            cores[cpu] = (n + 1, ms + (b - a) * 1000, max(longest, (b - a) * 1000))
        per_launch.append(f"{len(found)} ({sum(b - a for _, a, b in found) * 1000:.0f} ms)")
    print("the cores' stops (no timer sample for 5 ms or more while a thread held the core: "
          "the virtual CPU was not running), launch by launch: " + " ".join(per_launch)
          + "; by core: " + (", ".join(f"core {c} {n}, {ms:.0f} ms in all, the longest {longest:.1f} ms"
                                       for c, (n, ms, longest) in sorted(cores.items())) or "none"))
    by_core = {}
    for (cpu, name), (n, ms, longest) in ran.items():
        by_core.setdefault(cpu, []).append((ms, longest, name))
    print("the machine's other processes on the cores while the launches ran (the longest "
          "turn in brackets): " + ("; ".join(
              f"core {cpu}: " + ", ".join(f"{name} {ms:.0f} ms ({longest:.1f})"
                                          for ms, longest, name in sorted(v, reverse=True)[:3])
              for cpu, v in sorted(by_core.items())) or "none"))
    if total:
        rest = (slow - during) / total
        print(f"purchases slower than {SLOW_MS:.0f} ms: {slow} of {total} ({slow / total:.2%}); "
              f"in flight during a stop: {during} ({during / max(slow, 1):.0%} of them); "
              f"the others are {rest:.2%} of all purchases, "
              + ("under" if rest < 0.01 else "over") + " the 1% a p99 allows")


if __name__ == "__main__":
    main(sys.argv[1:])
