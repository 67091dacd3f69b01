#!/usr/bin/env bash
# tessera deploy + tessera run on the tiny preset: phase lines and PASS, resume,
# a planted bug failing with exit 5 and one line naming phase/tap/metric,
# generation with timing, a tampered artifact refused by run, usage errors.
# usage: deploy.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
d="$tmp/d"

"$bin" deploy --preset tiny --out "$d" --seq 9 --tokens 4 --eval-tokens 8 > "$tmp/out.txt" 2> "$tmp/err.txt" \
  || fail "deploy exit $?: $(tail -3 "$tmp/err.txt")"
for p in "phase 0 oracle" "phase 1 kernels" "phase 2 block" "phase 3 model" "phase 6 integration"; do
  grep -q "^$p " "$tmp/out.txt" || fail "no line for $p: $(cat "$tmp/out.txt")"
done
grep -q "^PASS: tiny deployed to $d" "$tmp/out.txt" || fail "no PASS line"
grep -Eq "^peak RSS [1-9][0-9]* MB \(within budget [1-9][0-9]* MB: 1.5 x [0-9]+ MB of bf16 weights \+ 2048 MB\)$" "$tmp/out.txt" \
  || fail "no peak RSS line within budget: $(tail -2 "$tmp/out.txt")"
for f in manifest.json report.json plan.md plan.txt issues.md weights.safetensors model/config.json; do
  [ -s "$d/$f" ] || fail "missing $f"
done

# Rerun: every phase verified by sha256 and skipped.
"$bin" deploy --preset tiny --out "$d" --seq 9 --tokens 4 --eval-tokens 8 > "$tmp/out2.txt" 2>/dev/null || fail "rerun failed"
[ "$(grep -c "skipped (resumed)" "$tmp/out2.txt")" -eq 8 ] || fail "rerun did not resume: $(cat "$tmp/out2.txt")"

# Generation from the deployment: text on stdout, one timing line on stderr.
"$bin" run "$d" -p "Once upon a time" -n 6 --temperature 0.9 --top-k 40 --seed 7 > "$tmp/run.txt" 2> "$tmp/run.err" \
  || fail "run exit $?: $(cat "$tmp/run.err")"
grep -q "^prompt [0-9]* tokens (bucket [0-9]*); prefill: NPU predicted .* host .*decode: .* stop: " "$tmp/run.err" \
  || fail "no timing line: $(cat "$tmp/run.err")"
"$bin" run "$d" -p "Once upon a time" -n 3 --bucket pow2 > /dev/null 2> "$tmp/run2.err" || fail "pow2 bucket run failed"
grep -q "(bucket 16)" "$tmp/run2.err" || fail "pow2 bucket not used: $(cat "$tmp/run2.err")"
# --profile: a row per kind of launch, then dispatch, plan, rest and the total.
"$bin" run "$d" -p "Once upon a time" -n 4 --profile > /dev/null 2> "$tmp/run3.err" || fail "profile run failed"
for row in q attn_out down logits dispatch plan rest total; do
  grep -qE "^$row +[0-9.]+ +-?[0-9.]+ +-?[0-9.]+ +-?[0-9.]+%$" "$tmp/run3.err" || fail "profile has no '$row' row: $(cat "$tmp/run3.err")"
done

# A planted bug on the device fails a gate: exit 5, one line naming phase, tap and metric.
set +e
"$bin" deploy --preset tiny --out "$tmp/bug" --seq 9 --tokens 4 --plant-bug 'w:L0.v_proj@' > /dev/null 2> "$tmp/bug.err"
rc=$?
set -e
[ "$rc" -eq 5 ] || fail "planted bug: exit $rc, want 5"
grep -q "error: deploy: tiny failed phase 2 (block): L0.v .*cosine" "$tmp/bug.err" || fail "no failure line: $(cat "$tmp/bug.err")"

# A tampered artifact: run refuses it (bad input), deploy redoes the phase.
printf 'x' >> "$d/weights.safetensors"
set +e
"$bin" run "$d" -p "hi" -n 2 > /dev/null 2> "$tmp/t.err"; rc=$?
set -e
[ "$rc" -eq 3 ] || fail "tampered weights: run exit $rc, want 3"
grep -q "sha256" "$tmp/t.err" || fail "tamper message lacks sha256: $(cat "$tmp/t.err")"
"$bin" deploy --preset tiny --out "$d" --seq 9 --tokens 4 --eval-tokens 8 > "$tmp/out3.txt" 2>/dev/null || fail "redo failed"
grep -q "^phase 2 block *passed" "$tmp/out3.txt" || fail "phase 2 not redone: $(cat "$tmp/out3.txt")"
grep -q "weights.safetensors: sha256 mismatch" "$d/issues.md" || fail "issues.md does not say why"

# Usage errors.
set +e
"$bin" deploy --preset tiny > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "no --out: exit $rc, want 2"
"$bin" deploy --preset tiny -m "$tmp" --out "$tmp/x" > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "two model sources: exit $rc, want 2"
"$bin" run "$tmp/nothing" -p hi > /dev/null 2>&1; rc=$?
[ "$rc" -eq 3 ] || fail "run on a non-deployment: exit $rc, want 3"
set -e
echo "deploy.sh: ok"
