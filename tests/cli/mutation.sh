#!/usr/bin/env bash
# A quick subset of the mutation harness (bench/mutation.sh, issue 12): one
# subtle mutant per layer (kernel rounding, kernel epsilon, builder scale,
# executor, session) on tiny-qwen3 at 2 layers; each must be caught by a gate
# and the honest deployment must pass. Labels cli;slow;mutation.
# session_rope_truncate (a half-ulp bias in the session's host RoPE table) is
# caught by the local gate of the session's RoPE ops (local_gate.h).
# usage: mutation.sh <tessera> <source-dir>
set -euo pipefail
bin="$1" src="$2"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bash "$src/bench/mutation.sh" -b "$bin" -p tiny-qwen3 -t 4 -o "$out" \
  -m "linear_truncate head_rmsnorm_eps_x100 residual_last_truncate softmax_scale_prefill exec_kv_write_prev session_kv_stale_row session_rope_truncate" \
  | tee "$out/table.txt"
grep -q "mutation score tiny-qwen3: 7 / 7 (100 %)" "$out/table.txt"
# An unknown mutant is a usage error (exit 2) naming the known ones.
set +e
"$bin" deploy --preset tiny-qwen3 --layers 1 --out "$out/bad" --plant-bug mutant:nope > /dev/null 2> "$out/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "unknown mutant 'nope'" "$out/err"
