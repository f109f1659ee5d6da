#!/usr/bin/env bash
# Serve the demo on embedded defaults (no API key, no manual step): virtualenv, packages,
# database, demo data and admin user, then a task worker (document ingestion) and an ASGI server
# on 127.0.0.1:${PORT:-8000}. Ctrl-C stops both.
# Safe to re-run: data in var/ is kept and the printed admin password stays the same.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_venv runtime
.venv/bin/python manage.py advisors_setup --admin-password-file var/admin-password

# One worker beside the server runs uploads' ingestion jobs (manage.py db_worker; more workers,
# on any machine with the same DATABASE_URL, share the queue). At nice 10, so on a shared machine
# the server's requests come first (benchmarks/README.md, section 8). Its log: var/worker.log.
nice -n 10 .venv/bin/python manage.py db_worker --no-reload --no-startup-delay \
    >> var/worker.log 2>&1 &
worker=$!
stop_worker() {
    kill -TERM "$worker" 2>/dev/null || true  # it finishes the job it runs, then exits
    wait "$worker" 2>/dev/null || true
}
trap stop_worker EXIT

address=127.0.0.1:${PORT:-8000}
echo "Serving http://$address/ (admin: http://$address/admin/) with a task worker (log:"
echo "var/worker.log); press Ctrl-C to stop."
.venv/bin/python manage.py runserver --noreload "$address"
