#!/usr/bin/python3
"""term_after.py - what a command's output set on the caller's terminal,
reset after it ends and before corral's words.

    term_after.py --printf        the attack, as printf(1)'s format
    term_after.py RESULT [WORDS]  check ptyrun.py's RESULT (a JSON file)
    term_after.py RESULT =TEXT    the same, up to TEXT (a shell's, not corral's)

The command printed the attack (every mode below set) and ended: between
the attack's last byte and corral's words ("corral: WORDS", or the end of
the output when there are none) each mode's reset must come.  Prints what
is missing and exits 1 if anything is.
"""
import json, sys

# what a command sets, and the reset corral sends for it
MODES = [
    ("synchronized output", "\033[?2026h", "\033[?2026l"),
    ("alternate screen", "\033[?1049h", "\033[?1047l"),
    ("scroll region", "\033[5;10r", "\0337\033[?69l\033[r\0338"),
    ("left and right margins", "\033[?69h\033[5;20s", "\033[?69l"),
    ("keyboard locked", "\033[2h", "\033[2l"),
    ("reverse video", "\033[?5h", "\033[?5l"),
    ("modifyOtherKeys", "\033[>4;2m", "\033[>4m"),
    ("kitty keyboard protocol", "\033[>1u\033[>31u", "\033[<99u"),
    ("cursor hidden", "\033[?25l", "\033[?25h"),
    ("wrap off", "\033[?7l", "\033[?7h"),
    ("insert", "\033[4h", "\033[4l"),
    ("application cursor keys", "\033[?1h", "\033[?1l"),
    ("application keypad", "\033=", "\033>"),
    ("mouse, X10", "\033[?9h", "\033[?9l"),
    ("mouse, clicks", "\033[?1000h", "\033[?1000l"),
    ("mouse, drags", "\033[?1002h", "\033[?1002l"),
    ("mouse, motion", "\033[?1003h", "\033[?1003l"),
    ("mouse, SGR encoding", "\033[?1006h", "\033[?1006l"),
    ("focus events", "\033[?1004h", "\033[?1004l"),
    ("bracketed paste", "\033[?2004h", "\033[?2004l"),
    ("line drawing", "\033(0", "\033(B"),
    ("shifted out", "\033)0\016", "\017"),
    ("hidden text", "\033[8m", "\033[0m"),
]
ATTACK = "".join(m[1] for m in MODES) + "set"

def main():
    if sys.argv[1] == "--printf":
        print(ATTACK.replace("\033", "\\033").replace("\016", "\\016"), end="")
        return 0
    out = json.load(open(sys.argv[1]))["output"]
    if ATTACK not in out:
        print("the attack is not in the output: %r" % out[-600:])
        return 1
    i = out.rindex(ATTACK) + len(ATTACK)
    j = len(out)
    if len(sys.argv) > 2:
        words = sys.argv[2]
        words = words[1:] if words.startswith("=") else "corral: " + words
        j = out.find(words, i)
        if j < 0:
            print("%r is not after the attack: %r" % (words, out[i:]))
            return 1
    missing = [m[0] for m in MODES if m[2] not in out[i:j]]
    if missing:
        print("left set: %s (after the attack: %r)" % (", ".join(missing), out[i:]))
        return 1
    return 0

sys.exit(main())
