# Register the component topology: api and web are required and owned by
# the lanes that finished them (web by web-fix); docs is optional.
cat > topology.json <<'EOF'
[{"id": "api", "required": true, "description": "HTTP api",
  "owner_lane": "api", "required_checks": ["unit"], "dependencies": [],
  "evidence_refs": [], "coverage_state": "missing"},
 {"id": "web", "required": true, "description": "Web pages",
  "owner_lane": "web-fix", "required_checks": ["unit"],
  "dependencies": ["api"], "evidence_refs": [],
  "coverage_state": "missing"},
 {"id": "docs", "required": false, "description": "User guide",
  "owner_lane": "docs", "required_checks": [], "dependencies": [],
  "evidence_refs": [], "coverage_state": "missing"}]
EOF
bluetape-flow topology-register --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --input topology.json \
  --evidence '[{"kind": "plan", "summary": "component topology approved by the user"}]' \
  --at 2026-07-14T01:23:10Z
