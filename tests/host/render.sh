#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# scripts/render-screen.py, which draws the demo's `scx_esn top` captures for
# the docs, on captures whose every pixel we know:
#   1. the picture is as large as the cells (padding + columns x cell width);
#   2. colours land where the escapes put them: a 256-colour background
#      cell, a reverse-video cell (its foreground becomes its background)
#      and the default background;
#   3. a cursor-movement escape (not what capture-pane -e emits) is an
#      error naming it, not a wrong picture, and so is an empty capture.
#
# Usage: tests/host/render.sh   (needs Debian's python3-pil, fonts-dejavu-core)
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init render
py=/usr/bin/python3
$py -c 'import PIL' 2>/dev/null || die "python3-pil is missing (apt-get install python3-pil)"
render=$repo/scripts/render-screen.py

# Row 0: "ab" on 256-colour 21 (0,0,255), then "cd" reverse video with a red
# (205,0,0) foreground. Row 1: plain text. 10 columns wide.
printf '\033[48;5;21mab\033[0m\033[31;7mcd\033[0m\nplain text\n' >"$work/render-known.ansi"
out=$($py "$render" "$work/render-known.ansi" "$work/render-known.png" 2>&1) || true
# pixel COLUMN ROW DX DY: the colour DX,DY pixels into cell COLUMN,ROW.
pixels=$($py - "$work/render-known.png" <<'PY'
import sys
from PIL import Image, ImageFont
img = Image.open(sys.argv[1]).convert("RGB")
font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 15)
cw, ch, pad = font.getlength("M"), 15 + 4, 10
def cell(col, row):  # a corner pixel, clear of the glyph
    return img.getpixel((int(pad + col * cw + 1), int(pad + row * ch + 1)))
expect_w = int(pad * 2 + cw * 10)
expect_h = pad * 2 + ch * 2
print("size", img.size == (expect_w, expect_h), f"{img.size} vs {(expect_w, expect_h)}")
print("colours", cell(0, 0) == (0, 0, 255) and cell(2, 0) == (205, 0, 0)
      and cell(5, 1) == (0x1C, 0x1C, 0x1C), cell(0, 0), cell(2, 0), cell(5, 1))
PY
) || pixels="size False $out; colours False"
ok=0
grep -q '^size True' <<<"$pixels" && ok=1
check "1 size from the cells" "$ok" "$out; $(grep '^size' <<<"$pixels")"
ok=0
grep -q '^colours True' <<<"$pixels" && ok=1
check "2 colours where the escapes put them" "$ok" "$(grep '^colours' <<<"$pixels")"

printf 'top\033[5;1Hmoved\n' >"$work/render-move.ansi"
: >"$work/render-empty.ansi"
rm -f "$work/render-move.png" "$work/render-empty.png"
rc_move=0 rc_empty=0
move=$($py "$render" "$work/render-move.ansi" "$work/render-move.png" 2>&1) || rc_move=$?
empty=$($py "$render" "$work/render-empty.ansi" "$work/render-empty.png" 2>&1) || rc_empty=$?
ok=0
[[ $rc_move == 1 && $move == *'[5;1H'* && $rc_empty == 1 && $empty == *'empty capture'* &&
	! -e $work/render-move.png && ! -e $work/render-empty.png ]] && ok=1
check "3 what it cannot draw is an error" "$ok" "exit $rc_move: $move; exit $rc_empty: $empty"

host_result
