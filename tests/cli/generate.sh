#!/usr/bin/env bash
# tessera generate on a synthetic tiny model: streamed text equals the decoded
# ids, seeds are reproducible, limits hold, and mistakes get one line and the
# exit code of their category (2 usage, 3 bad input).
# usage: generate.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" synth --preset tiny --out "$tmp/m" --seed 3 > /dev/null 2>&1 || fail "synth tiny"

gen() {  # gen NAME args...: stdout to $tmp/NAME.out, stderr to $tmp/NAME.err
  local name="$1"; shift
  "$bin" generate -m "$tmp/m" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" ||
    fail "generate $* exited $?: $(cat "$tmp/$name.err")"
}

# Greedy: deterministic, reports both rates, at most -n tokens.
gen g1 -p "Once upon a time" -n 12 --print-ids
gen g2 -p "Once upon a time" -n 12
cmp -s "$tmp/g1.out" "$tmp/g2.out" || fail "greedy output differs between runs"
grep -Eq "^prompt: [0-9]+ tokens in .* tok/s\); generation: [0-9]+ tokens" "$tmp/g1.err" ||
  fail "no rates on stderr: $(cat "$tmp/g1.err")"
n=$(sed -nE 's/.*generation: ([0-9]+) tokens.*/\1/p' "$tmp/g1.err")
[ "$n" -le 12 ] || fail "generated $n tokens with -n 12"
grep -q "stopped at EOS" "$tmp/g1.err" || [ "$n" -eq 12 ] || fail "stopped early without EOS"

# What was streamed piece by piece is exactly the decoded ids (no split UTF-8).
ids=$(sed -n 's/^ids: //p' "$tmp/g1.err")
[ -n "$ids" ] || fail "no ids printed"
"$bin" tokenize -m "$tmp/m" --decode "$ids" --no-special > "$tmp/decoded" 2>&1 ||
  fail "tokenize --decode $ids"
cmp -s "$tmp/g1.out" "$tmp/decoded" || fail "streamed '$(cat "$tmp/g1.out")' != decoded '$(cat "$tmp/decoded")'"

# Sampling: the same seed gives the same text.
gen s1 -p "The" -n 16 --temperature 1.2 --top-k 40 --top-p 0.95 --seed 7
gen s2 -p "The" -n 16 --temperature 1.2 --top-k 40 --top-p 0.95 --seed 7
cmp -s "$tmp/s1.out" "$tmp/s2.out" || fail "seeded sampling differs between runs"

# -n 0 generates nothing.
gen z -p "The" -n 0
[ "$(cat "$tmp/z.out")" = "" ] || fail "-n 0 printed '$(cat "$tmp/z.out")'"
grep -q "generation: 0 tokens" "$tmp/z.err" || fail "-n 0: $(cat "$tmp/z.err")"

expect() {  # expect CODE PATTERN args...: exit code and one matching stderr line
  local code="$1" pattern="$2"; shift 2
  "$bin" generate "$@" > "$tmp/x.out" 2> "$tmp/x.err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "generate $* exited $rc, want $code: $(cat "$tmp/x.err")"
  [ "$(grep -c . "$tmp/x.err")" -eq 1 ] || fail "generate $*: not one line: $(cat "$tmp/x.err")"
  grep -q -- "$pattern" "$tmp/x.err" || fail "generate $*: stderr lacks '$pattern': $(cat "$tmp/x.err")"
}
expect 2 "temperature must be >= 0" -m "$tmp/m" -p hi --temperature -1
expect 2 "top-p must be in (0, 1]" -m "$tmp/m" -p hi --top-p 0
expect 2 "top-k must be >= 0" -m "$tmp/m" -p hi --top-k -3
expect 3 "nowhere" -m "$tmp/nowhere" -p hi
mkdir "$tmp/notok" && cp "$tmp/m/config.json" "$tmp/m/model.safetensors" "$tmp/notok/"
expect 3 "tokenizer.json" -m "$tmp/notok" -p hi
"$bin" generate -p hi > /dev/null 2> "$tmp/x.err"
[ $? -eq 2 ] || fail "missing -m did not exit 2"
head -n 1 "$tmp/x.err" | grep -q -- "--model" || fail "missing -m: $(cat "$tmp/x.err")"
echo "generate: all checks passed"
