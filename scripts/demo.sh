#!/usr/bin/env bash
# Serve the demo on embedded defaults (no API key, no manual step): virtualenv, packages,
# database, demo data and admin user, then an ASGI server on 127.0.0.1:${PORT:-8000}.
# Safe to re-run: data in var/ is kept and the printed admin password stays the same.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ensure_venv runtime
.venv/bin/python manage.py advisors_setup --admin-password-file var/admin-password

address=127.0.0.1:${PORT:-8000}
echo "Serving http://$address/ (admin: http://$address/admin/); press Ctrl-C to stop."
exec .venv/bin/python manage.py runserver --noreload "$address"
