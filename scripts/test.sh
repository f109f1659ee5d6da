#!/usr/bin/env bash
# Run the whole test suite with lint: system packages, Redis, virtualenv, ruff, pytest.
# Extra arguments go to pytest (e.g. ./scripts/test.sh -m "not slow" -x).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

# Debian packages the tests use: Chromium for browser tests, Redis for the channel layer.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "Installing ${missing[*]} with apt-get"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "warning: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    fi
fi

redis_answers() {
    local reply=
    { exec 3<>/dev/tcp/127.0.0.1/6379; } 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    read -r -t 2 reply <&3 || true
    exec 3>&-
    [[ $reply == +PONG* ]]
}
if ! redis_answers; then
    echo "Starting redis-server on 127.0.0.1:6379"
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no
    for _ in $(seq 50); do redis_answers && break; sleep 0.1; done
fi

ensure_venv dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # strict, on advisors_app/core (pyproject.toml)
exec .venv/bin/pytest "$@"
