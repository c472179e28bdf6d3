"""Checks gnc's pictures by their schema (tests/cli/run.sh): standard library only.

    pictures.py trace FILE.json DEVICES predicted|measured
    pictures.py memory FILE.json FILE.svg
    pictures.py plot FILE.svg RUN:SERIES=COUNT ... [--same OTHER.svg]

A trace is the Chrome Trace Event Format: "traceEvents" holds metadata events
naming a process per device and its compute and communication threads, and
complete events ("ph": "X") with a name, a category, ts and dur in
microseconds, pid a device and tid a stream; the events of one stream never
overlap (a stream runs one thing at a time), and a predicted trace ends at its
step_ms.  A memory plan's buffers lie inside their device's arena, and two
buffers live at once on one device never share a byte; its SVG is well-formed
XML with a rectangle per buffer and a lower-bound line per device.  A
training plot (gnc plot, gnc train --plot) is well-formed SVG with a loss and
an accuracy panel, each with its two axes and ticks, and exactly the
polylines named (run and series), each of COUNT points inside its panel,
left to right; with --same, OTHER's polylines have the same points (the
runs' names aside)."""
import json
import sys
import xml.etree.ElementTree as ET

failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
        print("FAIL:", what)


def trace(path, ndev, kind):
    d = json.load(open(path))
    ev = d["traceEvents"]
    check(isinstance(ev, list) and ev, "traceEvents is a non-empty list")
    meta = {(e["pid"], e["tid"], e["name"]): e["args"]["name"] for e in ev if e["ph"] == "M"}
    for p in range(ndev):
        check(meta.get((p, 0, "process_name")) == "device %d" % p, "device %d is named" % p)
        check(meta.get((p, 0, "thread_name")) == "compute", "device %d has a compute thread" % p)
        check(meta.get((p, 1, "thread_name")) == "communication",
              "device %d has a communication thread" % p)
    xs = [e for e in ev if e["ph"] == "X"]
    check(xs, "complete events")
    tracks = {}
    for e in xs:
        ok = (isinstance(e["name"], str) and e["name"] and isinstance(e["cat"], str)
              and e["ts"] >= 0 and e["dur"] >= 0 and 0 <= e["pid"] < ndev and e["tid"] in (0, 1))
        check(ok, "event %r is well-formed" % e)
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    check(len({p for p, _ in tracks}) == ndev, "every device has events")
    for key, spans in tracks.items():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            # the simulation's times are floats: a thousandth of a microsecond of slack
            check(b0 >= a1 - 1e-3, "track %s: an event at %g starts before %g" % (key, b0, a1))
    if kind == "predicted":
        end = max(e["ts"] + e["dur"] for e in xs) / 1e3
        step = d["otherData"]["step_ms"]
        check(abs(end - step) <= 1e-6 * step, "the last event ends at the step (%g, %g)" % (end, step))
        if ndev > 1:
            check(any(e["tid"] == 1 for e in xs), "communication events")
    print("%s: %d events on %d tracks" % (path, len(xs), len(tracks)))


def memory(path, svg):
    d = json.load(open(path))
    arena = {x["device"]: x for x in d["devices"]}
    bufs = d["buffers"]
    check(bufs, "buffers")
    for b in bufs:
        a = arena[b["device"]]
        check(0 <= b["offset"] and b["offset"] + b["bytes"] <= a["arena_bytes"],
              "%s lies inside its arena" % b["value"])
        check(b["first"] <= b["last"] <= d["nodes"], "%s has a live range" % b["value"])
    for i, b in enumerate(bufs):
        for c in bufs[i + 1:]:
            if b["device"] != c["device"]:
                continue
            live = b["first"] <= c["last"] and c["first"] <= b["last"]
            share = b["offset"] < c["offset"] + c["bytes"] and c["offset"] < b["offset"] + b["bytes"]
            check(not (live and share), "%s and %s overlap while both live" % (b["value"], c["value"]))
    for x in arena.values():
        check(x["lower_bound"] <= x["arena_bytes"] <= x["no_reuse_bytes"], "bounds of device %d" % x["device"])
    root = ET.parse(svg).getroot()
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title") is not None]
    lines = list(root.iter("{http://www.w3.org/2000/svg}line"))
    check(len(rects) == len(bufs), "a rectangle per buffer (%d, %d)" % (len(rects), len(bufs)))
    check(len(lines) == len(arena), "a lower-bound line per device")
    print("%s: %d buffers on %d devices" % (path, len(bufs), len(arena)))


def polylines(root):
    out = {}
    for panel in root.iter(SVG + "g"):
        for line in panel.iter(SVG + "polyline"):
            pts = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
            out[(line.get("data-run"), line.get("data-series"))] = (panel, pts)
    return out


def plot(path, specs):
    root = ET.parse(path).getroot()
    check(root.tag == SVG + "svg", "%s: not SVG" % path)
    panels = {g.get("data-panel"): g for g in root.iter(SVG + "g") if g.get("class") == "panel"}
    check(sorted(panels) == ["test_acc", "train_loss"], "%s: panels %s" % (path, sorted(panels)))
    for name, g in panels.items():
        axes = [l for l in g.iter(SVG + "line") if l.get("class") == "axis"]
        ticks = [l for l in g.iter(SVG + "line") if l.get("class") == "tick"]
        check(len(axes) == 2 and len(ticks) >= 2, "%s: panel %s: %d axes, %d ticks"
              % (path, name, len(axes), len(ticks)))
    lines = polylines(root)
    want = {}
    for spec in specs:
        key, count = spec.rsplit("=", 1)
        run, series = key.rsplit(":", 1)
        want[(run, series)] = int(count)
    check(sorted(lines) == sorted(want), "%s: series %s, want %s" % (path, sorted(lines), sorted(want)))
    for key, (g, pts) in lines.items():
        if key not in want:
            continue
        check(len(pts) == want[key], "%s: %s has %d points, want %d" % (path, key, len(pts), want[key]))
        axes = [l for l in g.iter(SVG + "line") if l.get("class") == "axis"]
        x0 = min(float(l.get("x1")) for l in axes)
        x1 = max(float(l.get("x2")) for l in axes)
        y0 = min(float(l.get("y1")) for l in axes)
        y1 = max(float(l.get("y2")) for l in axes)
        check(all(x0 - 0.1 <= x <= x1 + 0.1 and y0 - 0.1 <= y <= y1 + 0.1 for x, y in pts),
              "%s: %s leaves its panel: %s" % (path, key, pts))
        check(all(a[0] < b[0] for a, b in zip(pts, pts[1:])), "%s: %s not left to right: %s"
              % (path, key, pts))
    print("%s: %d series" % (path, len(lines)))
    return lines


SVG = "{http://www.w3.org/2000/svg}"
if sys.argv[1] == "trace":
    trace(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif sys.argv[1] == "plot":
    args = sys.argv[3:]
    other = None
    if "--same" in args:
        other = args[args.index("--same") + 1]
        args = args[:args.index("--same")]
    mine = plot(sys.argv[2], args)
    if other:
        theirs = {s: p for (r, s), (g, p) in polylines(ET.parse(other).getroot()).items()}
        check({s: p for (r, s), (g, p) in mine.items()} == theirs,
              "%s and %s draw different points" % (sys.argv[2], other))
else:
    memory(sys.argv[2], sys.argv[3])
sys.exit(1 if failed else 0)
