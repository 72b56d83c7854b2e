# api, docs-2 and web-fix finish; each lists the paths it changed, which
# must lie inside its write scope. (The evidence is compact JSON, i.e.
# canonical, because lane-resolve hashes web-fix's.)
for spec in "api agent-1 src/api/routes.rs" "docs-2 agent-4 docs/guide.md" \
  "web-fix agent-5 src/web/index.html"; do
  read -r lane agent path <<< "$spec"
  cat > "done-$lane.json" <<EOF
[{"kind":"test","summary":"$lane: tests passed"}]
EOF
  bluetape-flow lane-complete --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id "$lane" \
    --agent-id "$agent" --at 2026-07-14T01:15:00Z \
    --evidence "done-$lane.json" --changed-paths "[\"$path\"]"
done
