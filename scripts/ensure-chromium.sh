#!/usr/bin/env bash
# Makes sure a Chromium the console's browser tests can drive headless is
# installed, from Debian's packages when it is missing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "Chromium is not installed; run as root, or: sudo apt-get install -y chromium" >&2
  exit 1
fi
echo "installing Chromium from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
