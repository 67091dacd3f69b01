#!/usr/bin/env python3
"""Summary of the statistical gate metrics of a deployment (issue 12): per
phase, the largest |z| of each statistic and the largest variance ratio as a
fraction of its limit, with the check that reached it; the local gates of
phases 2 and 6 (local_gate.h, gated) apart from the end-to-end path checks
(reported only); and phase 1's BF16-exact reference: elements outside, kernels
judged. Usage: stat_summary.py DIR"""
import json, math, sys

Z = ("bias_z", "mag_bias_z", "slope_z", "intercept_z", "row_slope_z")
Z_LIMIT = 7.0


def var_limit(n):
    return 1.5 + Z_LIMIT * math.sqrt(2.0 / max(n, 1))


def checks(d, phase):
    j = json.load(open(f"{d}/phase{phase}.json"))
    if phase == 1:
        for r in j["details"]["results"]:
            if "metrics" in r:
                yield r.get("node", "?"), r["metrics"]
        return
    for c in j["checks"]:
        yield c["name"], c.get("metrics", {})


def main():
    d = sys.argv[1]
    worst = {}
    bf16 = [0, 0]  # elements outside, kernels judged
    for phase in (1, 2, 3, 6):
        try:
            items = list(checks(d, phase))
        except (FileNotFoundError, KeyError):
            continue
        for name, m in items:
            if m.get("bf16_ref_outside", -1) >= 0:
                bf16[0] += m["bf16_ref_outside"]
                bf16[1] += 1
            scope = "local" if "local " in name else ("kernel" if phase == 1 else "path")
            for k in Z + ("var_ratio",):
                v = m.get(k)
                if v is None:
                    continue
                n = m.get("var_ratio_n") or m.get("count", 1)
                frac = abs(v) / (var_limit(n) if k == "var_ratio" else Z_LIMIT)
                key = (phase, scope, k)
                if key not in worst or frac > worst[key][0]:
                    worst[key] = (frac, v, name)
    for (phase, scope, k), (frac, v, name) in sorted(worst.items()):
        print(f"phase {phase} {scope:<6} {k:<12} {v:>10.3g}  {frac:5.2f}x limit  at {name}")
    print(f"phase 1 bf16 reference: {bf16[0]} elements outside over {bf16[1]} kernels")


main()
