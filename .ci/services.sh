#!/usr/bin/env bash
# Make sure the services the tests use are up: PostgreSQL (127.0.0.1:5432), MariaDB
# (127.0.0.1:3306), Redis (127.0.0.1:6379) and, where it is installed, RabbitMQ
# (127.0.0.1:5672; no test uses it yet).  Each one that is installed but down is
# started and waited for (at most WAIT seconds).
#
# Under A2A_REQUIRE_SERVICES=1 (.ci/run sets it) the run fails when PostgreSQL,
# MariaDB or Redis is not installed or does not answer, or an installed RabbitMQ
# does not answer: their tests would fail anyway, and this says why first.
# Otherwise it only reports, and those tests skip, saying why.
set -uo pipefail

WAIT=${WAIT:-30}
case ${A2A_REQUIRE_SERVICES:-} in ""|0) REQUIRED=0 ;; *) REQUIRED=1 ;; esac

say() { echo "services: $*"; }

wait_for() {  # wait_for NAME COMMAND...: until COMMAND succeeds, WAIT seconds at most
  local name=$1; shift
  local i
  for ((i = 0; i < WAIT * 5; i++)); do
    if "$@" >/dev/null 2>&1; then say "$name is up"; return 0; fi
    sleep 0.2
  done
  say "$name did not answer within ${WAIT}s"
  return 1
}

ensure() {  # ensure NAME INSTALLED UP START: start NAME if it is down, and wait for it
  local name=$1 installed=$2 up=$3 start=$4
  if ! "$installed"; then say "$name is not installed"; return 1; fi
  if "$up"; then say "$name is up"; return 0; fi
  say "starting $name"
  "$start" || say "$name did not start"
  wait_for "$name" "$up"
}

postgres_installed() { command -v pg_isready >/dev/null 2>&1 && [ -d /etc/postgresql ]; }
postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432; }
postgres_start() {
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
}

mariadb_installed() { [ -x /usr/sbin/mariadbd ] && command -v mariadb-admin >/dev/null 2>&1; }
mariadb_up() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1; }
mariadb_start() { start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd; }

redis_installed() { command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
redis_start() {
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
}

rabbitmq_installed() { command -v rabbitmq-server >/dev/null 2>&1; }
# The AMQP port accepts connections once the broker has booted.
rabbitmq_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
rabbitmq_start() { rabbitmq-server -detached; }

missing=()
ensure PostgreSQL postgres_installed postgres_up postgres_start || missing+=(PostgreSQL)
ensure MariaDB mariadb_installed mariadb_up mariadb_start || missing+=(MariaDB)
ensure Redis redis_installed redis_up redis_start || missing+=(Redis)
if rabbitmq_installed; then
  ensure RabbitMQ rabbitmq_installed rabbitmq_up rabbitmq_start || missing+=(RabbitMQ)
else
  say "RabbitMQ is not installed (no test uses it yet)"
fi

if ((${#missing[@]})); then
  if ((REQUIRED)); then
    say "not available: ${missing[*]}; A2A_REQUIRE_SERVICES=1: failing" >&2
    exit 1
  fi
  say "not available: ${missing[*]}; their tests will skip, saying why"
fi
exit 0
