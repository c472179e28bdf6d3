#!/usr/bin/env bash
# Layout transposes: what a plan says one run makes (gnc inspect --json:
# layout_transposes, its own kernels; library_layout_transposes, those cuDNN
# makes inside its calls, codegen's cg_conv_layout_copies) against what the
# stand-in cuDNN counts as the calls run (tests/fakecuda/cudnn.c, "Layouts").
#   layout.sh GNC SOURCE_DIR WORK_DIR FAKECUDA_DIR
# lenet inference on the stand-ins, 3 runs, at fp32 (exact: none), tf32 and
# bf16 --layout nchw (cuDNN's 3 per call but the forward one on one input
# channel), bf16 (channels-last activations: cuDNN none, gnc's own where
# conv2's result goes back to NCHW for the flatten) and bf16 with --conv
# cudnn-nhwc (gnc's own, cuDNN none).  Exit 77 (skipped) where gnc has no
# NVRTC to compile the kernels the stand-ins run.
set -u
gnc=$(realpath "$1") src=$(realpath "$2") work=$3 fake=$(realpath "$4")
. "$src/tests/lib.sh"
on_stand_in layout
json() { /usr/bin/env python3 -c "import json,sys; p=json.load(open(sys.argv[1])); $2" "$1"; }
for c in "fp32 cudnn auto 0 0" "tf32 cudnn auto 0 3" "bf16 cudnn nchw 0 3" "bf16 cudnn auto 1 0" \
         "bf16 cudnn-nhwc auto 1 0"; do
    set -- $c
    p=$1 conv=$2 layout=$3 own=$4 lib=$5 name="$1 --conv $2 --layout $3"
    expect 0 "$gnc" compile "$src/models/lenet.net" -D batch=8 --precision $p --conv $conv \
        --layout $layout -o l.gnc
    expect 0 "$gnc" inspect l.gnc --json
    echo "$out" >l.json
    json l.json "d = p['devices'][0]
assert (d['layout_transposes'] > 0) == bool($own), d
assert d['library_layout_transposes'] == $lib, d" && ok || bad "$name: the plan's count"
    rm -f stats
    expect 0 env GNC_FAKECUDA_STATS="$work/stats" "$gnc" run l.gnc --device cuda --repeat 3
    # cuDNN's count per call run, as the stand-in saw them, against the plan's
    # per call of one run (lenet runs 2 convolutions)
    python3 - stats l.json "$name" <<'PY' && ok || bad "$name: the stand-in's count"
import json, sys
s = dict(l.split() for l in open(sys.argv[1]))
convs, seen = int(s['cudnn.convolutions']), int(s['cudnn.layout_transposes'])
d = json.load(open(sys.argv[2]))['devices'][0]
assert convs > 0 and convs % 2 == 0, s
assert seen * 2 == d['library_layout_transposes'] * convs, (sys.argv[3], s, d)
PY
done
summary layout
