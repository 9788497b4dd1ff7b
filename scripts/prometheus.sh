#!/usr/bin/env bash
# Prometheus itself and node_exporter for tests/test_watch_prometheus.py (the alert rules and the
# dashboard's queries against the watch's textfile and the engine's /metrics, scraped for real),
# from Debian's prometheus and prometheus-node-exporter packages, at .tools/bin/prometheus and
# .tools/bin/prometheus-node-exporter (git-ignored; nothing is installed on the system):
# scripts/debian-bin.sh.
#
#   scripts/prometheus.sh      (make prometheus; scripts/suite.py's set-up runs it)
#
# Idempotent: exits at once when both run.
set -euo pipefail
here="$(dirname "$0")"
"$here/debian-bin.sh" prometheus prometheus
"$here/debian-bin.sh" prometheus-node-exporter prometheus-node-exporter
