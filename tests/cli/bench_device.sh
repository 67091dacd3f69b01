#!/usr/bin/env bash
# tessera device / bench-device: the spec table with sources, the JSON form
# round-tripping through --spec, the microbenchmark table against the published
# figures, the simulator checks, and the exit codes of bad specs.
# usage: bench_device.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" device > "$tmp/dev.txt" || fail "device exited $?"
grep -q "^clock_hz .* yes 1.5e+09..1.8e+09 " "$tmp/dev.txt" || fail "clock_hz row: $(cat "$tmp/dev.txt")"
grep -q "^mem.memory_bytes  *524288  *no " "$tmp/dev.txt" || fail "mem.memory_bytes row"

"$bin" device --spec xdna1 --json > "$tmp/x1.json" || fail "device --json exited $?"
grep -q '"columns": 4' "$tmp/x1.json" || fail "xdna1 JSON lacks 4 columns"
"$bin" device --spec "$tmp/x1.json" > "$tmp/x1.txt" || fail "JSON spec does not load back"
grep -q "^macs_per_cycle_bf16 *128 " "$tmp/x1.txt" || fail "xdna1 MAC rate lost in round trip"

"$bin" device --spec "$src/npu/specs/xdna2-calibrated.json" > "$tmp/cal.txt" ||
  fail "shipped calibrated spec does not load"

"$bin" bench-device > "$tmp/bench.txt" || fail "bench-device exited $?"
for b in gemv_bf16_2048x8192_1col gemv_bf16_2048x8192_8col "gemm_bf16_2048^3_8col" \
         memcpy_8col_2ch_bypass dispatch_4KiB_memcpy; do
  grep -qF "$b" "$tmp/bench.txt" || fail "bench-device lacks $b"
done
grep -qE "^gemm_bf16_2048\^3_8col +2\.23 TF" "$tmp/bench.txt" || fail "GEMM published figure"
[ "$(grep -c ' PASS ' "$tmp/bench.txt")" -eq 4 ] || fail "simulator checks: $(cat "$tmp/bench.txt")"

# xdna1 has 4 columns: the 8-column benchmarks are listed as not applicable.
"$bin" bench-device --spec xdna1 --no-sim > "$tmp/b1.txt" || fail "bench-device xdna1 exited $?"
grep -q "gemv_bf16_2048x8192_8col .*n/a: " "$tmp/b1.txt" || fail "xdna1 8-column row: $(cat "$tmp/b1.txt")"

"$bin" bench-device --no-sim --json --trace-dir "$tmp" > "$tmp/b.json" || fail "--json exited $?"
grep -q '"bound": "compute"\|"bound": "dma"\|"bound": "stream"\|"bound": "ddr"' "$tmp/b.json" ||
  fail "JSON lacks bounds"
grep -q '"traceEvents"' "$tmp/gemv_bf16_2048x8192_1col.trace.json" || fail "trace not written"

"$bin" device --spec "$tmp/none.json" > /dev/null 2> "$tmp/err"
[ $? -eq 3 ] || fail "missing spec file: expected exit 3"
echo '{"clock_hz": 9e9}' > "$tmp/bad.json"
"$bin" bench-device --spec "$tmp/bad.json" > /dev/null 2> "$tmp/err"
[ $? -eq 3 ] || fail "out-of-range spec: expected exit 3"
grep -q "clock_hz" "$tmp/err" || fail "out-of-range error does not name the field: $(cat "$tmp/err")"
echo PASS
