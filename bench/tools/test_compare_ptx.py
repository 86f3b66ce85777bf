#!/usr/bin/env python3
"""Checks bench/tools/compare_ptx.py on two synthetic PTX files (any python3)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_ptx  # noqa: E402


def entry(name, body):
    return (f".visible .entry {name}(\n\t.param .u64 {name}_param_0\n)\n{{\n"
            f"\tld.param.b64 %rd1, [{name}_param_0];\n{body}\n$L__BB{name[-1]}_1:\n\tret;\n}}\n")


def main():
    header = ".version 8.0\n.target sm_90\n"
    # The same kernels, numbered differently; `add` differs in its body.
    old = header + entry("fill_0", "\tmov.b32 %r1, 0;") + entry("add_1", "\tadd.f32 %r1, %r2, %r3;") \
        + entry("cast_2", "\tcvt.rn.bf16.f32 %rs1, %r1;")
    new = header + entry("fill_0", "\tmov.b32 %r1, 0;") + entry("cast_1", "\tcvt.rn.bf16.f32 %rs1, %r1;") \
        + entry("add_5", "\tsub.f32 %r1, %r2, %r3;")
    a, b = compare_ptx.kernels(old), compare_ptx.kernels(new)
    assert compare_ptx.difference(a, b) == [("add", 1)], compare_ptx.difference(a, b)
    assert compare_ptx.difference(b, a) == [("add", 1)]
    assert sum((a & b).values()) == 2
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("old.ptx", "new.ptx", "same.ptx")]
        for path, text in zip(paths, (old, new, old.replace("_2", "_7"))):
            with open(path, "w") as f:
                f.write(text)
        assert compare_ptx.main(["x", paths[0], paths[1]]) == 1
        assert compare_ptx.main(["x", paths[0], paths[2]]) == 0
        assert compare_ptx.main(["x", paths[0], os.path.join(d, "missing.ptx")]) == 2
    print("compare_ptx: OK")


if __name__ == "__main__":
    main()
