#!/usr/bin/env bash
# --json of gnc compile, run and eval: json.sh GNC SOURCE_DIR WORK_DIR.  Each
# command's standard output must be one JSON object and nothing else, with the
# keys docs/cli.md ("Machine-readable output") lists, and values that agree with
# the same command's text (the summary, --stats, the printed tensors, the .npy
# files of -o, eval's line); a failing command prints nothing there.  Ends with
# "N passed, M failed"; fails if any did.
set -u
gnc=$1 src=$2 work=$3
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
lenet=$src/models/lenet.net resnet=$src/models/resnet18.net

# json WANT NAME CMD...: runs CMD, its stdout to NAME.json and its stderr to
# NAME.err; checks the exit status, and that stdout is one JSON object (WANT
# 0) or empty (else)
json() {
    local want=$1 name=$2; shift 2
    "$@" >"$name.json" 2>"$name.err"; local got=$?
    if [ "$got" != "$want" ]; then bad "'$*' exited $got, want $want"; tail -5 "$name.err"; return; fi
    if [ "$want" = 0 ]; then
        if python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).read()); assert isinstance(d, dict)' "$name.json"
        then ok; else bad "'$*': standard output is not one JSON object"; head -c 300 "$name.json"; fi
    elif [ -s "$name.json" ]; then bad "'$*' failed but printed on standard output"; head -c 300 "$name.json"
    else ok; fi
}
# check WHAT ARGS...: the Python on standard input (asserts, with ARGS in
# sys.argv) passes
check() {
    local what=$1; shift
    if python3 - "$@"; then ok; else bad "$what"; fi
}

# ---- compile
json 0 c "$gnc" compile "$lenet" --json
expect 0 "$gnc" compile "$lenet";                      echo "$out" >c.txt
expect 0 "$gnc" compile "$lenet" --stats;              echo "$out" >c.stats
check "compile --json: its keys, and the summary's and --stats' values" c.json c.txt c.stats <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
stats = dict(l.split(': ', 1) for l in open(sys.argv[3]).read().splitlines())
assert set(d) == {'model', 'file', 'training', 'inputs', 'outputs', 'loss', 'parameters',
                  'operations', 'flops', 'memory', 'ops', 'fused_nodes', 'kernels', 'weight_ops',
                  'devices', 'partition', 'remat', 'compile_ms', 'plan'}, sorted(d)
assert d['model'] == 'lenet' and d['file'].endswith('models/lenet.net') and d['training'] is False
assert 'model lenet (%s)' % d['file'] in text
for kind in ('inputs', 'outputs'):
    for v in d[kind]:
        assert set(v) == {'name', 'dtype', 'shape'}
        t = '%s[%s]' % (v['dtype'], ', '.join(map(str, v['shape'])))
        assert re.search(r'^  %s +%s +%s$' % (kind[:-1], re.escape(v['name']), re.escape(t)), text, re.M), (v, text)
assert [v['name'] for v in d['inputs']] == ['image', 'label']
assert d['loss'] == {'name': 'cross_entropy0', 'dtype': 'f32', 'shape': []}
p = d['parameters']
assert 'parameters: %d trainable in %d tensors, %d in buffers,' % (p['trainable'], p['tensors'], p['buffers']) in text
assert p['trainable'] == 61706 and p['bytes'] == 246824
o = d['operations']
line = re.search(r'^operations: (\d+) nodes: (.*)$', text, re.M)
assert int(line.group(1)) == o['nodes'] == 13
assert dict((k, int(n)) for k, n in (x.split() for x in line.group(2).split(', '))) == o['by_op']
f = d['flops']
assert f['batch'] == 256 and f['training'] is False and f['total'] == f['per_sample'] * 256
assert 'forward: %.3f GFLOP (%.4f GFLOP per sample of 256)' % (f['total'] / 1e9, f['per_sample'] / 1e9) in text
m = d['memory']
for k in ('peak_bytes', 'lower_bound_bytes', 'no_reuse_bytes'):
    assert m[k] == int(stats['memory.' + k]), k
assert m['param_bytes'] == int(stats['params.bytes'])
for k in ('ops', 'fused_nodes', 'kernels', 'weight_ops'):
    assert d[k] == int(stats[k]), k
assert len(d['devices']) == 1
for dev in d['devices']:
    n = dev['device']
    for k, v in dev.items():
        if k == 'device':
            continue
        if k == 'predicted': # by class of kernel: cuda.dN.predicted.CLASS_ms
            assert sorted(v) == sorted(c + '_ms' for c in ('convolution', 'transpose',
                'normalization', 'elementwise', 'gemm', 'optimizer', 'communication')), v
            for c, ms in v.items():
                assert round(ms, 3) == float(stats['cuda.d%d.predicted.%s' % (n, c)]), (c, ms)
            assert abs(sum(v.values()) - dev['predicted_run_ms']) < 1e-6, v
            continue
        s = stats['cuda.d%d.%s' % (n, k)]
        assert (round(v, 3) == float(s)) if k.endswith('_ms') else v == int(s), (k, v, s)
assert d['partition'] is None and d['remat'] is None and d['plan'] is None
assert isinstance(d['compile_ms'], float) and d['compile_ms'] >= 0
EOF
# --stats --json is --json
json 0 cs "$gnc" compile "$lenet" --stats --json
check "compile --stats --json differs from --json" c.json cs.json <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
del a['compile_ms'], b['compile_ms']
assert a == b
EOF

# a training step: resnet18 with --remat, against its summary
json 0 r "$gnc" compile "$resnet" --train --remat --json
expect 0 "$gnc" compile "$resnet" --train --remat;      echo "$out" >r.txt
check "compile --train --remat --json: remat and flops as the summary's" r.json r.txt <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
r, f = d['remat'], d['flops']
assert d['training'] is True and f['training'] is True
assert set(r) == {'recomputed', 'peak_bytes_without', 'saved_bytes', 'added_flops'}
assert r['recomputed'] == 9 and r['saved_bytes'] == r['peak_bytes_without'] - d['memory']['peak_bytes'] > 0
assert ('remat: %d batchnorm-ReLU results recomputed' % r['recomputed']) in text
assert ('%.3f GFLOP added (%.2f%% of the step)' % (r['added_flops'] / 1e9, 100 * r['added_flops'] / f['total'])) in text
assert 'forward and backward: %.3f GFLOP' % (f['total'] / 1e9) in text
EOF

# partitioned: the partition against --dump-plan's JSON, a device each
json 0 g "$gnc" compile "$lenet" --gpus 2 --json --dump-plan=g.plan.json
check "compile --gpus 2 --json: the partition as --dump-plan's" g.json g.plan.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); plan = json.load(open(sys.argv[2]))
p = d['partition']
assert set(p) == {'devices', 'strategy', 'device_model', 'predicted_step_ms'}
assert p['devices'] == plan['devices'] == 2 and p['strategy'] == plan['strategy']
assert p['device_model'] == plan['device_model'] and abs(p['predicted_step_ms'] - plan['predicted_step_ms']) < 1e-9
assert [x['device'] for x in d['devices']] == [0, 1]
EOF

# -o FILE: the plan written, then the object alone (no "plan:" line) naming it
json 0 o "$gnc" compile "$lenet" --no-kernels --json -o lenet.gnc
check "compile --json -o FILE" o.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['plan'] == 'lenet.gnc' and d['devices'] == []
EOF
expect 0 "$gnc" inspect lenet.gnc
# -o -: the plan alone on standard output, the object on standard error
"$gnc" compile "$lenet" --no-kernels --json -o - >std.gnc 2>std.err; rc=$?
if [ $rc = 0 ] && cmp -s std.gnc lenet.gnc &&
   python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["plan"] is None' std.err
then ok; else bad "compile --json -o -: exit $rc, or not the plan on stdout and the object on stderr"; fi
# --dump-plan=-: its JSON alone on standard output, the object on standard error
"$gnc" compile "$lenet" --gpus 2 --json --dump-plan=- >dp.out 2>dp.err; rc=$?
if [ $rc = 0 ] && python3 -c '
import json, sys
plan, d = (json.load(open(f)) for f in sys.argv[1:3])
assert "per_device" in plan and d["partition"]["strategy"] == plan["strategy"]' dp.out dp.err
then ok; else bad "compile --json --dump-plan=-: exit $rc, or not the plan on stdout and the object on stderr"; fi
# pass timings and IR dumps go to standard error
json 0 t "$gnc" compile "$lenet" --json --time-passes --dump-ir=after:fuse
if grep -qF "pass simplify" t.err && grep -qF "# ---- IR after fuse" t.err; then ok
else bad "--json --time-passes --dump-ir: the timings and the IR are not on standard error"; fi

# usage errors and failures: a status, a message, nothing on standard output
json 2 u1 "$gnc" compile "$lenet" --json --dump-memory
grep -qF -- "--json and --dump-memory without a file both print on standard output" u1.err && ok || bad "u1: $(cat u1.err)"
json 2 u2 "$gnc" compile "$lenet" --json --dump-plan
grep -qF -- "--json and --dump-plan without a file" u2.err && ok || bad "u2: $(cat u2.err)"
json 2 u3 "$gnc" run "$lenet" --json --profile --device cpu
grep -qF -- "--json and --profile" u3.err && ok || bad "u3: $(cat u3.err)"
json 2 u4 "$gnc" dump "$lenet" --json
printf 'model m() {\n    input x: f32[2]\n    output y = relu(x) +\n}\n' >broken.net
json 1 f1 "$gnc" compile broken.net --json
grep -qF "broken.net:" f1.err && ok || bad "f1: $(cat f1.err)"
json 1 f2 "$gnc" compile "$lenet" --no-kernels --json -o /proc/nonexistent/x.gnc
json 1 f3 "$gnc" compile "$lenet" --gpus 2 --json --dump-plan=/proc/nonexistent/p.json
json 1 f4 "$gnc" run "$lenet" --device cpu --json --input nosuch=x.npy
json 1 f5 "$gnc" run "$lenet" --device cpu --json -D batch=2 -o /proc/nonexistent/out
json 1 f6 "$gnc" eval "$lenet" --device cpu --json --weights missing.st

# ---- run: every value, as -o's .npy files have them and as the text prints them
npy_values='
import struct
def npy(path):
    b = open(path, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    h = eval(b[10:10 + n].decode())
    fmt = {"<f4": "f", "<i4": "i", "<i8": "q", "|u1": "B"}[h["descr"]]
    count = 1
    for s in h["shape"]:
        count *= s
    return h["shape"], list(struct.unpack("<%d%s" % (count, fmt), b[10 + n:]))
def f32(v):  # v read as a float32
    return struct.unpack("<f", struct.pack("<f", v))[0]
'
json 0 run "$gnc" run "$lenet" -D batch=3 --seed 5 --device cpu --repeat 3 --json -o npy
expect 0 "$gnc" run "$lenet" -D batch=3 --seed 5 --device cpu;      echo "$out" >run.txt
check "run --json: the outputs as -o's files and the text" run.json run.txt npy <<EOF
$npy_values
import json, re, sys
d = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
assert set(d) == {'model', 'file', 'device', 'seed', 'outputs', 'loss', 'time_ms', 'repeat',
                  'predicted_ms', 'device_model', 'memory'}, sorted(d)
assert d['predicted_ms'] > 0 and d['device_model'] == 'cpu'
assert {'planned_bytes', 'planned', 'measured_bytes', 'measured_as'} <= set(d['memory'])
assert d['model'] == 'lenet' and d['device'] == 'cpu' and d['seed'] == 5 and d['repeat'] == 3
assert d['time_ms'] > 0 and list(d['outputs']) == ['logits']
t = d['outputs']['logits']
assert set(t) == {'dtype', 'shape', 'values'} and t['dtype'] == 'f32' and t['shape'] == [3, 10]
shape, values = npy(sys.argv[3] + '/logits.npy')
assert list(shape) == t['shape'] and values == [f32(v) for v in t['values']]
# the text's first rows, at %.6g
rows = re.findall(r'^  \[([^]]*)\]$', text.split('loss:')[0], re.M)
assert len(rows) == 3
for r, row in enumerate(rows):
    printed = [float(x) for x in row.replace(' ...', '').split()]
    assert printed == [float('%.6g' % f32(v)) for v in t['values'][r * 10:r * 10 + 8]], (printed, r)
loss = re.search(r'^loss: f32\[\]\n  \[(.*)\]$', text, re.M).group(1)
assert float(loss) == float('%.6g' % f32(d['loss']))
EOF
# a plan runs to the same outputs, and says so the same way
json 0 m "$gnc" run "$lenet" --device cpu --seed 2 --json
json 0 mp "$gnc" run lenet.gnc --device cpu --seed 2 --json
check "run --json of a plan differs from its model's" m.json mp.json <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a['outputs'] == b['outputs'] and a['loss'] == b['loss'] and b['file'] == 'lenet.gnc'
EOF
# integers exact, NaN and infinity as null
printf 'model m() {\n    input x: f32[2, 3]\n    output y = log(x)\n    output k = argmax(x, axis=1)\n}\n' >nan.net
python3 -c '
import struct
h = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3), }"
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open("x.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() +
                          struct.pack("<6f", 1, -1, 0, 4, 0.5, 2))'
json 0 nan "$gnc" run nan.net --device cpu --input x=x.npy --json -o nan
check "run --json: NaN and infinity as null, integers as the files have them" nan.json nan <<EOF
$npy_values
import json, math, sys
d = json.load(open(sys.argv[1]))
y, k = d['outputs']['y'], d['outputs']['k']
assert y['values'][0] == 0.0 and y['values'][1] is None and y['values'][2] is None
assert f32(y['values'][3]) == npy(sys.argv[2] + '/y.npy')[1][3] and abs(y['values'][3] - math.log(4)) < 1e-6
assert k['dtype'] == 'i32' and k['shape'] == [2] and k['values'] == npy(sys.argv[2] + '/k.npy')[1] == [0, 0]
assert d['loss'] is None
EOF

# ---- eval, of a checkpoint trained on a slice of Fashion-MNIST
data=/usr/share/datasets/fashion-mnist
[ -r "$data/t10k-labels-idx1-ubyte.gz" ] || [ -r "$data/t10k-labels-idx1-ubyte" ] ||
    bad "$data lacks Fashion-MNIST (install dataset-fashion-mnist)"
mkdir tiny
idx_slice train-images-idx3-ubyte 128 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 128 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 100 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 100 1 "$data" >tiny/t10k-labels-idx1-ubyte
expect 0 "$gnc" train "$lenet" --steps 2 --batch 64 --checkpoint w.st --data tiny --device cpu
json 0 ev "$gnc" eval "$lenet" --weights w.st --data tiny --batch 25 --device cpu --json
expect 0 "$gnc" eval "$lenet" --weights w.st --data tiny --batch 25 --device cpu;  echo "$out" >ev.txt
check "eval --json: the text line's numbers" ev.json ev.txt <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
assert set(d) == {'model', 'file', 'weights', 'data', 'device', 'batch', 'accuracy', 'loss',
                  'images', 'of'}, sorted(d)
assert d['model'] == 'lenet' and d['weights'] == 'w.st' and d['data'] == 'tiny'
assert d['device'] == 'cpu' and d['batch'] == 25 and d['images'] == 100 and d['of'] == 100
assert 'test accuracy %.4f, loss %.4f, on 100 of 100 images' % (d['accuracy'], d['loss']) in text, text
assert 0 <= d['accuracy'] <= 1 and abs(d['accuracy'] * 100 - round(d['accuracy'] * 100)) < 1e-9
EOF

summary json
