#!/usr/bin/env python3
"""callsites.py DIR KO TARGET...: executions per exchange of each call site in KO (a module,
disassembled with objdump -dr) whose relocation names one of TARGET (substrings), in the
window of DIR (as ibcount.py); the caller demangled."""
import sys, re, collections, bisect, subprocess
sys.argv, args = sys.argv[:1], sys.argv[1:]
import ibcount
d, ko, targets = args[0], args[1], args[2:]
fs = ibcount.snapshots(d)
tbs = [ibcount.read_tb(f) for f in fs]
tots = [ibcount.total(t) for t in tbs]
wins = [tots[i + 1] - tots[i] for i in range(len(tots) - 1)]
j = max(range(len(wins)), key=lambda i: wins[i])
A, B, C = tbs[j - 1], tbs[j], tbs[j + 1]
delta = {}
for k in set(A) | set(B) | set(C):
    x = C.get(k, 0) - 2 * B.get(k, 0) + A.get(k, 0)
    if x: delta[k] = x
log = open(f'{d}/prof.log').read()
sent = {m.group(1): int(m.group(2)) for m in re.finditer(r'^(short|long) summary: .* sent=(\d+)', log, re.M)}
ex = sent['long'] - sent['short']
mod = None
ks = {}
for l in open(f'{d}/kallsyms.txt'):
    p = l.split()
    if len(p) > 3 and p[3] == '[rds_rs]' and p[1].lower() in 'tw':
        ks[p[2]] = int(p[0], 16)
byaddr = collections.defaultdict(list)
for (v, n), x in delta.items(): byaddr[v].append((n, x))
dis = subprocess.run(['objdump', '-dr', '--no-show-raw-insn', ko], capture_output=True, text=True).stdout
func = None; ins = []; sites = []
def flush():
    if func is None or func not in ks: return
    base = ks[func]; start = ins[0][0] if ins else 0
    offs = [o - start for o, _, _ in ins]
    cnt = [0] * len(ins)
    for k, (o, _, _) in enumerate(ins):
        for n, x in byaddr.get(base + o - start, ()):
            for m in range(k, min(k + n, len(ins))): cnt[m] += x
    for k, (o, t, rel) in enumerate(ins):
        if rel and any(s in rel for s in targets):
            sites.append((cnt[k] / ex, func, o - start, rel))
for l in dis.split('\n'):
    m = re.match(r'^[0-9a-f]+ <(.*)>:$', l)
    if m:
        flush(); func = m.group(1); ins = []; continue
    m = re.match(r'\s+([0-9a-f]+):\s+(R_X86_64_\S+)\s+(\S+)', l)
    if m and ins:
        o, t, _ = ins[-1]; ins[-1] = (o, t, m.group(3)); continue
    m = re.match(r'\s+([0-9a-f]+):\s+(.*)', l)
    if m and func: ins.append((int(m.group(1), 16), m.group(2), None))
flush()
names = ibcount.demangle([s[1] for s in sites])
tot = collections.Counter()
for c, f, o, rel in sorted(sites, key=lambda s: -s[0]):
    if c >= 0.01:
        print(f'{c:7.3f}  {names.get(f, f)[:110]} +{o:#x} -> {ibcount.demangle([rel.split("-")[0]]).get(rel.split("-")[0])[:40]}')
