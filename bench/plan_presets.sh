#!/usr/bin/env bash
# `tessera plan` for every preset, three lowerings side by side (all figures
# are predictions of the timing model and host model of SPEC, no weights):
#   per-op     the hand-written baseline: one dispatch per graph node
#   default    the default style with its required passes only
#              (place,build,buffers: host steps for data movement, no
#              optimization)
#   optimized  the default style's whole pass pipeline (kv-resident,
#              align-layouts, fuse, reuse-buffers)
# Per lowering: prefill seconds at S, decode ms per token at P = S,
# dispatches per layer (prefill/decode), and how far above the physical
# bounds (prefill FLOPs / peak MAC, decode weight bytes / DDR) each is.
# usage: bench/plan_presets.sh [TESSERA_BINARY] [SEQ] [SPEC]
set -euo pipefail
bin="${1:-build/cli/tessera}"
seq="${2:-2048}"
spec="${3:-xdna2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%-13s | %-34s | %-34s | %-34s\n' "" per-op "default (required passes)" optimized
printf '%-13s |' preset
for _ in 1 2 3; do printf ' %8s %8s %5s %10s |' "pref s" "dec ms" "d/L" "x bound"; done
printf '\n'
for p in smollm2-135m qwen2.5-0.5b qwen3-0.6b llama-3.2-1b qwen2.5-1.5b smollm2-1.7b qwen3-1.7b \
         llama-3.2-3b qwen2.5-3b qwen3-4b; do
  "$bin" plan --preset "$p" --style per-op --seq "$seq" --spec "$spec" --json > "$tmp/a.json"
  "$bin" plan --preset "$p" --style default --passes place,build,buffers --seq "$seq" \
    --spec "$spec" --json > "$tmp/b.json"
  "$bin" plan --preset "$p" --style default --seq "$seq" --spec "$spec" --json > "$tmp/c.json"
  python3 - "$p" "$tmp/a.json" "$tmp/b.json" "$tmp/c.json" <<'PY'
import json, sys
row = f"{sys.argv[1]:<13} |"
for path in sys.argv[2:]:
    d = json.load(open(path))
    disp = f'{d["dispatches_per_layer_prefill"]}/{d["dispatches_per_layer_decode"]}'
    over = f'{d["prefill_over_bound"]:.2f}/{d["decode_over_bound"]:.2f}'
    row += (f' {d["prefill_seconds"]:>8.3f} {1e3 * d["decode_seconds_per_token"]:>8.2f}'
            f' {disp:>5} {over:>10} |')
print(row)
PY
done
