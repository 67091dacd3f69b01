#!/usr/bin/env bash
# Bad paths, files and flags for synth/inspect: one clear line and the exit code
# of the category (2 usage, 3 bad input).
# usage: errors_model.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN -- command...: exit code CODE, one non-empty stderr line
# matching PATTERN.
expect() {
  local code="$1" pattern="$2"
  shift 3
  "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, expected $code; stderr: $(cat "$tmp/stderr")"
  local lines
  lines="$(grep -c . "$tmp/stderr")"
  [ "$lines" -eq 1 ] || fail "'$*' printed $lines stderr lines: $(cat "$tmp/stderr")"
  grep -q -- "$pattern" "$tmp/stderr" || fail "'$*' stderr lacks '$pattern': $(cat "$tmp/stderr")"
}

# CLI11's own parse errors: exit 2, the first line names the problem (CLI11
# adds a "Run with --help" hint line).
expect_parse_error() {
  local pattern="$1"
  shift 2
  "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "'$*' exited $rc, expected 2; stderr: $(cat "$tmp/stderr")"
  head -n 1 "$tmp/stderr" | grep -q -- "$pattern" || fail "'$*' stderr: $(cat "$tmp/stderr")"
}

expect 3 "$tmp/nowhere" -- "$bin" inspect "$tmp/nowhere"
expect_parse_error "--no-such-flag" -- "$bin" inspect "$tmp" --no-such-flag
expect_parse_error "--out" -- "$bin" synth --preset tiny
expect_parse_error "--layers" -- "$bin" synth --preset tiny --out "$tmp/x" --layers 0
expect 2 "unknown preset 'nope'" -- "$bin" synth --preset nope --out "$tmp/x"
expect 2 "exactly one of" -- "$bin" synth --out "$tmp/x"

"$bin" synth --preset tiny --out "$tmp/m" --seed 1 > /dev/null 2>&1 || fail "synth tiny"
expect 3 "config.json" -- "$bin" inspect "$tmp"  # a directory without config.json

# Truncated weights: the error names the file and the tensor cut short.
cp -r "$tmp/m" "$tmp/t"
size=$(stat -c %s "$tmp/t/model.safetensors")
truncate -s $((size - 100)) "$tmp/t/model.safetensors"
expect 3 "model.safetensors: tensor 'model.norm.weight'" -- "$bin" inspect "$tmp/t"

# A config missing a field names the field and the file.
cp -r "$tmp/m" "$tmp/c"
grep -v '"intermediate_size"' "$tmp/m/config.json" > "$tmp/c/config.json"
expect 3 "config.json: required field 'intermediate_size' is missing" -- "$bin" inspect "$tmp/c"

# Unknown architecture lists the supported ones.
sed 's/LlamaForCausalLM/GPT2LMHeadModel/' "$tmp/m/config.json" > "$tmp/c/config.json"
expect 3 "unsupported architecture 'GPT2LMHeadModel' (supported: LlamaForCausalLM" -- \
  "$bin" inspect "$tmp/c"
echo OK
