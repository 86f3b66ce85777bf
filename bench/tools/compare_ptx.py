#!/usr/bin/env python3
"""Compares the kernels of two gptc PTX dumps (DIR/kernels.ptx of
`gptc compile --dump-ir-after-each-pass=DIR`) up to naming: a kernel's
numeric suffix, basic-block labels, local depots, switch tables,
`callseq` comments and where a module-scope declaration (dynamic shared
memory) is printed
follow the order in which kernels were created, so a change that adds or
removes one kernel renames all later ones. Prints the kernels (by base
name, with counts) that only one side has; exit 0 when the two sides hold
the same kernels.

  python3 bench/tools/compare_ptx.py OLD/kernels.ptx NEW/kernels.ptx
"""
import collections
import re
import sys


def kernels(text):
    """Counter of (base name, normalised body) over the .entry functions."""
    names = re.findall(r"^\.visible \.entry (\w+)\(", text, re.M)
    for name in sorted(names, key=len, reverse=True):
        base = re.sub(r"_\d+$", "", name)
        text = re.sub(r"\b" + name + r"(?=\b|_param)", base, text)
        # LLVM's switch lookup tables: the kernel's name, then a number.
        text = text.replace("switch_$_table_$_" + name, "switch_$_table_$_" + base)
    text = re.sub(r"(switch_\$_table_\$_[A-Za-z_]+?)_?\d*\b", r"\1", text)
    text = re.sub(r"\$L__BB\d+_", "$L__BB_", text)
    text = re.sub(r"__local_depot\d+", "__local_depot", text)
    text = re.sub(r"callseq \d+", "callseq", text)
    starts = [m.start() for m in re.finditer(r"^\.visible \.entry ", text, re.M)]
    out = collections.Counter()
    for i, start in enumerate(starts):
        body = text[start:starts[i + 1] if i + 1 < len(starts) else len(text)]
        # Up to the entry's closing brace: what follows (another module's
        # header, device functions) is not the kernel's.
        end = body.find("\n}\n")
        body = body[:end + 3] if end >= 0 else body
        # Module-scope declarations that LLVM places in the first kernel
        # using them (dynamic shared memory), and blank lines.
        body = re.sub(r"\n\s*// demoted variable\n\s*\.shared [^\n]*__dynamic_shmem__\d+;", "", body)
        body = re.sub(r"\n\s*\n", "\n", body)
        out[(re.match(r"\.visible \.entry (\w+)\(", body).group(1), body)] += 1
    return out


def difference(a, b):
    """Base names (with counts) of the kernels a has and b lacks."""
    return sorted(collections.Counter(name for name, _ in (a - b).elements()).items())


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sides = []
    for path in argv[1:]:
        try:
            with open(path) as f:
                sides.append(kernels(f.read()))
        except OSError as e:
            print(f"compare_ptx: {path}: {e.strerror}", file=sys.stderr)
            return 2
    old, new = sides
    only_old, only_new = difference(old, new), difference(new, old)
    same = sum((old & new).values())
    print(f"{same} kernels equal up to names")
    for label, diff in (("only in " + argv[1], only_old), ("only in " + argv[2], only_new)):
        if diff:
            print(label + ": " + ", ".join(f"{n} x{c}" for n, c in diff))
    return 0 if not only_old and not only_new else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
