#!/usr/bin/env bash
# Host-speed work (issue 16) must not change a single result: deploys of the
# tiny model and of two presets cut to 2 layers, then a greedy `run`, must give
# the same tokens, the same predicted NPU times and the same phase-gate figures
# as the golden recorded from the code before that work. Everything in
# report.json is compared except host wall times and paths; the run's text and
# its predicted times are compared exactly.
# Regenerate (only after an intended numerical change):
#   TESSERA_UPDATE_GOLDEN=1 bash tests/cli/bitexact_slow.sh build/cli/tessera .
# usage: bitexact_slow.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
src="$2"
golden="$src/tests/data/golden/bitexact"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }

# Host-side fields differ run to run; the deployment path differs per run.
normalize() {  # normalize REPORT.json > OUT
  python3 - "$1" <<'PY'
import json, sys
def clean(o):
    if isinstance(o, dict):
        return {k: clean(v) for k, v in o.items() if "host" not in k and k != "source"}
    if isinstance(o, list):
        return [clean(v) for v in o]
    return o
print(json.dumps(clean(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
}

# The run's timing line without its host seconds: "host 0.20 s" differs per run.
run_line() {  # run_line DIR > OUT: generated text, then the predicted figures
  "$bin" run "$1" -p "Once upon a time" -n 8 > "$tmp/run.out" 2> "$tmp/run.err" ||
    fail "run $1 exited $?: $(cat "$tmp/run.err")"
  cat "$tmp/run.out"
  sed -E 's/host [0-9.]+ s(\/token)?/host -/g' "$tmp/run.err"
}

check() {  # check NAME deploy-args...
  local name="$1"; shift
  local d="$tmp/$name"
  "$bin" deploy --out "$d" --json "$@" > "$tmp/$name.json" 2> "$tmp/$name.err" ||
    fail "deploy $name ($*) exited $?: $(tail -3 "$tmp/$name.err")"
  { normalize "$tmp/$name.json"; run_line "$d"; } > "$tmp/$name.got" || fail "normalize $name"
  if [ -n "${TESSERA_UPDATE_GOLDEN:-}" ]; then
    mkdir -p "$golden" && cp "$tmp/$name.got" "$golden/$name.txt"
    return
  fi
  [ -s "$golden/$name.txt" ] || fail "missing $golden/$name.txt (run with TESSERA_UPDATE_GOLDEN=1)"
  diff -u "$golden/$name.txt" "$tmp/$name.got" > "$tmp/$name.diff" ||
    fail "$name differs from the golden (first lines):$(echo; head -40 "$tmp/$name.diff")"
}

check tiny --preset tiny --seq 9 --tokens 4
check smollm2-135m-l2 --preset smollm2-135m --layers 2 --seq 9 --tokens 4
check llama-3.2-1b-l2 --preset llama-3.2-1b --layers 2 --seq 9 --tokens 4

# The comparison itself must catch a change: one predicted time nudged in
# the last printed digit is a failure.
sed -E '0,/"predicted_seconds": [0-9]/s/("predicted_seconds": [0-9.e-]*[0-9])/\11/' \
  "$golden/tiny.txt" > "$tmp/planted"
cmp -s "$tmp/planted" "$golden/tiny.txt" && fail "could not plant a change in the golden copy"
diff -q "$tmp/planted" "$tmp/tiny.got" > /dev/null && fail "a changed predicted time went unnoticed"
echo "bit-identical: tiny, smollm2-135m (2 layers), llama-3.2-1b (2 layers)"
