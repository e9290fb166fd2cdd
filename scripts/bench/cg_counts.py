#!/usr/bin/env python3
"""Per-request counts from one callgrind dump (used by scripts/bench/callgrind.sh).

    cg_counts.py NAME REQUESTS FILE

Prints: NAME, requests, instructions per request (the dump's summary), calls to
malloc per request and clock reads (clock_gettime) per request, the calls summed
over every call site in the dump. Standard library only.
"""
import re
import sys


def main():
    name, requests, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    names = {}
    callee = None
    total = 0
    calls = {"malloc": 0, "clock": 0}
    with open(path) as f:
        for line in f:
            if line.startswith("summary:"):
                total = int(line.split()[1])
            m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3)
                if m.group(1) == "cfn":
                    callee = names.get(m.group(2), "")
                continue
            if line.startswith("calls=") and callee is not None:
                n = int(line.split("=")[1].split()[0])
                if callee == "malloc":
                    calls["malloc"] += n
                elif callee.startswith("clock_gettime"):
                    calls["clock"] += n
    print("%-12s %10d %14.0f %12.1f %12.1f" % (
        name, requests, total / requests, calls["malloc"] / requests, calls["clock"] / requests))


if __name__ == "__main__":
    main()
