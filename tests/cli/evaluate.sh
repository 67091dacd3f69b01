#!/usr/bin/env bash
# Phase 7 from the CLI on the tiny preset: tessera deploy runs the evaluator
# (64 teacher-forced decode steps) and ends with a verdict in evaluation.md;
# report.html is well-formed XML with no script or network resource; tessera
# evaluate re-runs it standalone; a report.json edited to disagree with its
# phase files fails with exit 5 and a line naming it, and the manifest's
# phase 7 then says failed, so tessera run refuses the deployment.
# usage: evaluate.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
d="$tmp/d"
command -v xmllint > /dev/null || fail "xmllint missing (Debian libxml2-utils; scripts/setup installs it)"

"$bin" deploy --preset tiny --out "$d" --seq 9 --tokens 4 > "$tmp/out.txt" 2> "$tmp/err.txt" \
  || fail "deploy exit $?: $(tail -3 "$tmp/err.txt")"
grep -q "^phase 7 evaluation *passed" "$tmp/out.txt" || fail "no passed phase 7 line: $(cat "$tmp/out.txt")"
grep -q '^\*\*Verdict: PASS' "$d/evaluation.md" || fail "evaluation.md: $(head -5 "$d/evaluation.md")"
grep -q "65 positions (1-token prefill + 64 decode steps)" "$d/evaluation.md" || fail "evaluator decoded fewer than 64 tokens"
xmllint --noout "$d/report.html" || fail "report.html is not well-formed"
! grep -qiE "<script|<link|https?://[a-z]" <(sed 's|http://www.w3.org/[^"]*||g' "$d/report.html") \
  || fail "report.html loads something from outside"

# Standalone, re-deriving everything again: PASS, exit 0.
"$bin" evaluate "$d" --tokens 8 --max-prompt 17 > "$tmp/ev.txt" 2> "$tmp/ev.err" || fail "evaluate exit $?: $(cat "$tmp/ev.err")"
grep -q "^PASS.*: tiny (" "$tmp/ev.txt" || fail "no verdict line: $(cat "$tmp/ev.txt")"
"$bin" run "$d" -p "hello" -n 2 > /dev/null 2>&1 || fail "run refused a deployment evaluate passed"

# A report whose figures disagree with its phase files: FAIL, exit 5, named.
python3 - "$d/report.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for p in j["phases"]:
    if p["phase"] == 3:
        p["details"]["predicted_seconds"] *= 0.5
json.dump(j, open(sys.argv[1], "w"), indent=2)
PY
set +e
"$bin" evaluate "$d" --tokens 4 --max-prompt 17 > "$tmp/bad.txt" 2> "$tmp/bad.err"; rc=$?
set -e
[ "$rc" -eq 5 ] || fail "edited report: exit $rc, want 5"
grep -q "report.json phase 3.*predicted_seconds" "$tmp/bad.err" || fail "no line naming the report: $(cat "$tmp/bad.err")"
grep -q '^\*\*Verdict: FAIL' "$d/evaluation.md" || fail "evaluation.md does not say FAIL"
set +e
"$bin" run "$d" -p "hello" -n 2 > /dev/null 2> "$tmp/run.err"; rc=$?
set -e
[ "$rc" -eq 3 ] || fail "run after a failed evaluation: exit $rc, want 3"

"$bin" evaluate "$tmp/nothing" > /dev/null 2>&1 && fail "evaluate of a non-deployment succeeded"
echo "evaluate.sh: ok"
