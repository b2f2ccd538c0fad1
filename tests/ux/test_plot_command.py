"""`folio plot` on two real recorded runs: the PNG and the SVG are checked as files (size,
structure, the series' colours, the legend), not only the exit code.

    python3 test_plot_command.py FOLIO_BINARY DATA_FILE
"""

import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
import zlib

from recorded_run import check_errors, report, train_tiny

# folio's run colours (plot/loss_figure.cpp): the first two, and the train line's tint of each.
RUN_COLOURS = [(31, 119, 180), (255, 127, 14)]
WIDTH, HEIGHT = 640, 420


def tint(colour):
    return tuple(round(c + (255 - c) * 0.5) for c in colour)


def png_chunks(raw):
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("no PNG signature")
    position = 8
    while position < len(raw):
        (length,) = struct.unpack(">I", raw[position:position + 4])
        kind = raw[position + 4:position + 8]
        body = raw[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", raw[position + 8 + length:position + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        yield kind, body
        position += 12 + length


def png_pixels(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    chunks = list(png_chunks(open(path, "rb").read()))
    if chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("IHDR must come first and IEND last")
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[0][1][:10])
    if depth != 8 or colour_type not in (2, 6):
        raise ValueError(f"unexpected bit depth {depth} / colour type {colour_type}")
    step = 3 if colour_type == 2 else 4
    data = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * step
    if len(data) != height * (stride + 1):
        raise ValueError("image data of the wrong length")
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = data[start], bytearray(data[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, up_left = previous[i], previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                nearest = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + nearest) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, step)])
        previous = line
    return width, height, rows


def check_png(path, failures):
    try:
        width, height, rows = png_pixels(path)
    except ValueError as error:
        failures.append(f"PNG: {error}")
        return
    if (width, height) != (WIDTH, HEIGHT):
        failures.append(f"PNG: size {width}x{height}, asked for {WIDTH}x{HEIGHT}")
    counts = {}
    for row in rows:
        for pixel in row:
            counts[pixel] = counts.get(pixel, 0) + 1
    for run, colour in enumerate(RUN_COLOURS):
        if counts.get(colour, 0) < 100:
            failures.append(f"PNG: run {run}'s colour {colour} on {counts.get(colour, 0)} pixels")
    if counts.get((255, 255, 255), 0) < width * height // 2:
        failures.append("PNG: not mostly a white page")


def check_svg(path, labels, failures):
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as error:
        failures.append(f"SVG: not well-formed XML: {error}")
        return
    namespace = "{http://www.w3.org/2000/svg}"
    if root.tag != namespace + "svg":
        failures.append(f"SVG: root element {root.tag}")
    if (root.get("width"), root.get("height")) != (f"{WIDTH}px", f"{HEIGHT}px"):
        failures.append(f"SVG: size {root.get('width')} x {root.get('height')}")
    title, desc = root.find(namespace + "title"), root.find(namespace + "desc")
    expected = "; ".join(f"{label} {kind}" for label in labels for kind in ("train", "val"))
    if title is None or title.text != "folio: " + ", ".join(labels):
        failures.append(f"SVG: title {None if title is None else title.text!r}")
    if desc is None or f"loss: {expected}." not in desc.text:
        failures.append(f"SVG: legend description {None if desc is None else desc.text!r}")
    strokes = []
    for element in root.iter(namespace + "path"):
        match = re.search(r"stroke:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)", element.get("style", ""))
        if match:
            colour = tuple(round(float(v) * 2.55) for v in match.groups())
            if len(set(colour)) > 1:  # grey is the axes and the grid
                strokes.append(colour)
    expected_strokes = sorted([tint(c) for c in RUN_COLOURS] + RUN_COLOURS * 2)
    if sorted(strokes) != expected_strokes:
        failures.append(f"SVG: coloured stroked paths {sorted(strokes)}, expected one per "
                        f"series {expected_strokes}")
    if len(list(root.iter(namespace + "use"))) < 50:
        failures.append("SVG: too few glyphs for axis labels, ticks and legend")


def main(folio, data):
    first = train_tiny(folio, data, "lr3e-4")
    second = train_tiny(folio, data, "lr1e-3", "--learning_rate=1e-3")
    work = os.path.dirname(first)
    failures = []
    for name in ("runs.png", "runs.svg"):
        output = os.path.join(work, name)
        result = subprocess.run(
            [folio, "plot", first, second, "-o", output, "--width", str(WIDTH),
             "--height", str(HEIGHT)], capture_output=True, text=True)
        if result.returncode != 0 or result.stdout.strip() != f"wrote {output}":
            failures.append(f"plot {name}: {result.returncode} {result.stdout!r} {result.stderr!r}")
    check_png(os.path.join(work, "runs.png"), failures)
    check_svg(os.path.join(work, "runs.svg"), ["lr3e-4", "lr1e-3"], failures)

    single = subprocess.run([folio, "plot", first], capture_output=True, text=True)
    if single.returncode != 0 or not os.path.getsize(os.path.join(first, "loss.png")):
        failures.append(f"plot with no -o: {single.stderr!r}")
    # A run named by its metrics file: the figure goes into the run's folder, as for the folder
    # (it had gone to metrics.jsonl/loss.png, which cannot be written).
    os.remove(os.path.join(first, "loss.png"))
    by_file = subprocess.run([folio, "plot", os.path.join(first, "metrics.jsonl")],
                             capture_output=True, text=True)
    if by_file.returncode != 0 or not os.path.isfile(os.path.join(first, "loss.png")):
        failures.append(f"plot RUN/metrics.jsonl: {by_file.stderr!r}")
    # Values no run writes, whose range overflows a double: drawn as gaps, and the command ends
    # (the tick loop had never ended).
    huge = os.path.join(work, "huge")
    os.makedirs(huge, exist_ok=True)
    with open(os.path.join(huge, "metrics.jsonl"), "w") as f:
        f.write('{"type":"train","step":0,"loss":1e308}\n{"type":"train","step":1,"loss":-1e308}\n'
                '{"type":"train","step":2,"loss":2.5}\n{"type":"eval","step":2,"val_loss":1.7e308}\n')
    try:
        drawn = subprocess.run([folio, "plot", huge], capture_output=True, text=True, timeout=60)
        if drawn.returncode != 0 or not os.path.isfile(os.path.join(huge, "loss.png")):
            failures.append(f"plot of huge values: {drawn.returncode} {drawn.stderr!r}")
    except subprocess.TimeoutExpired:
        failures.append("plot of huge values did not end in 60 s")
    check_errors([
        ([folio, "plot", first, "-o", os.path.join(work, "a.png"), "-o",
          os.path.join(work, "b.png")], "the output file is given twice"),
        ([folio, "plot", first, "--output", os.path.join(work, "a.png"), "-o",
          os.path.join(work, "b.png")], "the output file is given twice"),
        ([folio, "plot"], "needs a RUN_DIR"),
        ([folio, "plot", os.path.join(work, "nope")], "metrics.jsonl does not exist"),
        ([folio, "plot", first, "-o", os.path.join(work, "x.jpg")], "FILE.png or FILE.svg"),
        ([folio, "plot", first, "-o", os.path.join(work, "no", "x.png")], "cannot write"),
    ], failures)
    return report(failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
