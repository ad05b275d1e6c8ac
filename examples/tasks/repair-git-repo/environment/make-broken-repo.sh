#!/bin/bash
# Builds the task's repository: history on main, two commits made on a
# detached HEAD and then abandoned, then a crash (empty HEAD, stale index.lock).
set -euo pipefail
dir=$1
mkdir -p "$dir" && cd "$dir"
export GIT_AUTHOR_DATE="2024-03-01T10:00:00Z" GIT_COMMITTER_DATE="2024-03-01T10:00:00Z"
git init -q .
cat > index.html <<'HTML'
<html>
<head><title>Example Co.</title><link rel="stylesheet" href="style.css"></head>
<body>
<nav><a href="index.html">Home</a> <a href="about.html">About</a></nav>
<h1>Welcome to Example Co.</h1>
<footer>&copy; 2023 Example Co.</footer>
</body>
</html>
HTML
printf 'body { font-family: sans-serif; }\n' > style.css
printf '<html><body><h1>About us</h1><p>We make examples.</p></body></html>\n' > about.html
git add . && git commit -q -m "Initial site"
printf 'footer { color: #666; }\n' >> style.css
git commit -q -am "Style the footer"

# work on a detached HEAD
git checkout -q --detach
export GIT_AUTHOR_DATE="2024-03-02T10:00:00Z" GIT_COMMITTER_DATE="2024-03-02T10:00:00Z"
printf '<html><body><h1>Contact</h1><p>Write to hello@example.com</p></body></html>\n' > contact.html
sed -i 's|<a href="about.html">About</a>|<a href="about.html">About</a> <a href="contact.html">Contact</a>|' index.html
git add contact.html index.html && git commit -q -m "Add contact page"
sed -i 's|&copy; 2023|\&copy; 2024|' index.html
git commit -q -am "Fix footer year"

# back to main, which moves on
git checkout -q main
export GIT_AUTHOR_DATE="2024-03-03T10:00:00Z" GIT_COMMITTER_DATE="2024-03-03T10:00:00Z"
printf '<html><body><h1>About us</h1><p>We make examples since 1999.</p></body></html>\n' > about.html
git commit -q -am "Update about page"

# the crash
: > .git/HEAD
: > .git/index.lock
