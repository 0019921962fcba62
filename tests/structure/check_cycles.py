#!/usr/bin/env python3
"""check_cycles.py GROUP=PATH[,PATH...] ... — no file cycle inside a library.

Each PATH is a static library (.a) or a folder of object files (meson's NAME.p). A file A
depends on file B when A references a global symbol that B defines (from `nm`). A cycle
(A -> B -> ... -> A) inside one group means the files cannot be read or changed one at a
time; the check prints each cycle with the symbols that close it and exits 1.
"""
import os
import re
import subprocess
import sys

NM_LINE = re.compile(r"^(?:.*\.a:)?(.*\.o):\s*[0-9a-fA-F]*\s+(\S)\s+(\S+)$")


def objects(path):
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".o"))
    return [path]


def symbols(paths):
    """{file: (defined, undefined)} over every object of the group."""
    files = {}
    for path in paths:
        for obj in objects(path):
            out = subprocess.run(["nm", "-A", "-g", obj], check=True, capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                # "lib.a:dir/member.o:0000 T name" or "file.o:         U name"
                m = NM_LINE.match(line)
                if not m:
                    continue
                member, kind, name = os.path.basename(m.group(1)), m.group(2), m.group(3)
                d, u = files.setdefault(member, (set(), set()))
                (u if kind == "U" else d).add(name)
    return files


def edges(files):
    owner = {}
    for f, (d, _) in files.items():
        for s in d:
            owner[s] = f
    g = {f: {} for f in files}
    for f, (_, u) in files.items():
        for s in u:
            o = owner.get(s)
            if o and o != f:
                g[f].setdefault(o, []).append(s)
    return g


def sccs(g):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for arg in argv[1:]:
        group, _, paths = arg.partition("=")
        files = symbols(paths.split(","))
        if not files:
            print(f"{group}: no object files under {paths}", file=sys.stderr)
            return 2
        g = edges(files)
        cyc = sccs(g)
        if not cyc:
            print(f"{group}: {len(files)} files, no cycle")
        for comp in cyc:
            bad += 1
            print(f"{group}: file cycle among {', '.join(comp)}")
            for a in comp:
                for b in comp:
                    if b in g[a]:
                        print(f"  {a} -> {b}: {', '.join(sorted(g[a][b])[:6])}")
    print(f"{bad} cycle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
