#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Render a terminal screen captured by `tmux capture-pane -e -p` to a PNG.

The README's picture of `scx_esn top` is a real screen from the demo VM, not a
mock-up: the demo captures the pane with its colour escapes, and this draws it
cell by cell in a monospaced font. Only what tmux emits is understood: SGR
sequences (bold, dim, italic, underline, reverse; the 8, 16, 256 and 24-bit
colour forms). Any other escape is an error, so a capture this cannot draw is
not silently drawn wrong.

Usage: render-screen.py CAPTURE.ansi OUT.png [--cols N] [--rows N]
Needs Debian's python3-pil and fonts-dejavu-core.
"""

import argparse
import re
import sys

from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONT_SIZE = 15
PAD = 10
DEFAULT_FG = (0xD0, 0xD0, 0xD0)
DEFAULT_BG = (0x1C, 0x1C, 0x1C)
# The xterm palette, so the picture looks like the terminal people use.
BASE16 = [
    (0x00, 0x00, 0x00), (0xCD, 0x00, 0x00), (0x00, 0xCD, 0x00), (0xCD, 0xCD, 0x00),
    (0x00, 0x00, 0xEE), (0xCD, 0x00, 0xCD), (0x00, 0xCD, 0xCD), (0xE5, 0xE5, 0xE5),
    (0x7F, 0x7F, 0x7F), (0xFF, 0x00, 0x00), (0x00, 0xFF, 0x00), (0xFF, 0xFF, 0x00),
    (0x5C, 0x5C, 0xFF), (0xFF, 0x00, 0xFF), (0x00, 0xFF, 0xFF), (0xFF, 0xFF, 0xFF),
]  # fmt: skip
ESCAPE = re.compile(r"\x1b\[([0-9;:]*)([A-Za-z])")


def palette256(n):
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    grey = 8 + (n - 232) * 10
    return (grey, grey, grey)


class Pen:
    """The SGR state a cell is drawn with."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.fg = None
        self.bg = None
        self.bold = self.dim = self.italic = self.underline = self.reverse = False

    def colour(self, params, i):
        """Parse 38/48's tail at params[i:]; return (rgb, next index)."""
        if i < len(params) and params[i] == 5 and i + 1 < len(params):
            return palette256(params[i + 1]), i + 2
        if i < len(params) and params[i] == 2 and i + 3 < len(params):
            return tuple(params[i + 1 : i + 4]), i + 4
        raise ValueError(f"malformed extended colour in SGR {params}")

    def apply(self, params):
        params = params or [0]
        i = 0
        while i < len(params):
            p = params[i]
            i += 1
            if p == 0:
                self.reset()
            elif p == 1:
                self.bold = True
            elif p == 2:
                self.dim = True
            elif p == 3:
                self.italic = True
            elif p == 4:
                self.underline = True
            elif p == 7:
                self.reverse = True
            elif p == 22:
                self.bold = self.dim = False
            elif p == 23:
                self.italic = False
            elif p == 24:
                self.underline = False
            elif p == 27:
                self.reverse = False
            elif 30 <= p <= 37:
                self.fg = BASE16[p - 30]
            elif p == 38:
                self.fg, i = self.colour(params, i)
            elif p == 39:
                self.fg = None
            elif 40 <= p <= 47:
                self.bg = BASE16[p - 40]
            elif p == 48:
                self.bg, i = self.colour(params, i)
            elif p == 49:
                self.bg = None
            elif 90 <= p <= 97:
                self.fg = BASE16[p - 90 + 8]
            elif 100 <= p <= 107:
                self.bg = BASE16[p - 100 + 8]
            elif p in (5, 6, 8, 9, 21, 25, 28, 29, 53, 55):
                pass  # blink, conceal, strike, overline: not drawn
            else:
                raise ValueError(f"SGR parameter {p} is not understood")

    def cell(self):
        fg = self.fg or DEFAULT_FG
        bg = self.bg or DEFAULT_BG
        if self.reverse:
            fg, bg = bg, fg
        if self.dim:
            fg = tuple((c + b) // 2 for c, b in zip(fg, bg))
        return fg, bg, self.bold, self.italic, self.underline


def parse(text):
    """Return the screen as rows of (char, cell style)."""
    rows = []
    pen = Pen()
    for line in text.rstrip("\n").split("\n"):
        row = []
        pos = 0
        for m in ESCAPE.finditer(line):
            row.extend((ch, pen.cell()) for ch in line[pos : m.start()])
            if m.group(2) != "m":
                raise ValueError(f"escape sequence {m.group(0)!r} is not SGR")
            params = [int(x) if x else 0 for x in re.split("[;:]", m.group(1))] if m.group(1) else []
            pen.apply(params)
            pos = m.end()
        rest = line[pos:]
        if "\x1b" in rest:
            raise ValueError(f"an escape that is not a CSI sequence in: {rest!r}")
        row.extend((ch, pen.cell()) for ch in rest)
        rows.append(row)
    return rows


def fonts():
    names = {
        (False, False): "DejaVuSansMono.ttf",
        (True, False): "DejaVuSansMono-Bold.ttf",
        (False, True): "DejaVuSansMono-Oblique.ttf",
        (True, True): "DejaVuSansMono-BoldOblique.ttf",
    }
    try:
        return {k: ImageFont.truetype(f"{FONT_DIR}/{v}", FONT_SIZE) for k, v in names.items()}
    except OSError as e:
        sys.exit(f"render-screen: {e}: install fonts-dejavu-core")


def render(rows, cols, nrows):
    font = fonts()
    cw = font[(False, False)].getlength("M")
    ch = FONT_SIZE + 4
    width = int(PAD * 2 + cw * cols)
    height = PAD * 2 + ch * nrows
    img = Image.new("RGB", (width, height), DEFAULT_BG)
    draw = ImageDraw.Draw(img)
    for y, row in enumerate(rows[:nrows]):
        for x, (char, (fg, bg, bold, italic, underline)) in enumerate(row[:cols]):
            x0 = PAD + x * cw
            y0 = PAD + y * ch
            if bg != DEFAULT_BG:
                draw.rectangle([x0, y0, x0 + cw, y0 + ch], fill=bg)
            if char != " ":
                draw.text((x0, y0 + 1), char, font=font[(bold, italic)], fill=fg)
            if underline:
                draw.line([x0, y0 + ch - 2, x0 + cw, y0 + ch - 2], fill=fg)
    return img


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", help="tmux capture-pane -e -p output")
    ap.add_argument("png", help="the picture to write")
    ap.add_argument("--cols", type=int, help="columns (default: the widest line)")
    ap.add_argument("--rows", type=int, help="rows (default: every line)")
    args = ap.parse_args()
    try:
        with open(args.capture, encoding="utf-8") as f:
            rows = parse(f.read())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        sys.exit(f"render-screen: {args.capture}: {e}")
    if not rows or not any(rows):
        sys.exit(f"render-screen: {args.capture}: empty capture")
    cols = args.cols or max(len(r) for r in rows)
    nrows = args.rows or len(rows)
    render(rows, cols, nrows).save(args.png)
    print(f"render-screen: {args.png}: {cols}x{nrows} cells")


if __name__ == "__main__":
    main()
