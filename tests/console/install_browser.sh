#!/bin/sh
# `make browser`: Debian's Chromium for tests/console, best effort (like `make clients-best-effort`).
# Playwright drives it through executable_path; `playwright install` is never used because its
# CDN is unreachable from CI. When Chromium cannot be had, one line says why, the reason goes to
# .cache/browser/why (the console tests skip with it), and the exit status is still 0.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/../../.cache/browser"
why="$cache/why"
log="$cache/apt.log"
chromium=${KIROD_TEST_CHROMIUM:-/usr/bin/chromium}
APT_TIMEOUT_S=900  # a stalled mirror must not hang `make test` forever

give_up() {
    mkdir -p "$cache"
    printf '%s\n' "$1" >"$why"
    echo "browser: no Chromium, tests/console will skip: $1"
    exit 0
}

if [ -x "$chromium" ]; then
    rm -f "$why"
    exit 0
fi
# A named browser that is missing is a setup mistake apt cannot fix; the tests fail on it.
[ -n "${KIROD_TEST_CHROMIUM:-}" ] && give_up "KIROD_TEST_CHROMIUM=$chromium is not executable"
command -v apt-get >/dev/null 2>&1 || give_up "no apt-get on this machine to install chromium"

if [ "$(id -u)" = 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    as_root="sudo -n"
else
    give_up "not root and \`sudo -n\` is not allowed: run \`apt-get install chromium\` as root"
fi
bounded=""
command -v timeout >/dev/null 2>&1 && bounded="timeout $APT_TIMEOUT_S"

mkdir -p "$cache"
apt() {
    # shellcheck disable=SC2086  # $as_root and $bounded are word lists on purpose
    $as_root $bounded env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$log" 2>&1
}
: >"$log"
echo "browser: installing Debian's chromium (apt log: .cache/browser/apt.log)"
# The package lists may be stale or absent on a fresh machine: update only when needed.
if ! apt install -y -q chromium; then
    apt update -q || true
    if ! apt install -y -q chromium; then
        reason=$(grep -E '^E:' "$log" | tail -n 1)
        [ -n "$reason" ] || reason=$(tail -n 1 "$log")
        give_up "apt-get install chromium failed: $reason"
    fi
fi
[ -x /usr/bin/chromium ] || give_up "apt-get installed chromium but /usr/bin/chromium is missing"
rm -f "$why"
