#!/usr/bin/env bash
# Puts tiny-Shakespeare at data/tinyshakespeare/input.txt (or $1): copies it from the shared
# folder when there is one, else downloads it from its public address; checks its sha256.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-data/tinyshakespeare/input.txt}"
url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
expected="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
mkdir -p "$(dirname "$target")"
# Copies that may already be on this machine (the project's shared folder).
local_copy=""
for candidate in ../shared/data/tinyshakespeare/input.txt; do
  [ -f "$candidate" ] && local_copy="$candidate" && break
done
if [ ! -f "$target" ]; then
  if [ -n "$local_copy" ]; then
    cp "$local_copy" "$target"
  elif ! curl -fsSL --max-time 120 -o "$target.download" "$url"; then
    rm -f "$target.download"
    echo "fetch_data: cannot download $url (no network?)." >&2
    echo "fetch_data: put a copy at $target, or pass --data FILE to folio." >&2
    exit 1
  else
    mv "$target.download" "$target"
  fi
fi
actual=$(sha256sum "$target" | cut -d' ' -f1)
if [ "$actual" != "$expected" ]; then
  echo "fetch_data: $target has sha256 $actual, expected $expected" >&2
  exit 1
fi
echo "$target"
