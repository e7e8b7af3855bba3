#!/bin/sh
# Seed a local database with a few items.
set -eu
sqlite3 "${1:-inventory.db}" < db/schema.sql
sqlite3 "${1:-inventory.db}" "INSERT OR IGNORE INTO items VALUES ('BOLT-M6', 'M6 bolt', 12, 5);"
