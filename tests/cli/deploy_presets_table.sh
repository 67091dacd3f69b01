#!/usr/bin/env bash
# bench/deploy_presets.sh checks what issue 9 asks of every deployment and
# prints issue 12's phase-1 z baseline: run against a fake tessera, a
# deployment without phases 4 and 5 or without perf_opt_traj.md must show
# "NO" and make the script exit 1; a complete one shows "yes"; the z column
# takes the largest |z| over the gated phase-1 checks only (a bf16-exact add
# and a path tap with larger z are ignored).
# usage: deploy_presets_table.sh <tessera (unused)> <source-dir>
set -euo pipefail
src="$2"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cat > "$out/fake" <<'EOF'
#!/usr/bin/env bash
preset="" dir=""
while [ $# -gt 0 ]; do
  case "$1" in --preset) preset="$2"; shift ;; --out) dir="$2"; shift ;; esac
  shift
done
mkdir -p "$dir"
chk() {  # name op path z
  echo "{\"name\": \"$1\", \"passed\": true, \"message\": \"\", \"metrics\": {\"bias_z\": 0.5, \"row_slope_z\": $4},
         \"threshold\": {\"op\": \"$2\", \"noise\": {\"enabled\": true, \"path\": $3}}}"
}
p1="{\"phase\": 1, \"status\": \"passed\", \"details\": {}, \"checks\": [$(chk q linear false -2.5), $(chk h_mid residual_add false 9), $(chk L0.q linear true 9)]}"
ph() { echo "{\"phase\": $1, \"status\": \"passed\", \"details\": {}, \"checks\": []}"; }
case "$preset" in
  complete) phases="$(ph 0), $p1, $(ph 2), $(ph 3), $(ph 4), $(ph 5), $(ph 6), $(ph 7)"; touch "$dir/perf_opt_traj.md" ;;
  no-opt) phases="$(ph 0), $p1, $(ph 2), $(ph 3), $(ph 6), $(ph 7)"; touch "$dir/perf_opt_traj.md" ;;
  no-traj) phases="$(ph 0), $p1, $(ph 2), $(ph 3), $(ph 4), $(ph 5), $(ph 6), $(ph 7)" ;;
esac
echo "{\"passed\": true, \"phases\": [$phases]}" | tee "$dir/report.json"
EOF
chmod +x "$out/fake"
run() {
  set +e
  bash "$src/bench/deploy_presets.sh" "$out/fake" "$out/runs" "$@" > "$out/table.txt" 2>&1
  rc=$?
  set -e
  cat "$out/table.txt"
}
run complete:2
[ "$rc" -eq 0 ]
grep -Eq "^complete +2 +pass pass pass pass pass pass pass pass +yes +2\.50 " "$out/table.txt"
run complete:2 no-opt:2
[ "$rc" -eq 1 ]
grep -Eq "^no-opt +2 +pass pass pass pass - - pass pass +NO " "$out/table.txt"
run no-traj:2
[ "$rc" -eq 1 ]
grep -Eq "^no-traj +2 .* +NO " "$out/table.txt"
