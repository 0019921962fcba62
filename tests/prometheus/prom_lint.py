#!/usr/bin/env python3
"""prom_lint.py FILE [--expect NAME ...] — checks Prometheus text exposition (0.0.4) the way
the prometheus suite wants it: every sample's family has one HELP and one TYPE line before
its samples, names and label names are valid, counters end in _total and gauges do not,
units are base units (no _ms/_us/_bps), every name starts with tally_, no series twice,
values parse. --expect NAME: that family must be present. Exit 0 ok, 1 with the problems."""
import re
import sys

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")


def lint(text, expect=()):
    errs, help_, type_, seen, series = [], {}, {}, set(), set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                errs.append(f"line {n}: bad {parts[1]} line")
                continue
            d = help_ if parts[1] == "HELP" else type_
            if parts[2] in d:
                errs.append(f"line {n}: second {parts[1]} for {parts[2]}")
            if parts[2] in seen:
                errs.append(f"line {n}: {parts[1]} for {parts[2]} after its samples")
            d[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            errs.append(f"line {n}: not a sample: {line!r}")
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        seen.add(name)
        rest = LABEL.sub("", labels).replace(",", "")
        if rest.strip():
            errs.append(f"line {n}: bad labels {labels!r}")
        keys = [k for k, _ in LABEL.findall(labels)]
        if len(keys) != len(set(keys)):
            errs.append(f"line {n}: a label twice")
        key = (name, tuple(sorted(LABEL.findall(labels))))
        if key in series:
            errs.append(f"line {n}: series twice: {line}")
        series.add(key)
        try:
            float(value)
        except ValueError:
            errs.append(f"line {n}: bad value {value!r}")
        if name not in help_ or name not in type_:
            errs.append(f"line {n}: {name} has no HELP/TYPE before it")
    for name, t in type_.items():
        if not name.startswith("tally_"):
            errs.append(f"{name}: not tally_ prefixed")
        if t not in ("counter", "gauge", "histogram", "summary", "untyped"):
            errs.append(f"{name}: bad type {t}")
        if t == "counter" and not name.endswith("_total"):
            errs.append(f"{name}: counter without _total")
        if t == "gauge" and name.endswith("_total"):
            errs.append(f"{name}: gauge named _total")
        if re.search(r"_(ms|us|ns|bps|pps|kb|mb|mib)(_|$)", name):
            errs.append(f"{name}: not in base units")
        if not help_.get(name, "").strip():
            errs.append(f"{name}: empty HELP")
    for name in expect:
        if name not in type_:
            errs.append(f"expected family {name} missing")
    return errs


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    path, expect = args[0], []
    if "--expect" in args:
        expect = args[args.index("--expect") + 1:]
    text = sys.stdin.read() if path == "-" else open(path).read()
    errs = lint(text, expect)
    for e in errs:
        print("prom_lint:", e)
    nfam = len([line for line in text.splitlines() if line.startswith("# TYPE ")])
    print(f"prom_lint: {nfam} families, {len(errs)} problems")
    sys.exit(1 if errs else 0)


if __name__ == "__main__":
    main()
