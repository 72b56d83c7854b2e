# web-fix completed what web failed: resolve web by it. The evidence binds
# both lanes' evidence by digest: the SHA-256 of its canonical JSON (these
# files are canonical already, so hash them without the final newline).
digest() { printf '%s' "$(cat "$1")" | sha256sum | cut -d' ' -f1; }
failed=$(digest fail-web.json)
fixed=$(digest done-web-fix.json)
cat > resolve-web.json <<EOF
[{"kind": "review", "summary": "web failure", "checksum": "$failed"},
 {"kind": "review", "summary": "web fix", "checksum": "$fixed"}]
EOF
bluetape-flow lane-resolve --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id web \
  --resolution-lane-id web-fix --at 2026-07-14T01:17:00Z \
  --evidence resolve-web.json
