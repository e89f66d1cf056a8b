#!/usr/bin/env bash
# Staging deploy without cron: migrate, restart every process, then recover listeners at once.
#
#   deploy/staging-deploy.sh            # systemd units from deploy/systemd/
#   RESTART_CMD="honcho restart" deploy/staging-deploy.sh
#   DRY_RUN=1 deploy/staging-deploy.sh  # print the steps only
#
# After the restart, listeners whose worker died without writing their shutdown are closed as
# Abandoned (exit 14, not an operator Stop) by a sweep with a zero threshold, and one dispatch
# starts every match that still needs a listener, instead of waiting for the stale threshold.
# (A gracefully stopped listener worker already recorded exit 14 and released its locks.)
set -euo pipefail

KICKOFF_HOME="${KICKOFF_HOME:-$(cd "$(dirname "$0")/.." && pwd)}"
KICKOFF="${KICKOFF:-$KICKOFF_HOME/.venv/bin/kickoff}"
UNITS="${UNITS:-kickoff-worker kickoff-listener-worker kickoff-scheduler kickoff-launcher kickoff-srsim}"
RESTART_CMD="${RESTART_CMD:-}"

run() {
  echo "+ $*"
  if [ -z "${DRY_RUN:-}" ]; then "$@"; fi
}

echo "==> 1/4 migrate"
run "$KICKOFF" db migrate

echo "==> 2/4 restart processes"
if [ -n "$RESTART_CMD" ]; then
  run sh -c "$RESTART_CMD"
else
  for unit in $UNITS; do
    run systemctl restart "$unit.service"
  done
fi

echo "==> 3/4 abandon listeners the restart left open"
run "$KICKOFF" listeners sweep --heartbeat-stale-seconds 0

echo "==> 4/4 dispatch"
run "$KICKOFF" listeners dispatch

echo "==> deployed"
