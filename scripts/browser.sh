#!/usr/bin/env bash
# A headless browser for the review page's test (tests/test_review.py): Debian's chromium,
# installed through apt-get when missing and this runs as root. Never fails: without a
# browser that test skips and says why.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "setup: installing chromium (headless browser for the review page's test)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
    >/dev/null 2>&1 || echo "setup: could not install chromium; the browser test will skip" >&2
fi
exit 0
