#!/usr/bin/env bash
# tessera serve on a tiny deployment, driven with curl over loopback: both
# endpoints streaming and not, usage and predicted NPU time in every answer,
# 8 concurrent clients all answered in full, malformed requests refused with a
# 4xx and an OpenAI error object, a client that disconnects mid-stream stops
# its generation and the server answers the next request; a tampered
# deployment is refused as by `tessera run`.
# usage: serve.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$tmp/serve.err" ] && tail -5 "$tmp/serve.err" >&2
  exit 1
}
command -v curl > /dev/null || fail "curl is needed (scripts/setup installs it)"
command -v python3 > /dev/null || fail "python3 is needed to read the JSON answers"

# A tiny model with a ChatML template (no default system message), deployed.
"$bin" synth --preset tiny --out "$tmp/m" --seed 3 > /dev/null 2>&1 || fail "synth"
cat > "$tmp/m/tokenizer_config.json" << 'JSON'
{"chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"}
JSON
d="$tmp/dep"
"$bin" deploy -m "$tmp/m" --out "$d" --seq 9 --tokens 4 > /dev/null 2> "$tmp/deploy.err" ||
  fail "deploy exited $?: $(tail -3 "$tmp/deploy.err")"

start() {  # start the server on a free port (--port 0) and read the port it prints
  "$bin" serve "$d" --port 0 > "$tmp/serve.out" 2> "$tmp/serve.err" &
  pid=$!
  for _ in $(seq 100); do
    port=$(sed -nE 's|.*http://127\.0\.0\.1:([0-9]+).*|\1|p' "$tmp/serve.out")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2> /dev/null || fail "serve exited: $(cat "$tmp/serve.err")"
    sleep 0.1
  done
  fail "serve printed no port"
}
start
url="http://127.0.0.1:$port"

# check FILE PYTHON-EXPR: the JSON in FILE satisfies EXPR (j is the document).
check() {
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$1" "$2" ||
    fail "$2 does not hold for $(cat "$1")"
}
post() {  # post PATH BODY OUT: prints the HTTP status
  curl -s -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$url$1"
}

[ "$(curl -s -o "$tmp/h.json" -w '%{http_code}' "$url/health")" = 200 ] || fail "/health"
check "$tmp/h.json" 'j["status"] == "ok"'
curl -s "$url/v1/models" > "$tmp/models.json" || fail "/v1/models"
check "$tmp/models.json" 'j["object"] == "list" and j["data"][0]["id"] == "m"'

usage='j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] > 0
  and j["tessera"]["npu_predicted_prefill_ms"] > 0'

# Non-streaming, both endpoints.
code=$(post /v1/chat/completions '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0}' "$tmp/c.json")
[ "$code" = 200 ] || fail "chat: HTTP $code $(cat "$tmp/c.json")"
check "$tmp/c.json" 'j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] == "assistant"
  and 1 <= j["usage"]["completion_tokens"] <= 8 and j["choices"][0]["finish_reason"] in ("stop", "length")'
check "$tmp/c.json" "$usage"
code=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":0}' "$tmp/t.json")
[ "$code" = 200 ] || fail "completions: HTTP $code $(cat "$tmp/t.json")"
check "$tmp/t.json" 'j["object"] == "text_completion" and isinstance(j["choices"][0]["text"], str)'
check "$tmp/t.json" "$usage"

# Streaming: data: chunks ending in data: [DONE]; the pieces add up to the
# non-streamed text of the same greedy request; usage in the last chunk.
sse_check() {  # sse_check FILE WANT-TEXT-FILE FIELD
  python3 - "$1" "$2" "$3" << 'PY' || fail "stream $1: $(head -c 600 "$1")"
import json, sys
events = [e for e in open(sys.argv[1]).read().split("\n\n") if e.strip()]
assert all(e.startswith("data: ") for e in events), events
assert events[-1] == "data: [DONE]", events[-1]
chunks = [json.loads(e[6:]) for e in events[:-1]]
field = sys.argv[3]
text = "".join(c["choices"][0]["delta"].get("content", "") if field == "delta" else c["choices"][0]["text"]
               for c in chunks)
want = json.load(open(sys.argv[2]))["choices"][0]
want = want["message"]["content"] if field == "delta" else want["text"]
assert text == want, (text, want)
assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
assert chunks[-1]["usage"]["completion_tokens"] >= 1 and chunks[-1]["tessera"]["npu_predicted_ms"] > 0
if field == "delta": assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
PY
}
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0,"stream":true}' "$tmp/cs.txt" > /dev/null
sse_check "$tmp/cs.txt" "$tmp/c.json" delta
post /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"stream":true}' "$tmp/ts.txt" > /dev/null
sse_check "$tmp/ts.txt" "$tmp/t.json" text

# 8 concurrent clients, all answered in full (one Session, queued in order).
clients=()
for i in $(seq 8); do
  stream=$([ $((i % 2)) = 0 ] && echo true || echo false)
  post /v1/completions "{\"prompt\":\"client $i says\",\"max_tokens\":12,\"seed\":$i,\"stream\":$stream}" \
    "$tmp/cc$i.out" > "$tmp/cc$i.code" &
  clients+=($!)
done
wait "${clients[@]}"
for i in $(seq 8); do
  [ "$(cat "$tmp/cc$i.code")" = 200 ] || fail "client $i: HTTP $(cat "$tmp/cc$i.code")"
  if [ $((i % 2)) = 0 ]; then
    tail -c 14 "$tmp/cc$i.out" | grep -q 'data: \[DONE\]' || fail "client $i: stream cut: $(tail -c 200 "$tmp/cc$i.out")"
  else
    check "$tmp/cc$i.out" 'j["usage"]["completion_tokens"] >= 1'
  fi
done

# Malformed requests: the right 4xx and an OpenAI error object.
refused() {  # refused PATH BODY STATUS CODE
  local got
  got=$(post "$1" "$2" "$tmp/e.json")
  [ "$got" = "$3" ] || fail "$2: HTTP $got, want $3: $(cat "$tmp/e.json")"
  check "$tmp/e.json" "isinstance(j['error']['message'], str) and j['error']['type'] and j['error']['code'] == '$4'"
}
refused /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}' 400 invalid_json
refused /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":"8"}' 400 invalid_type
refused /v1/completions '{"prompt":"a","temperature":"hot"}' 400 invalid_type
refused /v1/completions '{"prompt":"a","n":3}' 400 unsupported_value
refused /v1/completions '{"prompt":"a","model":"gpt-4"}' 404 model_not_found
refused /v1/nowhere '{}' 404 not_found
long=$(python3 -c 'print("{\"prompt\": [" + ",".join(["7"] * 2049) + "]}")')
refused /v1/completions "$long" 400 context_length_exceeded
python3 -c 'print("{\"prompt\": \"" + "a" * (1 << 20) + "\"}")' > "$tmp/big.json"
refused /v1/completions "@$tmp/big.json" 413 payload_too_large

# A client that disconnects mid-stream: its generation stops, the next request
# is answered.
curl -s --max-time 1 -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"a long story","max_tokens":2000,"ignore_eos":true,"stream":true}' "$url/v1/completions" > "$tmp/cut.txt"
[ $? = 28 ] || fail "the long stream ended within 1 s: the disconnect was not tested"
grep -q '^data: {' "$tmp/cut.txt" || fail "no chunk before the disconnect"
code=$(post /v1/completions '{"prompt":"after","max_tokens":3}' "$tmp/after.json")
[ "$code" = 200 ] || fail "after a disconnect: HTTP $code"
for _ in $(seq 50); do grep -q "client gone" "$tmp/serve.err" && break; sleep 0.1; done
grep -q "client gone, generation stopped" "$tmp/serve.err" || fail "no sign the generation stopped: $(tail -5 "$tmp/serve.err")"

kill "$pid"; wait "$pid"; rc=$?
pid=""
[ "$rc" = 0 ] || fail "serve exited $rc on SIGTERM"
grep -q "tessera serve: stopped" "$tmp/serve.out" || fail "no clean stop"

# serve refuses what run refuses: a tampered artifact, a non-deployment.
echo '{}' > "$d/model/tokenizer_config.json"
"$bin" serve "$d" --port 0 > /dev/null 2> "$tmp/x.err"; rc=$?
[ "$rc" = 3 ] || fail "serve on a tampered deployment exited $rc, want 3"
grep -q "cannot be trusted: .*model/tokenizer_config.json" "$tmp/x.err" || fail "tamper not named: $(cat "$tmp/x.err")"
"$bin" serve "$tmp/m" --port 0 > /dev/null 2> "$tmp/x.err"; rc=$?
[ "$rc" = 3 ] || fail "serve on a non-deployment exited $rc, want 3"
echo "serve.sh: ok"
