#!/usr/bin/env python3
"""Run the refusals of tests/it/teach.rs (contracts/refusals.md) with the
Python reference (REF=path/to/bluetape-flow.py) and with ours (FLOW=binary);
print SAME when exit status, ok, error, retryable and next_command agree."""
import json, os, subprocess, sys, tempfile, shutil
REF=["python3", os.environ.get("REF", "/work/ref/skills/bluetape-workflow/scripts/bluetape-flow.py")]
OURS=[os.path.abspath(os.environ.get("FLOW", "target/debug/bluetape-flow"))]
def drive(tool):
    base=tempfile.mkdtemp(prefix="o15-")
    os.makedirs(f"{base}/repo/src/api")
    root=f"{base}/state"; owner=f"{root}/handles/main.owner"
    env=dict(os.environ, HOME=base, TZ="UTC")
    def call(args):
        p=subprocess.run(tool+["--state-root",root]+args,capture_output=True,text=True,cwd=base,env=env)
        try: j=json.loads(p.stdout or p.stderr)
        except Exception: j={"raw":p.stdout+p.stderr}
        return p.returncode,j
    def put(name,v):
        open(f"{base}/{name}","w").write(json.dumps(v)); return f"{base}/{name}"
    c,j=call(["init","--workflow-type","A","--repo-root",f"{base}/repo","--owner-file",owner,"--component","api"])
    run=j["run_id"]
    M=lambda cmd,*a: call([cmd,"--run-id",run,"--owner-file",owner,*a])
    R=lambda cmd,*a: call([cmd,"--run-id",run,*a])
    ev=lambda n,k,s: put(n,[{"kind":k,"summary":s}])
    out={}
    M("run-approve","--evidence",ev("a.json","user_approval","ok"))
    M("run-start","--evidence",ev("s.json","plan","start"))
    lane={"lane_id": "api", "agent_id": "agent-1", "assignment": "Build the API","write_scope": ["src/api"], "fallback": "main session","observed_at": "2026-07-14T01:00:00Z","startup_ack_deadline": "2026-07-14T01:00:30Z","command_deadline": "2026-07-14T01:30:00Z"}
    L=put("lane.json",lane); A=ev("as.json","plan","assign")
    M("lane-create","--input",L,"--evidence",A)
    la=lambda at,e,agent="agent-1",lid="api": ["--lane-id",lid,"--agent-id",agent,"--at",at,"--evidence",e]
    sp=ev("sp.json","lifecycle","spawned")
    out["lane_only"]=M("lane-create","--input",put("lo.json",{"lane_id":"api"}),"--evidence",A)
    out["long"]=M("lane-create","--input",put("long.json",dict(lane,lane_id="api-2",assignment="x"*501)),"--evidence",A)
    out["bad_id"]=M("lane-create","--input",put("bad.json",dict(lane,lane_id="api 2")),"--evidence",A)
    out["text_ev"]=M("run-approve","--evidence",f"{base}/user approved")
    out["obj_ev"]=M("lane-create","--input",L,"--evidence",put("o.json",{"kind":"plan","summary":"x"}))
    out["extra_ev"]=M("lane-start",*la("2026-07-14T01:00:05Z",put("x.json",[{"kind":"plan","summary":"x","note":"y"}])))
    out["check_unreg"]=M("check-result","--input",put("c.json",{"component_id":"api","check_id":"unit","passed":True}),"--evidence",ev("ce.json","test","ok"))
    out["dup"]=M("lane-create","--input",L,"--evidence",A)
    out["agent"]=M("lane-start",*la("2026-07-14T01:00:05Z",sp,agent="agent-9"))
    out["ghost"]=M("lane-start",*la("2026-07-14T01:00:05Z",sp,lid="ghost"))
    out["state_lane"]=M("startup-ack",*la("2026-07-14T01:00:10Z",sp))
    out["state_run"]=M("run-approve","--evidence",A)
    out["bad_at"]=M("run-block","--evidence",A,"--reason","r","--at","yesterday")
    out["wf"]=call(["init","--workflow-type","Z","--repo-root",f"{base}/repo","--owner-file",f"{root}/handles/o.owner","--component","api"])
    M("lane-start",*la("2026-07-14T01:00:05Z",sp)); M("startup-ack",*la("2026-07-14T01:00:10Z",ev("ak.json","lifecycle","ack")))
    c,chk=R("liveness-check","--lane-id","api","--at","2026-07-14T01:06:00Z")
    out["envelope"]=M("stall-record",*la("2026-07-14T01:06:00Z",ev("st.json","liveness","quiet")),"--reason","no fresh evidence","--decision",put("env.json",chk))
    import hashlib
    d={"action":chk["action"],"reason":chk["reason"]}
    D=put("d.json",d)
    cs=hashlib.sha256(json.dumps(d,sort_keys=True,separators=(",",":"),ensure_ascii=False).encode()).hexdigest()
    out["freetext"]=M("stall-record",*la("2026-07-14T01:06:00Z",put("b.json",[{"kind":"liveness","summary":"quiet","checksum":cs}])),"--reason","agent is quiet","--decision",D)
    out["lease"]=M("heartbeat","--input",put("beat.json",{"lane_id": "api", "agent_id": "agent-1", "observed_at": "2026-07-14T01:01:00Z","silence_lease_deadline": "2026-07-14T01:11:01Z", "reason": "compiling"}),"--evidence",ev("be.json","log","build"))
    # cli-conventions §5 (DEVIATIONS 90): the literal-word rules, the
    # heartbeat's "nothing new", a wrong state root and a mistyped run id.
    rin=lambda assignment: put("ra.json",{"lane_id": "api", "replacement_lane_id": "api-2", "replacement_agent_id": "agent-2", "decided_at": "2026-07-14T01:40:00Z", "replacement_assignment": assignment, "replacement_write_scope": ["src/api"], "replacement_startup_ack_deadline": "2026-07-14T01:41:00Z", "replacement_command_deadline": "2026-07-14T02:10:00Z"})
    rec=put("rec.json",[{"kind":"recovery","summary":"recovered checkpoint: handlers done"}])
    out["reassign_word"]=M("lane-reassign","--input",rin("Continue the API work"),"--evidence",rec)
    out["reassign_evidence"]=M("lane-reassign","--input",rin("Resume from the recovered checkpoint"),"--evidence",put("rec2.json",[{"kind":"recovery","summary":"state recovered"}]))
    out["interrupt_word"]=M("interrupt-result",*la("2026-07-14T01:40:00Z",ev("tool.json","tool","the agent was stopped")))
    hb=put("hb.json",{"lane_id": "api", "agent_id": "agent-1", "observed_at": "2026-07-14T01:01:00Z","silence_lease_deadline": "2026-07-14T01:05:00Z", "reason": "compiling"})
    hbe=ev("hbe.json","log","compiling")
    M("heartbeat","--input",hb,"--evidence",hbe)
    out["heartbeat_unchanged"]=M("heartbeat","--input",hb,"--evidence",hbe)
    out["no_state_root"]=subprocess_call(tool,["--state-root",f"{base}/nope","verify","--run-id",run],base,env)
    out["not_a_state_root"]=subprocess_call(tool,["--state-root",f"{base}/repo","verify","--run-id",run],base,env)
    for cmd in ("verify","resume-check","rebuild"):
        out["typo_"+cmd]=call([cmd,"--run-id",run+"x"])
    out["typo_run_block"]=call(["run-block","--run-id",run+"x","--owner-file",owner,"--evidence",A,"--reason","r"])
    shutil.rmtree(base)
    return out
def subprocess_call(tool,args,base,env):
    p=subprocess.run(tool+args,capture_output=True,text=True,cwd=base,env=env)
    try: j=json.loads(p.stdout or p.stderr)
    except Exception: j={"raw":p.stdout+p.stderr}
    return p.returncode,j
a=drive(REF); b=drive(OURS)
for k in a:
    if a[k] is None: continue
    ka=(a[k][0],)+tuple(a[k][1].get(x) for x in ("ok","error","retryable","next_command"))
    kb=(b[k][0],)+tuple(b[k][1].get(x) for x in ("ok","error","retryable","next_command"))
    print("SAME" if ka==kb else "DIFF", k, ka, kb if ka!=kb else "", a[k][1].get("message","")[:80])
