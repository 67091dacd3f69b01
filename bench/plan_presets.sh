#!/usr/bin/env bash
# `tessera plan` for every preset in both styles: predicted prefill at S and
# decode per token at P = S on the modelled NPU, dispatches per layer, and the
# three bounding terms that take the most predicted time (prefill + decode).
# No weights needed. usage: bench/plan_presets.sh [TESSERA_BINARY] [SEQ] [SPEC]
set -euo pipefail
bin="${1:-build/cli/tessera}"
seq="${2:-2048}"
spec="${3:-xdna2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%-14s %-7s %12s %10s %12s %9s %6s  %s\n' preset style "prefill ms" "prefill t/s" \
  "decode ms/t" "decode t/s" "disp/L" "top bounds (share of prefill+decode time)"
for p in smollm2-135m qwen2.5-0.5b qwen3-0.6b llama-3.2-1b qwen2.5-1.5b smollm2-1.7b qwen3-1.7b \
         llama-3.2-3b qwen2.5-3b qwen3-4b; do
  for style in per-op default; do
    "$bin" plan --preset "$p" --style "$style" --seq "$seq" --spec "$spec" --json > "$tmp/p.json"
    python3 - "$tmp/p.json" <<'PY'
import json, sys
from collections import defaultdict
d = json.load(open(sys.argv[1]))
by = defaultdict(float)
for x in d["dispatches"] + d.get("host_steps", []):
    relayout = x.get("relayout_seconds", 0.0)
    by[x["bound"]] += x["seconds"] - relayout
    by["relayout"] += relayout
total = sum(by.values())
top = ", ".join(f"{b} {100 * s / total:.0f}%" for b, s in sorted(by.items(), key=lambda t: -t[1])[:3])
disp = f'{d["dispatches_per_layer_prefill"]}/{d["dispatches_per_layer_decode"]}'
print(f'{d["preset"]:<14} {d["style"]:<7} {1e3 * d["prefill_seconds"]:>12.1f} '
      f'{d["prefill_tokens_per_second"]:>10.0f} {1e3 * d["decode_seconds_per_token"]:>12.2f} '
      f'{d["decode_tokens_per_second"]:>9.1f} {disp:>6}  {top}')
PY
  done
done
