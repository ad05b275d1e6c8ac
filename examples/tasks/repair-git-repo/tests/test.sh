#!/bin/bash
# Verifier for repair-git-repo. Runs in the image WORKDIR (/app/site).
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
fail=0
ok()  { echo "PASS $1"; }
bad() { echo "FAIL $1"; fail=1; }

[ "$PWD" = /app/site ] || bad "cwd is $PWD, expected /app/site"
if git rev-parse --git-dir >/dev/null 2>&1; then ok "git works"; else bad "git rev-parse fails"; fi
[ "$(git symbolic-ref -q HEAD 2>/dev/null)" = refs/heads/main ] && ok "HEAD is main" || bad "HEAD is not refs/heads/main"
[ ! -e .git/index.lock ] && ok "no index.lock" || bad ".git/index.lock still exists"
git fsck --no-dangling >/tmp/fsck.txt 2>&1 && ok "fsck" || { bad "git fsck"; cat /tmp/fsck.txt; }

subjects=$(git log --format=%s main 2>/dev/null)
for s in "Initial site" "Style the footer" "Update about page" "Add contact page" "Fix footer year"; do
  grep -qxF "$s" <<<"$subjects" && ok "main has '$s'" || bad "main lacks '$s'"
done
old=$(git log --format='%H %s' main 2>/dev/null | awk '$2 == "Update" && $3 == "about" {print $1; exit}')
if [ -n "$old" ] && git merge-base --is-ancestor "$old" main; then ok "old main is an ancestor"; else bad "history of main was rewritten"; fi

[ -z "$(git status --porcelain 2>/dev/null)" ] && git status >/dev/null 2>&1 && ok "clean tree" || bad "working tree not clean"
grep -q 'href="contact.html"' index.html 2>/dev/null && ok "index links contact" || bad "index.html lacks the contact link"
grep -q '&copy; 2024 Example Co.' index.html 2>/dev/null && ok "footer year" || bad "footer year not 2024"
grep -q 'hello@example.com' contact.html 2>/dev/null && ok "contact page" || bad "contact.html missing"
grep -q 'since 1999' about.html 2>/dev/null && ok "about page" || bad "about.html lost its update"

if [ $fail -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
