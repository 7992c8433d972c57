#!/bin/sh
# Create and migrate Temporal's two PostgreSQL databases (history + visibility).
#
# Runs in temporalio/admin-tools (same version as the server) as the one-shot
# `temporal-schema` service before the server starts.  Safe to re-run on every
# `docker compose up`: `setup-schema -v 0.0` leaves a database that already has
# a newer version alone and `update-schema` applies only the missing versions,
# so a server upgrade (new admin-tools + server tags) migrates in place.
# The password travels as SQL_PASSWORD in the environment, never on a command line.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS (database host) is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
PORT="${DB_PORT:-5432}"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

sqltool() {
    temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$PORT" -u "$POSTGRES_USER" "$@"
}

tries=0
until nc -z "$POSTGRES_SEEDS" "$PORT"; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
        echo "PostgreSQL at $POSTGRES_SEEDS:$PORT did not answer within 120 s" >&2
        exit 1
    fi
    echo "waiting for PostgreSQL at $POSTGRES_SEEDS:$PORT"
    sleep 2
done

for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
    db="${pair%%:*}"
    schema="${pair##*:}"
    # An existing database makes `create` fail; a real failure surfaces in the next step.
    sqltool --db "$db" create || echo "database $db already exists"
    sqltool --db "$db" setup-schema -v 0.0
    sqltool --db "$db" update-schema -d "$SCHEMA_DIR/$schema/versioned"
    echo "database $db is at the schema of this admin-tools release"
done
