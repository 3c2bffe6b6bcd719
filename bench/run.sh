#!/usr/bin/env bash
# The dmarcd benchmark suite: builds the binary and the load tools, then
# measures each target beside its baseline in one run. Results go to
# stdout and bench/out/. Everything runs on loopback.
#
#   bench/run.sh            # all benchmarks
#   bench/run.sh api        # only the API throughput benchmark
#   bench/run.sh smtp       # only SMTP intake over 8 and 64 connections (MAILS=3000 SMTP_CONNS="8 64")
#   bench/run.sh ingest     # only the ingest pipeline, beside encoding/xml and the parse+geo+append floor (INGEST_WORKERS=1024)
#   bench/run.sh import     # dmarcd import offline vs into a running server, which reads the files or gets them handed over (IMPORT_SHAPES=2000x50,20000x5 IMPORT_ROUNDS=3 IMPORT_MODE=all)
#   bench/run.sh storage    # bytes a record on disk after dmarcd import into a running server, and after compact; peak RSS
#                           # (STORAGE_SHAPES=2000x50,20000x5,1x1000000; STORAGE_WAIT_URL/STORAGE_WAIT_FOR: wait for sealing)
#   bench/run.sh failure    # only failure report intake and their summary (FAILURE_MAILS=20000; "forensic" works too)
#   bench/run.sh webhooks   # only webhook delivery through the outbox (HOOK_ALERTS=200 HOOK_CONC=16)
#   bench/run.sh tls        # only TLS reports: parse, import through the pipeline, HTTPS POST (TLS_REPORTS=20000)
#   bench/run.sh web        # every web page's server time (p99) and weight over 1,000 domains, beside the API
#                           # (WEB_LOADS=200 loads a page; WEB_RECORDS=5 records a report, 333 gives issue 9's 10 million;
#                           #  closed days sealed as serve's job leaves them, WEB_SEAL=0: all in the write form)
#   bench/run.sh clickhouse # ClickHouse export of 1M stored records, and ingest with the sink off and on, alternating (CH_RECORDS=1000000 CH_ROUNDS=3)
#   DURATION=20s CONNS=32 bench/run.sh api
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out/bin"
go build -o "$out/bin/dmarcd" .
go build -o "$out/bin/bare" ./bench/bare
go build -o "$out/bin/apibench" ./bench/apibench
go build -o "$out/bin/smtpbench" ./bench/smtpbench
go build -o "$out/bin/ingestbench" ./bench/ingestbench
go build -o "$out/bin/importbench" ./bench/importbench
go build -o "$out/bin/deliverbench" ./bench/deliverbench
go build -o "$out/bin/failurebench" ./bench/failurebench
go build -o "$out/bin/storagebench" ./bench/storagebench
go build -o "$out/bin/chbench" ./bench/chbench
what=${1:-all}
# Every dmarcd the tools start listens for SMTP on a free port, not on the
# default 127.0.0.1:2525, which may be taken on a shared machine.
export DMARCD_SMTP_LISTEN=${DMARCD_SMTP_LISTEN:-127.0.0.1:0}
stamp=$(date -u +%Y%m%dT%H%M%SZ)

if [[ $what == all || $what == api ]]; then
  echo "== API: GET /api/v1/domains (dmarcd vs bare net/http handler, same bytes)"
  "$out/bin/apibench" -dmarcd "$out/bin/dmarcd" -bare "$out/bin/bare" \
    -domains 50 -c "${CONNS:-16}" -d "${DURATION:-10s}" -rounds "${ROUNDS:-2}" \
    -out "$out/api-$stamp.json"
  echo
fi

if [[ $what == all || $what == smtp ]]; then
  for c in ${SMTP_CONNS:-8 64}; do
    echo "== SMTP intake: 5-record report mails over $c connections, each acknowledged once stored (target 2000 mails/s at 64)"
    "$out/bin/smtpbench" -dmarcd "$out/bin/dmarcd" -c "$c" -n "${MAILS:-3000}" \
      -out "$out/smtp-c$c-$stamp.json"
    echo
  done
fi

if [[ $what == all || $what == ingest ]]; then
  echo "== Ingest pipeline: parse + geolocate + dedup + store (fsync'd group commits) vs encoding/xml alone and the parse + geo + append floor"
  "$out/bin/ingestbench" -workers "${INGEST_WORKERS:-1024}" -json "$out/ingest-$stamp.json"
  echo
fi

if [[ $what == all || $what == import ]]; then
  echo "== dmarcd import: offline (baseline) vs into a running server through the admin socket, alternating rounds, medians"
  "$out/bin/importbench" -dmarcd "$out/bin/dmarcd" -shape "${IMPORT_SHAPES:-2000x50,20000x5}" -rounds "${IMPORT_ROUNDS:-3}" -mode "${IMPORT_MODE:-all}" \
    -json "$out/import-$stamp.json"
  echo
fi

if [[ $what == all || $what == storage ]]; then
  echo "== Storage: the data folder's allocated bytes a record after dmarcd import into a running server (idle), stopped, compacted; peak RSS"
  "$out/bin/storagebench" -dmarcd "$out/bin/dmarcd" -shape "${STORAGE_SHAPES:-2000x50,20000x5,1x1000000}" \
    -wait-url "${STORAGE_WAIT_URL:-}" -wait-for "${STORAGE_WAIT_FOR:-}" -json "$out/storage-$stamp.json"
  echo
fi

if [[ $what == all || $what == failure || $what == forensic ]]; then
  echo "== Failure reports: mbox import through the pipeline vs parsing alone; summary endpoint at 100,000 reports vs /healthz"
  "$out/bin/failurebench" -mails "${FAILURE_MAILS:-${FORENSIC_MAILS:-20000}}" -stored "${FAILURE_STORED:-${FORENSIC_STORED:-100000}}" \
    -workers "${INGEST_WORKERS:-256}" -json "$out/failure-$stamp.json"
  echo
fi

if [[ $what == all || $what == webhooks ]]; then
  echo "== Webhook delivery: alerts -> bbolt outbox -> delivery job -> signed HTTPS POSTs, vs the same POSTs straight from the client"
  "$out/bin/deliverbench" -alerts "${HOOK_ALERTS:-200}" -webhooks 25 -c "${HOOK_CONC:-16}" \
    -out "$out/webhooks-$stamp.json"
  echo
fi

if [[ $what == all || $what == tls ]]; then
  echo "== TLS reports (RFC 8460): parse (decoder vs encoding/json), import through the pipeline, HTTPS POST on loopback"
  n=${TLS_REPORTS:-20000}
  go test -run '^$' -bench 'BenchmarkParse$|BenchmarkParseReference$' -benchmem ./dmarc/tlsrpt/ | tee "$out/tls-$stamp.txt"
  go test -run '^$' -bench 'BenchmarkIngestTLS$' -benchtime "${n}x" -benchmem ./ingest/ | tee -a "$out/tls-$stamp.txt"
  go test -run '^$' -bench 'BenchmarkPostTLS$' -benchtime "$((n / 4))x" ./ingest/https/ | tee -a "$out/tls-$stamp.txt"
  awk '
    /^BenchmarkParse-/          { for (i = 1; i < NF; i++) if ($(i+1) == "ns/op") p = $i }
    /^BenchmarkParseReference-/ { for (i = 1; i < NF; i++) if ($(i+1) == "ns/op") r = $i }
    /^BenchmarkIngestTLS-/      { for (i = 1; i < NF; i++) if ($(i+1) == "reports/s") im = $i }
    /^BenchmarkPostTLS-/        { for (i = 1; i < NF; i++) if ($(i+1) == "reports/s") po = $i }
    END {
      printf "parse:  %8.0f ns/report   baseline encoding/json %8.0f ns/report (%.1fx)\n", p, r, (p > 0 ? r / p : 0)
      printf "import: %8.0f reports/s   target 20000 (before: 14388/s, the store benchmark)\n", im
      printf "https:  %8.0f reports/s   target 2000\n", po
    }' "$out/tls-$stamp.txt"
  echo
fi

if [[ $what == all || $what == clickhouse ]]; then
  echo "== ClickHouse export: 1M stored records into a local clickhouse-server (target 200,000 records/s); ingest with the sink on vs off (target within 5 %)"
  if command -v clickhouse-server >/dev/null 2>&1 || [[ -x /usr/sbin/clickhouse-server ]]; then
    "$out/bin/chbench" -records "${CH_RECORDS:-1000000}" -rounds "${CH_ROUNDS:-3}" -json "$out/clickhouse-$stamp.json"
  else
    echo "clickhouse-server not installed: skipped"
  fi
  echo
fi

if [[ $what == all || $what == web ]]; then
  echo "== Web pages: server time (p99 and cold) and weight with assets, 1,000 domains x 30 days, beside GET /api/v1/domains"
  DMARCD_WEB_BENCH_RECORDS="${WEB_RECORDS:-5}" DMARCD_WEB_BENCH_BUSY="${WEB_BUSY_SOURCES:-400}" DMARCD_WEB_BENCH_SEAL="${WEB_SEAL:-1}" \
    go test -run '^$' -bench BenchmarkPages -benchtime "${WEB_LOADS:-200}x" -timeout 60m ./web/ | tee "$out/web-$stamp.txt"
  echo
fi

if [[ $what == all || $what == go ]]; then
  echo "== Go benchmarks (in-process)"
  go test -run '^$' -bench . -benchmem -count "${COUNT:-1}" \
    ./httpapi/ ./store/ ./dmarc/... ./geo/ ./ingest/... ./webhook/... ./worker/ | tee "$out/go-$stamp.txt"
fi
