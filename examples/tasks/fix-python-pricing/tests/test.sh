#!/bin/bash
# Verifier for fix-python-pricing. Like Terminal-Bench tests it runs from the
# image WORKDIR (/app/project) and refuses to run from /.
if [ "$PWD" = "/" ]; then
  echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile before running this script."
  exit 1
fi
mkdir -p /logs/verifier
python3 -m unittest discover -s tests -t . -v 2>&1; visible=$?
python3 /tests/test_hidden.py -v 2>&1; hidden=$?
untouched=0
if ! sha256sum --quiet -c /tests/visible-tests.sha256; then echo "FAIL the existing tests were modified"; untouched=1; fi
if [ $visible -eq 0 ] && [ $hidden -eq 0 ] && [ $untouched -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
