# The digest lane-resolve binds for a lane's evidence: pass the evidence
# the lane recorded (spacing and key order do not matter).
bluetape-flow evidence-digest \
  --evidence '[{"kind": "review", "summary": "web fixed", "exit_status": 0}]'
