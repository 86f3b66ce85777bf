#!/usr/bin/env python3
"""Checks bench/tools/honest_report.py and bench/probes/sol.py's arithmetic on
synthetic runs (any python3, no torch, no GPU)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import honest_report as hr  # noqa: E402

SOL = os.path.join(HERE, "..", "probes", "sol.py")


def run(model, batch, ms, timed=10, **extra):
    r = {"model": model, "batch": batch, "seq": 1024, "accum_steps": 1, "median_ms": ms,
         "timed_steps": timed, "steps": timed + 2, "final_loss": 7.5}
    r.update(extra)
    return r


def main():
    # gpt.num_parameters of 124M with the padded vocabulary (bench/README.md).
    assert hr.num_parameters("124M") == 124_475_904, hr.num_parameters("124M")
    assert hr.flops_per_token("124M") == 860_101_632, hr.flops_per_token("124M")
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        runs = {
            "gptc-bf16": run("124M", 64, 100.0, gptc_s=3.0),
            "gptc-fp8best": run("124M", 64, 80.0, gptc_s=3.1),
            "torch-bf16": run("124M", 64, 130.0, compile_s=40.0),
            "llmc-bf16": run("124M", 64, 120.0),
            "torchao-tensorwise": run("124M", 64, 125.0, compile_s=50.0,
                                      float8={"recipe": "tensorwise", "converted": 48, "of": 48}),
            # Stopped after its compile: shown, but no ratio from it.
            "torchao-rowwise": run("124M", 64, 60.0, timed=1),
        }
        for kind, r in runs.items():
            with open(os.path.join(a, f"run-124M-{kind}.json"), "w") as f:
                json.dump(r, f)
        # A second call replaces the tensorwise run (later --work wins).
        with open(os.path.join(b, "run-124M-torchao-tensorwise.json"), "w") as f:
            json.dump(run("124M", 64, 100.0, compile_s=5.0), f)
        out = subprocess.run([sys.executable, SOL, "--model", "124M", "--batch", "64", "--fake-rates",
                              "--json", os.path.join(b, "sol-124M.json")], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr

        rep = hr.build(hr.load_runs([a]), hr.load_sol([a]))
        rows = {x["kind"]: x for x in rep["sizes"]["124M"]["rows"]}
        # bf16 against the fastest bf16 peer (llm.c 120 ms), fp8 against the
        # fastest FP8 peer with enough timed steps (tensorwise 125 ms).
        assert rows["gptc-bf16"]["best_same_precision_peer"] == "llmc-bf16", rows["gptc-bf16"]
        assert abs(rows["gptc-bf16"]["vs_best_same_precision"] - 1.2) < 1e-12
        assert rows["gptc-fp8best"]["best_same_precision_peer"] == "torchao-tensorwise"
        assert abs(rows["gptc-fp8best"]["vs_best_same_precision"] - 125.0 / 80.0) < 1e-12
        assert abs(rows["gptc-fp8best"]["vs_best_any_peer"] - 1.5) < 1e-12
        assert abs(rows["gptc-bf16"]["tok_s"] - 65536 / 0.1) < 1e-6
        assert "sol" not in rep["sizes"]["124M"]

        rep = hr.build(hr.load_runs([a, b]), hr.load_sol([a, b]))
        rows = {x["kind"]: x for x in rep["sizes"]["124M"]["rows"]}
        assert abs(rows["gptc-fp8best"]["vs_best_same_precision"] - 1.25) < 1e-12
        sol = rep["sizes"]["124M"]["sol"]
        # --fake-rates: bf16 GEMMs at 700 TFLOP/s, so the bf16 bound's GEMM
        # time is the step's GEMM FLOPs / 700e12.
        bf = sol["bounds"]["bf16"]
        assert abs(bf["gemm_flops"] / bf["gemm_ms"] / 1e9 - 700.0) < 1e-6, bf
        # 6 N_p - (embedding lookups) ~ the GEMM FLOPs per token x tokens: the
        # step's GEMMs are 6 x (block weights + LM head) x B*T.
        L, C, V = 12, 768, hr.VOCAB_PADDED
        gemm_flops = 6 * 65536 * (L * 12 * C * C + V * C)
        assert abs(bf["gemm_flops"] - gemm_flops) < 1, (bf["gemm_flops"], gemm_flops)
        assert abs(bf["total_ms"] - bf["gemm_ms"] - bf["attention_ms"] - bf["memory_ms"]) < 1e-9
        fr = sol["fractions"]["gptc-bf16"]
        assert abs(fr["fraction_of_sol"] - bf["total_ms"] / 100.0) < 1e-12, fr
        md = hr.markdown(rep)
        assert "only 1 timed step(s): not used" in md, md
        assert "**1.250×**" in md and "Speed of light, 124M" in md, md
    print("test_honest_report: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
