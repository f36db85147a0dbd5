#!/usr/bin/env bash
# The guest's idle polling, for latency benchmarks on a virtual machine.
#
#   bench/idle-poll.sh show          # the cpuidle driver and its parameters
#   bench/idle-poll.sh fix [NS]      # poll up to NS (default 400000) before halting, never shrink
#   bench/idle-poll.sh restore       # the values `fix` found (saved beside it)
#
# Why: on a guest whose idle driver is `haltpoll` (firecracker, KVM), an
# idle virtual CPU polls for a window before it halts, and the window grows
# and shrinks with the idle periods it sees (`guest_halt_poll_*`, Linux's
# Documentation/virt/guest-halt-polling.rst). A message that reaches a
# halted virtual CPU waits for the host to wake it. Left to adapt, the
# window makes latency bimodal by the machine's recent history, not by
# what runs: the toy's calls every 150 µs came back in a median of 41–119
# µs, 25–37 with a fixed 400 µs window (5 rounds alternated, BENCHMARKS.md,
# issue #15, tenth part). A fixed window that outlasts the pauses measures
# Courier, not the window. Writing the parameters needs root; `fix` burns an idle CPU for up
# to NS after each idle period.
set -euo pipefail

params=/sys/module/haltpoll/parameters
saved=${XDG_RUNTIME_DIR:-/tmp}/courier-idle-poll.saved

show() {
    local driver
    driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)
    echo "cpuidle driver: $driver"
    if [ -d "$params" ]; then
        for p in "$params"/*; do echo "$(basename "$p"): $(cat "$p")"; done
    fi
}

need_haltpoll() {
    if [ ! -w "$params/guest_halt_poll_ns" ]; then
        echo "$(basename "$0"): no writable $params (driver: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none); root?)" >&2
        exit 1
    fi
}

case "${1:-show}" in
    show) show ;;
    fix)
        need_haltpoll
        ns=${2:-400000}
        case "$ns" in '' | *[!0-9]*) echo "$(basename "$0"): NS must be nanoseconds, got '$ns'" >&2; exit 2 ;; esac
        # Keep the first values found: a second `fix` does not overwrite them.
        [ -e "$saved" ] || printf '%s %s\n' "$(cat "$params/guest_halt_poll_ns")" \
            "$(cat "$params/guest_halt_poll_allow_shrink")" >"$saved"
        echo N >"$params/guest_halt_poll_allow_shrink"
        echo "$ns" >"$params/guest_halt_poll_ns"
        show
        ;;
    restore)
        need_haltpoll
        if [ ! -e "$saved" ]; then
            echo "$(basename "$0"): nothing saved at $saved (no \`fix\` since boot?)" >&2
            exit 1
        fi
        read -r ns shrink <"$saved"
        echo "$ns" >"$params/guest_halt_poll_ns"
        echo "$shrink" >"$params/guest_halt_poll_allow_shrink"
        rm -f "$saved"
        show
        ;;
    *) echo "usage: $(basename "$0") show | fix [NS] | restore" >&2; exit 2 ;;
esac
