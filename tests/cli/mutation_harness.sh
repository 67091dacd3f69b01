#!/usr/bin/env bash
# bench/mutation.sh scores only gate failures (issue 12): run against a fake
# tessera whose mutant deploys fail a gate (exit 5, a failing check in
# report.json), run out of disk (exit 3, no report), crash (SIGSEGV) or pass,
# the harness must count one catch and one survivor, show the other two as
# ERR rows outside the score, and exit 3 (an incomplete score), not 0 or 1.
# The row of a catch names the failing check with the most values outside
# the BF16 reference (not the first one, nor a passing one) and the diagnoser
# named for the first failure.
# usage: mutation_harness.sh <tessera (unused)> <source-dir>
set -euo pipefail
src="$2"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cat > "$out/fake" <<'EOF'
#!/usr/bin/env bash
[ "$1" = presets ] && { echo "tiny-qwen3: qk_norm tied"; exit 0; }
dir="" bug=""
while [ $# -gt 0 ]; do
  case "$1" in --out) dir="$2"; shift ;; --plant-bug) bug="$2"; shift ;; esac
  shift
done
mkdir -p "$dir"
pass='{"phase": 1, "status": "passed", "checks": [], "details": {}}'
fail='{"phase": 1, "status": "failed", "checks": [{"name": "q bf16_reference", "passed": false, "message": "12 outside | likely cause: the weight is laid out transposed [transposed_weight]", "metrics": {"bf16_ref_outside": 12}}, {"name": "q_rot:far-positions [rope M=9]", "passed": false, "message": "300 outside", "metrics": {"bf16_ref_outside": 300}}, {"name": "k", "passed": true, "message": "", "metrics": {"bf16_ref_outside": 900}}], "details": {}}'
case "$bug" in
  "") echo "{\"phases\": [$pass]}" > "$dir/report.json"; exit 0 ;;
  mutant:linear_truncate) echo "{\"phases\": [$fail]}" > "$dir/report.json"; exit 5 ;;
  mutant:gemv_bf16_accum) echo "tessera: error: writing $dir/phase0.json: No space left on device" >&2; exit 3 ;;
  mutant:silu_slope_2pct) kill -SEGV $$ ;;
  *) echo "{\"phases\": [$pass]}" > "$dir/report.json"; exit 0 ;;
esac
EOF
chmod +x "$out/fake"
set +e
bash "$src/bench/mutation.sh" -b "$out/fake" -p tiny-qwen3 -o "$out/runs" \
  -m "linear_truncate gemv_bf16_accum silu_slope_2pct rope_truncate" > "$out/table.txt" 2>&1
rc=$?
set -e
cat "$out/table.txt"
[ "$rc" -eq 3 ]
grep -Eq "^linear_truncate +tiny-qwen3 +yes +1 +q bf16_reference" "$out/table.txt"
# the strongest failing check, not the first one nor a passing one
grep -Eq "^linear_truncate .*\|\| most outside the BF16 reference: q_rot:far-positions 300 \|\| diagnosis: transposed_weight$" "$out/table.txt"
grep -Eq "^gemv_bf16_accum +tiny-qwen3 +ERR3 .*No space left" "$out/table.txt"
grep -Eq "^silu_slope_2pct +tiny-qwen3 +ERR139 .*killed by signal 11" "$out/table.txt"
grep -Eq "^rope_truncate +tiny-qwen3 +NO " "$out/table.txt"
grep -q "mutation score tiny-qwen3: 1 / 2 (50 %)" "$out/table.txt"
grep -q "harness errors tiny-qwen3: 2 run(s)" "$out/table.txt"
