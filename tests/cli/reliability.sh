#!/usr/bin/env bash
# Issue 13's eleven cases, replayed on the tiny synthetic model: crafted
# inputs, tampering, kills and races must each end in one clear error line with
# the documented exit code (2 usage, 3 bad input, 4 limit, 5 gate), or in a
# correct result - never exit 70, a signal, a hang or a silent wrong answer.
# Every case runs (a failure does not stop the others) and says its number.
# usage: reliability.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
bg=""
trap '[ -n "$bg" ] && kill -9 $bg 2>/dev/null; rm -rf "$tmp"' EXIT
failed=0
case_no=0
fail() { echo "FAIL case $case_no: $*" >&2; failed=1; return 1; }

# t CMD...: runs with a hang guard; stdout/stderr to $tmp/out, $tmp/err; sets rc.
t() {
  timeout -s KILL 60 "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ "$rc" -ne 137 ] || { fail "'$*' hung (killed after 60 s)"; return 1; }
  [ "$rc" -ne 70 ] && [ "$rc" -le 128 ] || { fail "'$*' exited $rc: $(tail -2 "$tmp/err")"; return 1; }
  return 0
}
# expect CODE PATTERN CMD...: exit CODE, and exactly one error line, matching PATTERN
# (progress lines may precede it).
expect() {
  local code="$1" pattern="$2"
  shift 2
  t "$@" || return 1
  [ "$rc" -eq "$code" ] || { fail "'$*' exited $rc, want $code: $(tail -2 "$tmp/err")"; return 1; }
  local lines
  lines="$(grep -c '^tessera: ' "$tmp/err")"
  [ "$lines" -eq 1 ] || { fail "'$*' printed $lines error lines: $(cat "$tmp/err")"; return 1; }
  grep '^tessera: ' "$tmp/err" | grep -q -- "$pattern" ||
    { fail "'$*': error lacks '$pattern': $(grep '^tessera: ' "$tmp/err")"; return 1; }
}
ok() { t "$@" || return 1; [ "$rc" -eq 0 ] || { fail "'$*' exited $rc: $(tail -2 "$tmp/err")"; return 1; }; }

# Sets byte pairs of a file at an offset (a bf16 value, little-endian).
poke() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
fsize() { stat -c %s "$1"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# The model: tiny, 2 layers (fast), its own directory per case where it is edited.
"$bin" synth --preset tiny --layers 2 --out "$tmp/m" --seed 1 > /dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
D=(--seq 5 --tokens 3 --eval-tokens 8)
deploy_ok() { ok "$bin" deploy "$@" "${D[@]}"; }
gen() { "$bin" run "$1" -p "Once upon a time" -n 4 2> /dev/null; }
# A model copy whose final norm (the last tensor of the file) gets one bf16 value.
edited_model() {
  cp -r "$tmp/m" "$1"
  poke "$1/model.safetensors" $(($(fsize "$1/model.safetensors") - 2)) "$2"
}

# 1. The source changes one tensor and is redeployed into the same directory:
#    the packed weights are rebuilt from it (equal to a fresh deployment's), and
#    run generates what the fresh deployment generates.
case_no=1
cp -r "$tmp/m" "$tmp/m1"
deploy_ok -m "$tmp/m1" --out "$tmp/d1"
poke "$tmp/m1/model.safetensors" $(($(fsize "$tmp/m1/model.safetensors") - 2)) '\x40\x40'
deploy_ok -m "$tmp/m1" --out "$tmp/d1"
deploy_ok -m "$tmp/m1" --out "$tmp/d1f" --fresh
cmp -s "$tmp/d1/weights.safetensors" "$tmp/d1f/weights.safetensors" ||
  fail "redeploy after a source change kept stale packed weights"
[ "$(gen "$tmp/d1")" = "$(gen "$tmp/d1f")" ] || fail "run differs from a fresh deployment of the same source"

# 2a. A redeploy that fails a gate (exit 5) leaves nothing run will use.
case_no=2
deploy_ok -m "$tmp/m" --out "$tmp/d2"
expect 5 "phase 2 (block)" "$bin" deploy -m "$tmp/m" --out "$tmp/d2" "${D[@]}" --fresh --plant-bug 'w:L0.v_proj@'
expect 3 "cannot be trusted" "$bin" run "$tmp/d2" -p hi -n 2
# 2b. A redeploy stopped after phase 0 by a source change (--until 0, what a
#     kill after phase 0 leaves): the later phases no longer vouch for it.
edited_model "$tmp/m2" '\x40\x40'
deploy_ok -m "$tmp/m2" --out "$tmp/d2b"
poke "$tmp/m2/model.safetensors" $(($(fsize "$tmp/m2/model.safetensors") - 2)) '\x00\x3f'
ok "$bin" deploy -m "$tmp/m2" --out "$tmp/d2b" "${D[@]}" --until 0
expect 3 "run: " "$bin" run "$tmp/d2b" -p hi -n 2
# 2c. A real kill (SIGKILL) while a phase runs: run refuses, a resume completes.
#     (The kill may land just after a phase finished: then only the resume is checked.)
"$bin" deploy -m "$tmp/m" --out "$tmp/d2c" --seq 5 --tokens 24 > /dev/null 2>&1 &
bg=$!
seen=0
for _ in $(seq 1 300); do
  if grep -q '"status": "running"' "$tmp/d2c/manifest.json" 2> /dev/null && [ -f "$tmp/d2c/phase0.json" ]; then
    seen=1
    kill -9 "$bg" 2> /dev/null
    break
  fi
  sleep 0.02
done
wait "$bg" 2> /dev/null
bg=""
[ "$seen" -eq 1 ] || fail "no phase was seen running in manifest.json (a phase must be written 'running' before it runs)"
if grep -q '"status": "running"' "$tmp/d2c/manifest.json" 2> /dev/null; then
  expect 3 "interrupted" "$bin" run "$tmp/d2c" -p hi -n 2
fi
ok "$bin" deploy -m "$tmp/m" --out "$tmp/d2c" --seq 5 --tokens 24 --eval-tokens 8
ok "$bin" run "$tmp/d2c" -p hi -n 2

# 2d. A plan file overwritten with garbage: run reports the broken manifest
#     check (it runs beside the plan loading), not what the parser made of it.
deploy_ok -m "$tmp/m" --out "$tmp/d2d" --fresh
printf 'not a plan\n' > "$tmp/d2d/plan_final.txt"
expect 3 "cannot be trusted: .*plan_final.txt" "$bin" run "$tmp/d2d" -p hi -n 2

# 3. run checks the tokenizer, and a manifest edited to vouch for an edited
#    config is caught by run and by a resumed deploy.
case_no=3
deploy_ok -m "$tmp/m" --out "$tmp/d3"
cp -r "$tmp/d3" "$tmp/d3t"
echo >> "$tmp/d3t/model/tokenizer.json"  # still a valid, equivalent tokenizer: but not what was deployed
expect 3 "model/tokenizer.json" "$bin" run "$tmp/d3t" -p hi -n 2
old=$(sha "$tmp/d3/model/config.json")
sed -i 's/"rms_norm_eps": [0-9.e-]*/"rms_norm_eps": 0.5/' "$tmp/d3/model/config.json"
sed -i "s/$old/$(sha "$tmp/d3/model/config.json")/g" "$tmp/d3/manifest.json"
expect 3 "manifest.json is not trusted" "$bin" run "$tmp/d3" -p hi -n 2
deploy_ok -m "$tmp/m" --out "$tmp/d3"
grep -q '^phase 0 oracle *passed' "$tmp/out" || fail "resumed deploy trusted the edited config: $(cat "$tmp/out")"
[ "$(sha "$tmp/d3/model/config.json")" = "$old" ] || fail "the edited config.json survived a redeploy"

# 4. A corrupt tokenizer fails deploy in phase 0 (exit 3), with report.json
#    and issues.md saying where and why.
case_no=4
cp -r "$tmp/m" "$tmp/m4"
sed -i 's/"merges"/"merges_broken"/' "$tmp/m4/tokenizer.json"
expect 3 "tokenizer.json" "$bin" deploy -m "$tmp/m4" --out "$tmp/d4" "${D[@]}"
grep -q '"failure": "phase 0 (oracle): .*tokenizer.json' "$tmp/d4/report.json" 2> /dev/null ||
  fail "report.json does not name phase 0 and the tokenizer"
grep -q "FAILED" "$tmp/d4/issues.md" 2> /dev/null || fail "issues.md does not record the failure"

# 5. Tokenizer ids beyond vocab_size are refused when the tokenizer is loaded.
case_no=5
cp -r "$tmp/m" "$tmp/m5"
sed -i '0,/"added_tokens": \[/s//"added_tokens": [{"id": 700, "content": "<zz>", "special": true},/' \
  "$tmp/m5/tokenizer.json"
expect 3 "token id 700" "$bin" inspect "$tmp/m5"
expect 3 "token id 700" "$bin" generate -m "$tmp/m5" -p hi -n 2
expect 3 "token id 700" "$bin" deploy -m "$tmp/m5" --out "$tmp/d5" "${D[@]}"

# 6. Non-finite weights are refused at load, naming the tensor and the index.
case_no=6
edited_model "$tmp/m6" '\x80\x7f'  # +Inf in the final norm
expect 3 "tensor 'model.norm.weight' element \[127\] .* is +Inf" "$bin" generate -m "$tmp/m6" -p hi -n 4
cp -r "$tmp/m" "$tmp/m6n"
poke "$tmp/m6n/model.safetensors" $(($(fsize "$tmp/m6n/model.safetensors") / 2 / 2 * 2)) '\xc0\x7f'  # a NaN mid-file
expect 3 "element .* is NaN" "$bin" deploy -m "$tmp/m6n" --out "$tmp/d6" "${D[@]}"

# 7. Absurd sizes are refused before anything is allocated.
case_no=7
cp -r "$tmp/m" "$tmp/m7"
sed -i 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 1000000000/' "$tmp/m7/config.json"
expect 3 "num_hidden_layers 1000000000 exceeds" "$bin" inspect "$tmp/m7"
# (5,200 tokens on a 2,048-position model; 50,000 would need 10 GB of attention scores)
expect 4 "context full" "$bin" generate -m "$tmp/m" -p "$(yes 'a b' | head -n 2600 | tr '\n' ' ')" -n 2

# 8. generate honours max_position_embeddings: a long prompt is refused, a huge
#    -n stops at the last position.
case_no=8
cp -r "$tmp/m" "$tmp/m8"
sed -i 's/"max_position_embeddings": [0-9]*/"max_position_embeddings": 48/' "$tmp/m8/config.json"
expect 4 "max_position_embeddings 48" "$bin" generate -m "$tmp/m8" -p "$(yes 'a b' | head -n 40 | tr '\n' ' ')" -n 2
if ok "$bin" generate -m "$tmp/m8" -p "Once upon a time" -n 1000000000000000000 --print-ids; then
  grep -q "stopped at EOS\|context full (48 positions)" "$tmp/err" || fail "-n 1e18: $(cat "$tmp/err")"
fi

# 9. One writer per directory: a second deploy (and a run) while one deploys
#    get a clear error; the first completes.
case_no=9
"$bin" deploy -m "$tmp/m" --out "$tmp/d9" --seq 5 --tokens 24 > /dev/null 2>&1 &
bg=$!
for _ in $(seq 1 300); do grep -q '"running"' "$tmp/d9/manifest.json" 2> /dev/null && break; sleep 0.02; done
expect 2 "being written by another tessera deploy" "$bin" deploy -m "$tmp/m" --out "$tmp/d9" "${D[@]}"
expect 2 "being written by another tessera deploy" "$bin" run "$tmp/d9" -p hi -n 2
wait "$bg" || fail "the first deploy failed"
bg=""
ok "$bin" run "$tmp/d9" -p hi -n 2

# 10. Options are checked before any work, and a phase that fails writes report.json.
case_no=10
expect 2 "need 2099 positions" "$bin" deploy -m "$tmp/m" --out "$tmp/d10" --seq 2000 --tokens 100
[ ! -e "$tmp/d10/phase0.json" ] || fail "phase 0 ran before the options were checked"
mkdir -p "$tmp/d10b" && echo "mine" > "$tmp/d10b/notes.txt"
expect 2 "not a deployment" "$bin" deploy -m "$tmp/m" --out "$tmp/d10b" "${D[@]}"

# 11. --plant-bug is honoured when resuming a passed directory.
case_no=11
deploy_ok -m "$tmp/m" --out "$tmp/d11"
expect 5 "phase 2 (block): L0.v" "$bin" deploy -m "$tmp/m" --out "$tmp/d11" "${D[@]}" --plant-bug 'w:L0.v_proj@'
deploy_ok -m "$tmp/m" --out "$tmp/d11"
ok "$bin" run "$tmp/d11" -p hi -n 2

[ "$failed" -eq 0 ] || exit 1
echo "reliability.sh: ok"
