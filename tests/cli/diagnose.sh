#!/usr/bin/env bash
# The diagnosers through the CLI (pipeline/diagnose.h): a planted numeric
# mutant fails deploy with exit 5 and a failure line naming the likely cause,
# issues.md carries the evidence; a bug no diagnoser models is "unknown".
# usage: diagnose.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

deploy_bug() {  # <dir> <bug>: expects the gate exit code 5
  set +e
  "$bin" deploy --preset tiny --out "$tmp/$1" --seq 9 --tokens 4 --until 3 --plant-bug "$2" > /dev/null 2> "$tmp/$1.err"
  local rc=$?
  set -e
  [ "$rc" -eq 5 ] || fail "$2: exit $rc, want 5: $(tail -2 "$tmp/$1.err")"
}

deploy_bug eps mutant:rmsnorm_eps_x100
grep -q "likely cause: the norm's epsilon or weight is wrong (epsilon x100) \[norm_eps_or_weight\]" "$tmp/eps.err" \
  || fail "eps x100 not named on the failure line: $(cat "$tmp/eps.err")"
grep -q "^- diagnosis, likely cause: .*\[norm_eps_or_weight\] at phase 1 .*evidence: re-running the oracle op with epsilon x100" \
  "$tmp/eps/issues.md" || fail "issues.md has no evidence: $(cat "$tmp/eps/issues.md")"

deploy_bug neg 'w:L0.v_proj@'
grep -q "likely cause: unknown" "$tmp/neg.err" || fail "a negated weight is not unknown: $(cat "$tmp/neg.err")"
grep -q "\[unknown\] at phase 2 node L0.v " "$tmp/neg/issues.md" || fail "issues.md: $(cat "$tmp/neg/issues.md")"
echo ok
