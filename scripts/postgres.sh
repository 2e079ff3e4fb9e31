#!/usr/bin/env bash
# A throwaway PostgreSQL server for the `pg` tests: Debian's postgresql,
# initdb'd under a temporary folder, listening on 127.0.0.1 at a free port,
# trust auth, fsync off (test data only). Installs the package if missing.
#
#   scripts/postgres.sh start DIR   # prints the SQLAlchemy URL on stdout
#   scripts/postgres.sh stop DIR
#
# PostgreSQL refuses to run as root: as root the server runs as the
# `postgres` user (created by the package) through runuser.
# tests/pg/server.py (the `pg_url` fixture) calls this; so can a person:
#   url=$(scripts/postgres.sh start /tmp/pg) && BMAAS_TEST_PG_URL=$url pytest -m pg
set -euo pipefail

cmd=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}

bindir() {
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -z "$found" ] && command -v pg_config >/dev/null 2>&1; then
        found=$(pg_config --bindir)
    fi
    echo "$found"
}

as_server_user() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$cmd" in
start)
    bin=$(bindir)
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "postgres.sh: PostgreSQL is not installed; run as root or apt-get install postgresql" >&2
            exit 1
        fi
        echo "postgres.sh: installing Debian's postgresql" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 && apt-get install -y -qq postgresql >/dev/null
        bin=$(bindir)
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
    fi
    as_server_user "$bin/initdb" -D "$dir/data" -U bmaas --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    # A free port is free when asked, not when the server binds it: on a busy
    # machine (parallel tests, labs) another process can take it in between.
    # That one failure gets a new port, three times at most; any other fails.
    # hwlab's free_port picks below the kernel's ephemeral range, where no
    # outgoing connection takes it meanwhile (without bmaas installed: the OS's pick).
    for attempt in 1 2 3; do
        port=$(python3 -P -c 'from bmaas.hwlab.proxy.stock import free_port; print(free_port())' 2>/dev/null ||
            python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        rm -f "$dir/server.log"
        if as_server_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
            start >/dev/null; then
            break
        fi
        if [ "$attempt" = 3 ] || ! grep -q "Address already in use" "$dir/server.log" 2>/dev/null; then
            cat "$dir/server.log" >&2
            exit 1
        fi
        echo "postgres.sh: port $port was taken before the server bound it; another one" >&2
    done
    echo "$port" >"$dir/port"
    echo "postgresql+psycopg://bmaas@127.0.0.1:$port/postgres"
    ;;
stop)
    bin=$(bindir)
    if [ -d "$dir/data" ]; then
        as_server_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    ;;
*)
    echo "usage: postgres.sh start|stop DIR" >&2
    exit 2
    ;;
esac
