#!/bin/bash
# Oracle solution: fix HEAD, drop the stale lock, find the lost commits in the
# HEAD reflog and merge them into main.
set -euo pipefail
cd /app/site
rm -f .git/index.lock
echo 'ref: refs/heads/main' > .git/HEAD
git status --short
lost=$(awk -F'\t' '$2 == "commit: Fix footer year" {split($1, f, " "); print f[2]}' .git/logs/HEAD | tail -n 1)
echo "lost tip: $lost"
git merge --no-edit -m "Merge recovered work (contact page, footer year)" "$lost"
git log --oneline --graph
