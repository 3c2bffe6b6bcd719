#!/usr/bin/env bash
# The dmarcd benchmark suite: builds the binary and the load tools, then
# measures each target beside its baseline in one run. Results go to
# stdout and bench/out/. Everything runs on loopback.
#
#   bench/run.sh            # all benchmarks
#   bench/run.sh api        # only the API throughput benchmark
#   DURATION=20s CONNS=32 bench/run.sh api
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out/bin"
go build -o "$out/bin/dmarcd" .
go build -o "$out/bin/bare" ./bench/bare
go build -o "$out/bin/apibench" ./bench/apibench
what=${1:-all}
stamp=$(date -u +%Y%m%dT%H%M%SZ)

if [[ $what == all || $what == api ]]; then
  echo "== API: GET /api/v1/domains (dmarcd vs bare net/http handler, same bytes)"
  "$out/bin/apibench" -dmarcd "$out/bin/dmarcd" -bare "$out/bin/bare" \
    -domains 50 -c "${CONNS:-16}" -d "${DURATION:-10s}" -rounds "${ROUNDS:-2}" \
    -out "$out/api-$stamp.json"
  echo
fi

if [[ $what == all || $what == go ]]; then
  echo "== Go benchmarks (in-process)"
  go test -run '^$' -bench . -benchmem -count "${COUNT:-1}" \
    ./httpapi/ ./store/ ./dmarc/ ./geo/ | tee "$out/go-$stamp.txt"
fi
