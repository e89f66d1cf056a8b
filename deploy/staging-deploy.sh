#!/usr/bin/env bash
# Staging deploy without cron: check, migrate, restart every process, recover listeners, show the board.
#
#   deploy/staging-deploy.sh                                     # systemd units from deploy/systemd/
#   RESTART_CMD="sudo systemctl restart kickoff.target" deploy/staging-deploy.sh
#   RESTART_CMD="supervisorctl restart kickoff:*" deploy/staging-deploy.sh
#   KICKOFF_ENV_FILE=/srv/kickoff/env deploy/staging-deploy.sh   # settings file (default /etc/kickoff/env)
#   DRY_RUN=1 deploy/staging-deploy.sh                           # print the steps only
#
# (honcho and foreman have no restart command: stop the `honcho start` process and start it
# again yourself, then run this script with RESTART_CMD=true.)
#
# The environment file is loaded first (`set -a; . file; set +a`): KICKOFF_ENV_FILE, else
# /etc/kickoff/env when it exists; variables already set in the caller's environment are
# overwritten by the file. `kickoff check --services` must pass before anything changes.
#
# After the restart, one sweep with the normal threshold closes listeners whose holders are gone
# as Abandoned (exit 14) and one dispatch starts every match that still needs a listener. The
# sweep never uses a zero threshold: that would close healthy listeners (including any started
# after the restart). A gracefully stopped listener worker already recorded exit 14 and released
# its locks, so the dispatch restarts its matches at once. With another listener worker up while
# one stops (run two and restart them one at a time), each of its matches is handed over to that
# worker with well under a second without a stream; a lone listener worker streams on for
# LISTENER_HANDOFF_SECONDS (5 s), then hands its matches off to the next one to start.
set -euo pipefail

KICKOFF_HOME="${KICKOFF_HOME:-$(cd "$(dirname "$0")/.." && pwd)}"
KICKOFF_ENV_FILE="${KICKOFF_ENV_FILE:-}"
if [ -z "$KICKOFF_ENV_FILE" ] && [ -f /etc/kickoff/env ]; then
  KICKOFF_ENV_FILE=/etc/kickoff/env
fi
if [ -n "$KICKOFF_ENV_FILE" ]; then
  if [ ! -r "$KICKOFF_ENV_FILE" ]; then
    echo "environment file $KICKOFF_ENV_FILE is not readable" >&2
    exit 1
  fi
  echo "==> environment from $KICKOFF_ENV_FILE"
  set -a
  # shellcheck disable=SC1090
  . "$KICKOFF_ENV_FILE"
  set +a
fi

KICKOFF="${KICKOFF:-$KICKOFF_HOME/.venv/bin/kickoff}"
UNITS="${UNITS:-kickoff-worker kickoff-listener-worker kickoff-scheduler kickoff-launcher kickoff-srsim kickoff-api}"
RESTART_CMD="${RESTART_CMD:-}"

run() {
  echo "+ $*"
  if [ -z "${DRY_RUN:-}" ]; then "$@"; fi
}

echo "==> 1/6 check services"
run "$KICKOFF" check --services

echo "==> 2/6 migrate"
run "$KICKOFF" db migrate

echo "==> 3/6 restart processes"
if [ -n "$RESTART_CMD" ]; then
  run sh -c "$RESTART_CMD"
else
  for unit in $UNITS; do
    run systemctl restart "$unit.service"
  done
fi

echo "==> 4/6 abandon listeners whose holders are gone"
run "$KICKOFF" listeners sweep

echo "==> 5/6 dispatch"
run "$KICKOFF" listeners dispatch

echo "==> 6/6 listener board"
run "$KICKOFF" listeners status

echo "==> deployed"
