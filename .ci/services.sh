#!/usr/bin/env bash
# Make sure the databases the store tests use are up: PostgreSQL (127.0.0.1:5432),
# MariaDB (127.0.0.1:3306) and Redis (127.0.0.1:6379).  Each one that is installed but
# down is started and waited for (at most WAIT seconds); one that is not installed
# is reported and left out (its tests skip, saying why).  Never fails the run itself.
set -uo pipefail

WAIT=${WAIT:-30}

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

postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432; }
mariadb_up() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

# PostgreSQL
if command -v pg_isready >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  if postgres_up; then
    say "PostgreSQL is up"
  else
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start \
      || say "PostgreSQL did not start"
    wait_for PostgreSQL postgres_up
  fi
else
  say "PostgreSQL is not installed: its tests will skip"
fi

# MariaDB
if [ -x /usr/sbin/mariadbd ] && command -v mariadb-admin >/dev/null 2>&1; then
  if mariadb_up; then
    say "MariaDB is up"
  else
    say "starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd \
      || say "MariaDB did not start"
    wait_for MariaDB mariadb_up
  fi
else
  say "MariaDB is not installed: its tests will skip"
fi

# Redis
if command -v redis-server >/dev/null 2>&1; then
  if redis_up; then
    say "Redis is up"
  else
    say "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      || say "Redis did not start"
    wait_for Redis redis_up
  fi
else
  say "Redis is not installed: its tests will skip"
fi
exit 0
