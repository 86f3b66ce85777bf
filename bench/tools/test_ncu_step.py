#!/usr/bin/env python3
"""Checks bench/tools/ncu_step.py on a small synthetic ncu CSV (any python3)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_step  # noqa: E402

HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
ROWS = [
    ("random_normal_3", "us", "5"),
    ("fill_4", "ns", "1,000"),
    ("layernorm_forward_57", "usecond", "20"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "msecond", "1.5"),
    ("layernorm_forward_57", "nsecond", "30,000"),
    ("flash_attention_forward_58", "usecond", "100"),
]


def csv_lines(rows):
    lines = ["==PROF== Connected to process 1", HEADER]
    for i, (k, unit, v) in enumerate(rows):
        lines.append(f'"{i}","{k}","gpu__time_duration.sum","{unit}","{v}"')
    return lines


def main():
    groups, gemms = ncu_step.group(ncu_step.kernel_times(csv_lines(ROWS)))
    # Init's kernels (through the last random_normal) are dropped.
    assert "random_normal" not in groups, groups
    assert "fill" in groups and groups["fill"] == [1, 0.001], groups
    # Suffixes go; units (ns, us, ms and the older nsecond, ...) and
    # thousands separators convert to ms.
    assert groups["layernorm_forward"][0] == 2, groups
    assert abs(groups["layernorm_forward"][1] - 0.05) < 1e-12, groups
    assert gemms == {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"}, gemms
    text = ncu_step.report(groups, gemms, 10)
    assert text.startswith("step: 1.651 ms of kernels, GEMMs 1.50 ms (91%)") or \
        text.startswith("step: 1.65 ms of kernels, GEMMs 1.50 ms (91%)"), text
    # With steps=2 the 4 launches after init split in two: the last two only.
    last, _ = ncu_step.group(ncu_step.kernel_times(csv_lines(ROWS[:5])), steps=2)
    assert set(last) == {"layernorm_forward", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"}, last
    assert last["layernorm_forward"] == [1, 0.03], last
    try:
        ncu_step.group(ncu_step.kernel_times(csv_lines(ROWS[:5])), steps=3)
    except ValueError as e:
        assert "do not split into 3 equal steps" in str(e), e
    else:
        raise AssertionError("split 4 launches into 3 steps")
    # --repeated: a first step (a, b, c) unlike the two after it (a, d, a, d):
    # the last step is the longest tail the same names precede.
    steady = csv_lines([("random_normal_1", "us", "1"), ("a_1", "us", "1"), ("b_2", "us", "2"),
                        ("c_3", "us", "3"), ("a_1", "us", "4"), ("d_4", "us", "5"),
                        ("a_1", "us", "6"), ("d_4", "us", "7")])
    tail = ncu_step.last_repeated(ncu_step.kernel_times(steady))
    assert [k for k, _ in tail] == ["a_1", "d_4"] and tail[0][1] == 0.006, tail
    groups, _ = ncu_step.group_launches(tail)
    assert groups == {"a": [1, 0.006], "d": [1, 0.007]}, groups
    try:
        ncu_step.last_repeated(ncu_step.kernel_times(csv_lines(ROWS)))
    except ValueError as e:
        assert "no two equal steps" in str(e), e
    else:
        raise AssertionError("found a repeated step where there is none")
    # Bad input is an error naming the problem, not a crash.
    unknown = csv_lines([("fill_1", "cycle", "7")])
    for bad, why in ((["no csv here"], "no CSV rows"), (['"a","b"', '"1","2"'], "not an ncu metrics CSV"),
                     (unknown, "unknown unit")):
        try:
            ncu_step.kernel_times(bad)
        except ValueError as e:
            assert why in str(e), e
        else:
            raise AssertionError(f"accepted {bad}")
    print("test_ncu_step: ok")


if __name__ == "__main__":
    main()
