#!/bin/bash
# Oracle solution: a jq filter; OUTPUT_DIR comes from [solution].env.
set -euo pipefail
cat > /app/transform.sh <<'SH'
#!/bin/sh
exec jq '
  map(select(.active == true) | .team //= "unassigned")
  | group_by(.team)
  | map({
      key: .[0].team,
      value: {
        count: length,
        members: (map(.name) | sort),
        admins: (map(select((.roles // []) | index("admin")) | .email) | sort),
        last_login: (map(.last_login // empty) | max)
      }
    })
  | from_entries
'
SH
chmod +x /app/transform.sh
mkdir -p "$OUTPUT_DIR"
/app/transform.sh < /app/input/users.json > "$OUTPUT_DIR/teams.json"
jq -C 'map_values(.count)' "$OUTPUT_DIR/teams.json"
