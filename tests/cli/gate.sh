#!/usr/bin/env bash
# tessera gate kernels: the phase-1 table, the JSON, and the exit codes (5 when
# any (kernel, shape) fails or has no builder, 2 for bad usage).
# usage: gate.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

set +e
"$bin" gate kernels --preset tiny --seq 9 --json "$tmp/g.json" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
set -e
grep -q "^phase 1 kernel gate: tiny on xdna2, prefill S=9" "$tmp/out.txt" || fail "no header: $(head -3 "$tmp/out.txt")"
for op in linear rmsnorm rope kv_append attention_prefill attention_decode residual_add silu_mul \
          embedding argmax; do
  grep -q " $op " "$tmp/out.txt" || fail "table lacks op $op"
done
[ -s "$tmp/g.json" ] || fail "no JSON written"
grep -q '"gate": "kernels"' "$tmp/g.json" || fail "JSON lacks the gate name"
# Pass and exit 0, or fail with exit 5 and a line naming what failed.
if [ "$rc" -eq 0 ]; then
  grep -q "^PASS: " "$tmp/out.txt" || fail "exit 0 without PASS"
  grep -q '"passed": true' "$tmp/g.json" || fail "exit 0 but JSON says not passed"
elif [ "$rc" -eq 5 ]; then
  grep -q "^FAIL: " "$tmp/out.txt" || fail "exit 5 without FAIL summary"
  grep -Eq "^(FAIL|NO-BUILDER|BUILD-ERROR|RUN-ERROR) (prefill|decode) " "$tmp/out.txt" \
    || fail "exit 5 without a line naming the failing kernel"
  grep -q '"passed": false' "$tmp/g.json" || fail "exit 5 but JSON says passed"
else
  fail "unexpected exit code $rc: $(cat "$tmp/err.txt")"
fi

# Usage errors: both or neither model source, a decode-only length.
set +e
"$bin" gate kernels > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "no model source: exit $rc, want 2"
"$bin" gate kernels --preset tiny -m "$tmp" > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "two model sources: exit $rc, want 2"
"$bin" gate kernels --preset tiny --seq 0 > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "--seq 0: exit $rc, want 2"
# --seq 1 is the first decode step alone: decode rows only, attention over one key.
"$bin" gate kernels --preset tiny --seq 1 > "$tmp/s1.txt" 2>&1 || fail "--seq 1 exited $?"
grep -q "^decode  attn_out .*attention_decode T=1 " "$tmp/s1.txt" || fail "--seq 1 has no T=1 decode attention"
if grep -q "^prefill" "$tmp/s1.txt"; then fail "--seq 1 ran a prefill pass"; fi
"$bin" gate kernels --preset no-such-model > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "unknown preset: exit $rc, want 2"
set -e
echo "gate.sh: ok"
