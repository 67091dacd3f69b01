#!/usr/bin/env bash
# Host speed of the functional simulator and of the FP32 oracle on this
# machine (issue 16): for smollm2-135m (the real GGUF when models/ has it,
# else the synthetic preset) and llama-3.2-1b (synthetic preset), prints
# simulator decode and prefill tok/s (host wall time of `tessera run`, not the
# NPU's predicted time), oracle decode tok/s (`tessera generate`), and how far
# one simulated decode token is from one read of the model's bf16 weights at
# this machine's read bandwidth, measured in the same run (bench/membw_bench).
# On a shared machine wall time follows the load, so each row also gives the
# CPU seconds per decode token (user + sys of `run -n TOKENS` minus those of
# `run -n 1`, over the decode steps between them; /usr/bin/time) and the load
# average next to it. The simulator's figures are the medians of three pairs
# of runs.
# usage: bench/host_speed.sh [BUILD_DIR] [OUT_DIR] [LLAMA_LAYERS (0 = all)] [TOKENS]
#   (TOKENS for the simulator's runs; the oracle decodes ORACLE_TOKENS, default
#   128, three times, and reports the median run)
set -uo pipefail
build="${1:-build}"
out="${2:-$(mktemp -d)}"
llama_layers="${3:-0}"
tokens="${4:-16}"
oracle_tokens="${ORACLE_TOKENS:-128}"  # per oracle run (env), median of three runs
src="$(cd "$(dirname "$0")/.." && pwd)"
bin="$build/cli/tessera"
prompt="The quick brown fox jumps over the lazy dog because it was late for dinner"
mkdir -p "$out"
[ -x "$bin" ] || { echo "no $bin: build first" >&2; exit 2; }
[ -x "$build/bench/membw_bench" ] || { echo "no $build/bench/membw_bench: build the bench targets" >&2; exit 2; }

# Median of 5 runs per thread count, then the better thread count: on a
# shared machine single runs scatter, and the ratios below divide by it.
# Read again just before and just after each row's runs: readings of one
# machine minutes apart moved from 33 to 47 GB/s, so a row is judged by the
# mean of the two readings around it, and prints both.
bandwidth() {
  "$build/bench/membw_bench" --benchmark_format=json --benchmark_repetitions=5 \
      --benchmark_report_aggregates_only=true 2> /dev/null | python3 -c '
import json, sys
print(max(b["bytes_per_second"] for b in json.load(sys.stdin)["benchmarks"]
          if b.get("aggregate_name") == "median") / 1e9)'
}
echo "host memory read bandwidth: $(printf %.1f "$(bandwidth)") GB/s (bench/membw_bench, median of 5 runs, the better of 1 and 2 threads; read again just before and just after each row)"
# Whether the two vCPUs are two cores' worth of compute during this run (a
# shared VM's are not always): two-thread figures below scale with it.
if [ -x "$build/bench/cores_bench" ]; then
  scaling=$("$build/bench/cores_bench" --benchmark_format=json --benchmark_repetitions=5 \
              --benchmark_report_aggregates_only=true 2> /dev/null | python3 -c '
import json, sys
m = {b["run_name"]: b["items_per_second"] for b in json.load(sys.stdin)["benchmarks"]
     if b.get("aggregate_name") == "median"}
one = next(v for k, v in m.items() if "/1/" in k)
two = next(v for k, v in m.items() if "/2/" in k)
print(f"{two / one:.2f}")')
  echo "two-thread compute scaling: ${scaling}x (bench/cores_bench, median of 5; 2.0 = two cores, 1.0 = one core's worth)"
fi
printf '%-14s %6s %9s %11s %11s %11s %11s %9s %11s %9s %9s %9s %6s %s\n' model layers "bf16 MB" "sim dec/s" "sim pre/s" \
  "oracle dec/s" "s/tok sim" "x 1 read" "cpu s/tok" "cpu x rd" "orc x rd" "orc x bf" load "GB/s bef/aft"

row() {  # row NAME LAYERS SOURCE-ARGS... : deploy through phase 5 (run needs the final plan), run, generate
  local name="$1" layers="$2"; shift 2
  local dir="$out/$name-$layers"
  local args=(deploy --out "$dir" --until 5 "$@")
  [ "$layers" != "0" ] && args+=(--layers "$layers")
  "$bin" "${args[@]}" > "$dir.deploy.out" 2> "$dir.deploy.err" ||
    { echo "$name: deploy failed: $(tail -2 "$dir.deploy.err")"; return; }
  [ -x /usr/bin/time ] || { echo "no /usr/bin/time (Debian package time)" >&2; return; }
  local gbs_before; gbs_before=$(bandwidth)
  # Three pairs, interleaved: one pair's CPU difference went negative when
  # another tenant's load fell between its two runs; the row takes medians.
  local r
  for r in 1 2 3; do
    /usr/bin/time -f "%U %S" -o "$dir.cpu1.$r" "$bin" run "$dir" -p "$prompt" -n 1 > /dev/null 2> "$dir.run1.err" ||
      { echo "$name: run -n 1 failed: $(tail -2 "$dir.run1.err")"; return; }
    /usr/bin/time -f "%U %S" -o "$dir.cpu.$r" "$bin" run "$dir" -p "$prompt" -n "$tokens" > /dev/null 2> "$dir.run.err.$r" ||
      { echo "$name: run failed: $(tail -2 "$dir.run.err.$r")"; return; }
  done
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  local oracle_src="$dir/source"
  [ -e "$oracle_src" ] || oracle_src="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("source",""))' "$dir/manifest.json" 2> /dev/null)"
  [ -n "$ORACLE_SRC" ] && oracle_src="$ORACLE_SRC"
  # The oracle decodes in milliseconds per token: a 16-token run swung 1.5x
  # between two runs minutes apart on a shared VM, so it gets more tokens and
  # the median of three runs.
  local i
  for i in 1 2 3; do
    "$bin" generate -m "$oracle_src" -p "$prompt" -n "$oracle_tokens" > /dev/null 2> "$dir.gen.err.$i" ||
      echo "$name: oracle generate -m $oracle_src failed: $(tail -1 "$dir.gen.err.$i")" >&2
  done
  "$bin" inspect "$oracle_src" > "$dir.inspect" 2>&1 || echo "$name: inspect $oracle_src failed" >&2
  local gbs_after; gbs_after=$(bandwidth)
  python3 - "$name" "$layers" "$dir" "$gbs_before" "$gbs_after" "$load" <<'PY'
import re, sys
name, layers, d, load = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[6]
bw = (float(sys.argv[4]), float(sys.argv[5]))
gbs = sum(bw) / 2  # the readings just before and just after this row
cpu = lambda f: sum(float(x) for x in open(f).read().split()[-2:])
med = lambda xs: sorted(xs)[len(xs) // 2]
runs = []
for r in (1, 2, 3):
    m = re.search(r"prompt (\d+) tokens .*?host ([0-9.]+) s; decode: (\d+) steps.*?host ([0-9.]+) s/token",
                  open(f"{d}.run.err.{r}").read())
    runs.append((int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))))
n, steps = runs[0][0], runs[0][2]
pre_s, dec_s = med([x[1] for x in runs]), med([x[3] for x in runs])  # the median run of three
def oracle_rate(path):
    gen = open(path).read().strip()
    g = re.search(r"\((\d+\.\d+) tok/s\)(, stopped.*)?$", gen.splitlines()[-1]) if gen else None
    return float(g.group(1)) if g else None
rates = sorted(r for r in (oracle_rate(f"{d}.gen.err.{i}") for i in (1, 2, 3)) if r is not None)
orate = rates[len(rates) // 2] if rates else None  # the median run
oracle = f"{orate:.2f}" if orate else "-"
# The oracle reads its weights as loaded: bf16 / f16 as stored, a GGUF's
# Q4_0 / Q4_1 / Q8_0 blocks as stored (decoded in cache), its other quantized
# types dequantized to f32 (`inspect` prints the loaded bytes per dtype).
loaded = sum(int(b.replace(",", "")) for b in re.findall(r"^bytes \w+\s+([0-9,]+)", open(d + ".inspect").read(), re.M))
oracle_rd = f"{1 / orate / (loaded / (gbs * 1e9)):.2f}" if orate and loaded else "-"
# One decode token reads every weight once (the tied LM head is the table).
bf16 = 2 * int(re.search(r"parameters:\s+([0-9,]+)", open(d + ".inspect").read()).group(1).replace(",", ""))
read_s = bf16 / (gbs * 1e9)
oracle_bf16 = f"{1 / orate / read_s:.2f}" if orate else "-"
f = lambda s: f"{1 / s:.2f}" if s > 0 else "-"
cpu_s = med([cpu(f"{d}.cpu.{r}") - cpu(f"{d}.cpu1.{r}") for r in (1, 2, 3)]) / steps if steps > 0 else 0
print(f"{name:<14} {layers if layers != '0' else 'all':>6} {bf16 / 1e6:9.0f} {f(dec_s):>11} "
      f"{n / pre_s if pre_s > 0 else 0:11.2f} {oracle:>11} {dec_s:11.3f} {dec_s / read_s:9.1f} "
      f"{cpu_s:11.3f} {cpu_s / read_s:9.1f} {oracle_rd:>9} {oracle_bf16:>9} {load:>6} {bw[0]:5.1f}/{bw[1]:<5.1f}")
PY
}

ORACLE_SRC=""
gguf="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$gguf" ]; then
  ORACLE_SRC="$gguf"
  row smollm2-135m 0 -m "$gguf"
else
  row smollm2-135m 0 --preset smollm2-135m
fi
ORACLE_SRC=""
row llama-3.2-1b "$llama_layers" --preset llama-3.2-1b
echo "deployments in $out; 'x 1 read' = simulator host seconds per decode token / (bf16 bytes / bandwidth);"
echo "'cpu s/tok' = CPU seconds per decode token (load-independent), 'cpu x rd' the same over one read;"
echo "'orc x rd' = oracle seconds per decode token over one read of its weights as loaded (a GGUF's Q4_0 / Q4_1 / Q8_0 blocks as stored);"
echo "'orc x bf' = the same over one read of the bf16 weights; load = 1-min load average;"
echo "'GB/s bef/aft' = the bandwidth read just before and just after the row; its ratios divide by their mean"
