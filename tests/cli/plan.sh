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
grep -Eq "^  npu +L0\.q +linear K=128 M=33 N=128 .*us\)? (overhead|compute|stream|dma|ddr|fill_drain)$" \
  "$tmp/out.txt" || fail "no L0.q prefill dispatch line with time and bound"
grep -Eq "^  host +embed +embedding " "$tmp/out.txt" || fail "default style: embedding is not a host step"
grep -Eq "^  prefill S=33: .* ms .*dispatches, [0-9]+ per layer$" "$tmp/out.txt" || fail "no prefill total"
grep -Eq "^  decode P=33: .* ms per token .* tok/s" "$tmp/out.txt" || fail "no decode total"

"$bin" plan --preset tiny --seq 33 --style per-op --json > "$tmp/p.json" || fail "--json exited $?"
for key in preset style seq prefill_seconds decode_seconds_per_token decode_tokens_per_second \
           dispatches_per_layer_prefill dispatches_per_layer_decode dispatches; do
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
grep -q "per-op, default" "$tmp/err.txt" || fail "bad style error does not list the styles"
"$bin" plan --preset tiny --seq 100 --context 64 > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "seq over context: exit $rc, want 2"
"$bin" plan > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "no model: exit $rc, want 2"
set -e
echo "plan.sh OK"
