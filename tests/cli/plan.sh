#!/usr/bin/env bash
# tessera plan: the text plan (header, steps with time and bound, totals), the
# JSON summary, and exit code 2 for a bad style or an over-long prompt.
# usage: plan.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" plan --preset tiny --seq 33 > "$tmp/out.txt" || fail "plan exited $?"
grep -q "^plan tiny style=default S=33 P=0 context=2048 spec=xdna2$" "$tmp/out.txt" \
  || fail "no prefill header: $(head -2 "$tmp/out.txt")"
grep -q "^plan tiny style=default S=1 P=33 context=2048 spec=xdna2$" "$tmp/out.txt" \
  || fail "no decode header"
# attn_norm's row-major output lets it share the q / k / v dispatch, and the
# row-major rope joins it too.
grep -Eq "^  npu +L0\.attn_norm\.\.L0\.k_rot +rmsnorm H=128 M=33 .*us\)? (overhead|compute|vector|stream|dma|ddr|fill_drain)$" \
  "$tmp/out.txt" || fail "no fused L0.attn_norm..L0.k_rot prefill dispatch line with time and bound"
grep -Eq "^    n[0-9]+ tiles=.* in=a:[0-9a-f]{8},- w=-,w:L0\.q_proj@[0-9a-f]{8} out=a:" "$tmp/out.txt" \
  || fail "no L0.q launch line with layout keys"
for pass in place build tune-tiles kv-resident align-layouts fuse buffers reuse-buffers; do
  grep -Eq "^pass $pass +prefill .* -> .* ms \| decode .* \| moved: " "$tmp/out.txt" || fail "no stats line for $pass"
done

# Switching passes: without fuse every node of the layer is its own dispatch.
"$bin" plan --preset tiny --seq 33 --disable-pass fuse > "$tmp/nofuse.txt" || fail "--disable-pass exited $?"
grep -Eq "^  npu +L0\.q +linear K=128 M=33 N=128 " "$tmp/nofuse.txt" || fail "--disable-pass fuse: L0.q fused"
grep -q "^pass fuse" "$tmp/nofuse.txt" && fail "--disable-pass fuse still ran fuse"
"$bin" plan --preset tiny --seq 33 --passes place,build,buffers --print-after build > "$tmp/pa.txt" \
  || fail "--print-after exited $?"
grep -q "^passes place,build$" "$tmp/pa.txt" || fail "--print-after build does not show the IR after build"
grep -q "^buffers (0, 0 bytes)$" "$tmp/pa.txt" || fail "IR after build already has buffers"
grep -Eq "^  host +embed +embedding " "$tmp/out.txt" || fail "default style: embedding is not a host step"
grep -Eq "^  prefill S=33: .* ms .*dispatches, [0-9]+ per layer$" "$tmp/out.txt" || fail "no prefill total"
grep -Eq "^  decode P=33: .* ms per token .* tok/s" "$tmp/out.txt" || fail "no decode total"
grep -Eq "^  spec xdna2 \(calibration: fit to " "$tmp/out.txt" || fail "plan does not name its calibration"
grep -Eq "^  physical bounds: prefill .* ms \(FLOPs / peak .*decode .* ms per token \(weight bytes / DDR" \
  "$tmp/out.txt" || fail "plan does not print the physical bounds"

# The published-system styles on the same preset: JSON keys the cross-model
# check reads, dispatch counts of the structure, bounds and the spec named.
for style in mlir-air iron; do
  "$bin" plan --preset tiny --style "$style" --seq 64 --json > "$tmp/$style.json" ||
    fail "--style $style exited $?"
  for key in prefill_seconds decode_tokens_per_second prefill_bound_seconds \
             decode_bound_seconds_per_token calibration dispatches_per_layer_prefill; do
    grep -q "\"$key\":" "$tmp/$style.json" || fail "$style JSON lacks $key"
  done
done
if command -v python3 > /dev/null; then
  python3 - "$tmp/mlir-air.json" "$tmp/iron.json" <<'PY' || fail "published styles: wrong structure"
import json, sys
air, iron = (json.load(open(p)) for p in sys.argv[1:3])
assert air["padded_seq"] == 2048 and air["seq"] == 64, air["padded_seq"]
assert air["dispatches_per_layer_prefill"] == 3 and air["dispatches_per_layer_decode"] == 2, air
assert iron["dispatches_per_layer_prefill"] >= 11 and iron["dispatches_per_layer_decode"] >= 11, iron
for j in (air, iron):
    assert j["spec"] == "xdna2" and j["prefill_seconds"] > j["prefill_bound_seconds"] > 0
    assert 1 / j["decode_tokens_per_second"] > j["decode_bound_seconds_per_token"] > 0
where = {s["name"]: s["where"] for s in air["plan"]["decode_steps"]}
assert where["cpu_attention"] == "host" and where["lm_head"] == "npu", where
lm = [s for s in air["plan"]["decode_steps"] if s["name"] == "lm_head"][0]
assert len(lm["launches"]) == 8, lm
PY
fi
"$bin" plan --preset tiny --style mlir-air --seq 64 > "$tmp/air.txt" || fail "mlir-air text exited $?"
grep -Eq "^  prefill rms_gemms_rope +x[0-9]+ +npu 6 launches .* bound " "$tmp/air.txt" ||
  fail "mlir-air: no fused attention-input dispatch: $(head -5 "$tmp/air.txt")"

"$bin" plan --preset tiny --seq 33 --style per-op --json > "$tmp/p.json" || fail "--json exited $?"
for key in preset style seq prefill_seconds decode_seconds_per_token decode_tokens_per_second \
           dispatches_per_layer_prefill dispatches_per_layer_decode dispatches \
           prefill_bound_seconds decode_bound_seconds_per_token pass_stats; do
  grep -q "\"$key\":" "$tmp/p.json" || fail "JSON lacks $key"
done
grep -q '"style": "per-op"' "$tmp/p.json" || fail "JSON style is not per-op"
grep -q '"phase": "decode"' "$tmp/p.json" || fail "JSON dispatches lack the decode phase"
grep -q '"op": "embedding"' "$tmp/p.json" || fail "per-op: embedding is not a dispatch"
if command -v python3 > /dev/null; then
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["seq"]==33 and j["prefill_seconds"]>0 and j["decode_tokens_per_second"]>0, j' \
    "$tmp/p.json" || fail "JSON does not parse or has wrong values"
fi

set +e
"$bin" plan --preset tiny --style fused > /dev/null 2> "$tmp/err.txt"; rc=$?
[ "$rc" -eq 2 ] || fail "bad style: exit $rc, want 2"
grep -q "per-op, default, iron, mlir-air" "$tmp/err.txt" || fail "bad style error does not list the styles"
"$bin" plan --preset tiny --seq 100 --context 64 > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "seq over context: exit $rc, want 2"
"$bin" plan > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "no model: exit $rc, want 2"
"$bin" plan --preset tiny --disable-pass build > /dev/null 2> "$tmp/err.txt"; rc=$?
[ "$rc" -eq 2 ] || fail "disabling a required pass: exit $rc, want 2"
"$bin" plan --preset tiny --passes place,nope > /dev/null 2> "$tmp/err.txt"; rc=$?
[ "$rc" -eq 2 ] || fail "unknown pass: exit $rc, want 2"
grep -q "unknown pass 'nope'" "$tmp/err.txt" || fail "unknown pass not named: $(cat "$tmp/err.txt")"
set -e
echo "plan.sh OK"
