#!/usr/bin/env bash
# libFuzzer runs of every fuzz target (fuzz/, issue 13) under ASan + UBSan,
# each for SECONDS (default 600) or, with RUNS set, a fixed number of inputs
# (the CI smoke). Builds build-fuzz with clang (scripts/setup --fuzz installs it),
# starts from the seed corpus tests/data/fuzz/<target>/ (read-only; new inputs
# go to build-fuzz/corpus/<target>/), and prints executions and coverage per
# target. A crash leaves build-fuzz/crash-<target>-*: copy it into the seed
# corpus once fixed, so it is a regression case of `ctest -L fuzz`.
# usage: bench/fuzz.sh [SECONDS] [target...]    env: RUNS=N, JOBS=N
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config tokenizer safetensors_header device_spec gguf)
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup --fuzz installs it)" >&2; exit 2; }
export CCACHE_DIR="${CCACHE_DIR:-/work/.ccache}"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF "${launcher[@]}" > /dev/null
cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"
limit=(-max_total_time="$seconds")
[ -z "${RUNS:-}" ] || limit=(-runs="$RUNS")
printf "%-20s %12s %8s %8s %s\n" target executions cov ft result
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/fuzz-$t.log"
  set +e
  ASAN_OPTIONS=detect_leaks=1 "build-fuzz/fuzz/fuzz_$t" "${limit[@]}" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix="build-fuzz/crash-$t-" -print_final_stats=1 \
    "build-fuzz/corpus/$t" "tests/data/fuzz/$t" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=clean
  if [ "$rc" -ne 0 ]; then result="FINDING (exit $rc, see $log)"; status=1; fi
  printf "%-20s %12s %8s %8s %s\n" "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
exit "$status"
