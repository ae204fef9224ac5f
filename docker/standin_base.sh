#!/usr/bin/env bash
# Only for a machine that reaches Debian and PyPI mirrors but not Docker Hub: make a stand-in for
# the Dockerfile's base image (python:3.11.11-slim-bookworm) with debootstrap: Debian bookworm's
# Python 3.11 and pip at the paths the official image has, plus this machine's CA certificates
# (an egress proxy's CA must be trusted inside the build). Not the official image: Python 3.11.2.
set -euo pipefail
root=$(mktemp -d)
debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates bookworm "$root" \
  "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
rm -f "$root"/usr/lib/python3.11/EXTERNALLY-MANAGED
ln -sf /usr/bin/python3 "$root"/usr/local/bin/python
ln -sf /usr/bin/pip3 "$root"/usr/local/bin/pip
cp /usr/local/share/ca-certificates/*.crt "$root"/usr/local/share/ca-certificates/ 2>/dev/null || true
chroot "$root" update-ca-certificates
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import - python:3.11.11-slim-bookworm
rm -rf "$root"
