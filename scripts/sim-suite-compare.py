#!/usr/bin/env python3
"""Runs `loadmgr simulate --json` (the default suite) with two loadmgr binaries, 7 times each, interleaved,
and prints the median wall time of each, their ratio, and a Markdown table of every run's metrics, before
and after. Usage: scripts/sim-suite-compare.py BASE_BINARY NEW_BINARY"""
import json, subprocess, sys, time, statistics
base, new = sys.argv[1], sys.argv[2]
def run(b):
    t=time.perf_counter(); out=subprocess.run([b,"simulate","--json"],capture_output=True,text=True,check=True).stdout; return time.perf_counter()-t, json.loads(out)
times={base:[],new:[]}; res={}
for i in range(7):
    for b in (base,new):
        dt,j=run(b); times[b].append(dt); res[b]=j
for b in (base,new):
    ts=sorted(times[b]); print(b, "median %.3f s, min %.3f, max %.3f"%(statistics.median(ts),ts[0],ts[-1]))
r=[statistics.median(times[new])/statistics.median(times[base])]
print("ratio new/base %.3f"%r[0])
def key(run): return (run["scenario"], run["strategy"])
B={key(x):x["metrics"] for x in res[base]["runs"]}; N={key(x):x["metrics"] for x in res[new]["runs"]}
def conv(v): return "never" if v is None else "%dm%02ds"%(v//60, v%60)
print("| scenario | strategy | converge before → after | moves | ping-pong | avg spread | overload b-min | splits |")
print("|---|---|---|---|---|---|---|---|")
for k in B:
    b,n=B[k],N.get(k,{})
    print("| %s | %s | %s → %s | %d → %d | %d → %d | %.1f → %.1f | %.1f → %.1f | %d → %d |"%(k[0],k[1],conv(b["convergenceSeconds"]),conv(n.get("convergenceSeconds")),b["moves"],n["moves"],b["pingPongMoves"],n["pingPongMoves"],b["avgSpread"],n["avgSpread"],b["overloadedBrokerMinutes"],n["overloadedBrokerMinutes"],b["splits"],n["splits"]))
