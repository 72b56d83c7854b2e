# web-fix completed what web failed: resolve web by it. The evidence binds
# both lanes' evidence by digest; evidence-digest prints it for the
# evidence each lane recorded.
digest() {
  bluetape-flow evidence-digest --evidence "$1" |
    sed -E 's/.*"digest": "([0-9a-f]+)".*/\1/'
}
failed=$(digest fail-web.json)
fixed=$(digest done-web-fix.json)
bluetape-flow lane-resolve --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id web \
  --resolution-lane-id web-fix --at 2026-07-14T01:17:00Z \
  --evidence "[{\"kind\": \"review\", \"summary\": \"web failure\", \"checksum\": \"$failed\"},
    {\"kind\": \"review\", \"summary\": \"web fix\", \"checksum\": \"$fixed\"}]"
