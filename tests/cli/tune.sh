#!/usr/bin/env bash
# tessera tune: the tile search table (chosen options never slower than the
# builder default), its JSON, and exit code 2 without a preset.
# usage: tune.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" tune --preset tiny --seq 9 --json "$tmp/t.json" > "$tmp/out.txt" || fail "tune exited $?"
grep -q "^tile search: tiny on xdna2, S=9" "$tmp/out.txt" || fail "no header: $(head -1 "$tmp/out.txt")"
grep -Eq "^prefill +linear K=128 M=9 N=128 +[0-9]+ +[0-9.]+ +[a-z_]+ +columns=" "$tmp/out.txt" \
  || fail "no prefill linear row with candidates, time, bound and tiles"
grep -Eq "^decode +linear K=128 M=1 N=128 " "$tmp/out.txt" || fail "no decode linear row"
if command -v python3 > /dev/null; then
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "tiny" and j["seq"] == 9, j
for o in j["ops"]:
    assert o["best"]["seconds"] <= o["default"]["seconds"], o
    if "runner_up" in o: assert o["best"]["seconds"] <= o["runner_up"]["seconds"], o
assert any(o["candidates"] > 1 for o in j["ops"]), "no op had more than one candidate"
' "$tmp/t.json" || fail "JSON does not parse or a choice is slower than the default"
fi

set +e
"$bin" tune --seq 9 > /dev/null 2> "$tmp/err.txt"; rc=$?
[ "$rc" -eq 2 ] || fail "no preset: exit $rc, want 2"
echo "tune: ok"
