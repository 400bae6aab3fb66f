#!/usr/bin/env bash
# Prints its arguments, one line, as the demo of a runnable plugin.
printf 'demo_echo:'
for arg in "$@"; do
    printf ' %s' "$arg"
done
printf '\n'
