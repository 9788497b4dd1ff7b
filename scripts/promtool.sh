#!/usr/bin/env bash
# Prometheus' promtool for tests/test_monitoring.py (`promtool check rules`, `promtool test rules`
# on monitoring/), from Debian's prometheus package, at .tools/bin/promtool (git-ignored; nothing
# is installed on the system): scripts/debian-bin.sh.
#
#   scripts/promtool.sh        (make promtool; make check and scripts/suite.py's set-up run it)
#
# Idempotent: exits at once when .tools/bin/promtool runs.
set -euo pipefail
exec "$(dirname "$0")/debian-bin.sh" prometheus promtool
