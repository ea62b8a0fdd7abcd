"""docs/walkthrough.md, run: every `$ command` it shows, against a fresh demo sandbox, in the
page's order, on a terminal of the page's width; what each printed compared with what the page
shows (tests/cli/test_walkthrough.py), or written into the page (`--update`).

    .venv/bin/python tests/support/walkthrough.py            # compare; exit 1 and a diff if not equal
    .venv/bin/python tests/support/walkthrough.py --update   # rewrite the page's outputs from a run

A shown block is a fenced block whose lines start with `$ ` (a command) followed by what it
printed, stdout and stderr as a terminal shows them. Each command runs in bash under a pseudo-
terminal `COLUMNS` wide (`elastic-audit` is this checkout's `python -m forensics`), in one
working directory, with the demo's environment file sourced; a block that the page says runs at
a given width (`<!-- walkthrough: columns=160 -->` before it) gets that width. A block the page
marks `<!-- walkthrough: not run: REASON -->` is left alone, and the reason is listed.

Normalised before comparing, and only these, because they differ from run to run: loopback ports,
the sandbox's temporary directory, durations (`0.1 s`), the request counts of `-v`'s `calls:` line,
where the tool is installed, and what the demo derives from now (`--add-incident`: times, the new
execution's name, the guard's metrics of time).
"""

from __future__ import annotations

import argparse
import difflib
import fcntl
import http.server
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "walkthrough.md"
COLUMNS = 100  # the page's "100-column terminal"
FENCE = re.compile(r"^(`{3,})[\w-]*\s*$")
DIRECTIVE = re.compile(r"^<!-- walkthrough: (.*?) -->$")


@dataclass
class Command:
    line: str  # without the "$ "
    shown: list[str] = field(default_factory=list)  # what the page shows it printed


@dataclass
class Block:
    start: int  # index of the first line inside the fence
    end: int  # index of the closing fence
    commands: list[Command]
    columns: int = COLUMNS
    not_run: str | None = None
    unordered: bool = False  # lines that concurrent work prints in any order: compared sorted
    after_stop: bool = False  # runs once the demo has stopped (its variables left behind)
    cwd: str | None = None  # a directory of the repository, copied, to run in
    notify: bool = False  # ELASTIC_AUDIT_NOTIFY set to a loopback webhook receiver


def blocks(lines: list[str]) -> list[Block]:
    """The page's shown blocks, with the directive that precedes each (if any)."""
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        close = next(j for j in range(i + 1, len(lines)) if lines[j] == m.group(1))
        body = lines[i + 1 : close]
        if body and body[0].startswith("$ "):
            cmds: list[Command] = []
            for line in body:
                if line.startswith("$ "):
                    cmds.append(Command(line[2:]))
                else:
                    cmds[-1].shown.append(line)
            block = Block(i + 1, close, cmds)
            k = i - 1
            while k >= 0 and lines[k].strip() == "":
                k -= 1
            d = DIRECTIVE.match(lines[k]) if k >= 0 else None
            if d:
                _directives(block, d.group(1))
            out.append(block)
        i = close + 1
    return out


def _directives(block: Block, text: str) -> None:
    """`<!-- walkthrough: columns=160; notify -->`: how the block before which it stands runs."""
    for part in (p.strip() for p in text.split(";")):
        key, _, value = part.partition("=")
        if key.startswith("not run"):
            block.not_run = part[len("not run") :].lstrip(": ") or "unsaid"
        elif key == "columns":
            block.columns = int(value)
        elif key == "cwd":
            block.cwd = value
        elif part in ("unordered", "after the demo stops", "notify"):
            block.unordered |= part == "unordered"
            block.after_stop |= part == "after the demo stops"
            block.notify |= part == "notify"
        else:
            raise ValueError(f"unknown walkthrough directive {part!r}")


class Receiver:
    """A loopback webhook receiver (the guard's notifications): answers 200 to every POST."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/walkthrough"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- running ---------------------------------------------------------------------------------


CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>78]")


def terminal_text(raw: bytes) -> list[str]:
    """The lines a terminal is left showing after `raw`: a minimal screen that follows what the
    tool's progress display (rich) sends — carriage return, cursor up, erase line — and drops
    colours; a transient progress bar or spinner leaves nothing, as on a real terminal."""
    screen: list[str] = [""]
    row = col = 0
    text = raw.decode("utf-8", "replace")
    pos = 0
    while pos < len(text):
        m = CSI.match(text, pos)
        if m:
            arg, cmd = m.group(1) or "", m.group(2)
            n = int(arg) if arg.isdigit() else 1
            if cmd == "A":
                row = max(0, row - n)
            elif cmd == "K":
                line = screen[row]
                screen[row] = "" if arg == "2" else line[:col] if arg in ("", "0") else line
            elif cmd == "G":
                col = n - 1
            pos = m.end()
            continue
        ch = text[pos]
        pos += 1
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
            col = 0
            if row == len(screen):
                screen.append("")
        elif ch == "\x1b" or ch in "\x07\x08":
            continue
        else:
            line = screen[row].ljust(col)
            screen[row] = line[:col] + ch + line[col + 1 :]
            col += 1
    lines = list(screen)  # trailing spaces kept: a diff's context line is one space
    while lines and lines[-1] == "":
        lines.pop()
    return lines


class Session:
    """One shell session of the page: the demo sandbox, its environment, a working directory."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="walkthrough-"))
        self.env_file = self.home / "sandbox.env"
        bin_dir = self.home / "bin"
        bin_dir.mkdir()
        tool = bin_dir / "elastic-audit"
        tool.write_text(
            f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m forensics "$@"\n'
        )
        tool.chmod(0o755)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ELASTIC_AUDIT", "LOKI_", "FLYTE", "AWS_", "COLUMNS", "PYTEST"))
        }
        self.env.update(
            PATH=f"{bin_dir}:{os.environ['PATH']}",
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / "config"),
            XDG_STATE_HOME=str(self.home / "state"),
            TERM="xterm",
            LC_ALL="C.UTF-8",
        )
        self.demo = subprocess.Popen(
            [str(tool), "demo", "--keep-running", "--env-file", str(self.env_file),
             "--no-progress", "-o", "json"],
            cwd=self.home, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 180
        while not self.env_file.exists():
            if self.demo.poll() is not None or time.monotonic() > deadline:
                err = self.demo.stderr.read().decode() if self.demo.stderr else ""
                raise RuntimeError(f"the demo did not start: {err[-2000:]}")
            time.sleep(0.2)
        time.sleep(0.5)  # the file is written whole before the servers are announced

    def workdir(self, block: Block) -> Path:
        """Where the block's commands run: the session's directory, or a copy of `cwd`."""
        if block.cwd is None:
            return self.home
        target = self.home / block.cwd.strip("/").replace("/", "-")
        if not target.exists():
            shutil.copytree(ROOT / block.cwd, target, symlinks=True)
        return target

    def run(self, command: str, block: Block, notify: str | None = None) -> list[str]:
        """`command` in bash on a pseudo-terminal as wide as the block says: what it shows."""
        script = f". {self.env_file} && {command}"
        env = dict(self.env, ELASTIC_AUDIT_NOTIFY=notify) if notify else self.env
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, block.columns, 0, 0))
        proc = subprocess.Popen(
            ["bash", "-c", script], cwd=self.workdir(block), env=env, stdin=follower,
            stdout=follower, stderr=follower, start_new_session=True,
        )  # fmt: skip
        os.close(follower)
        raw = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the terminal closed: every process on it has ended
                    break
                if not chunk:
                    break
                raw += chunk
            elif proc.poll() is not None:
                break
        proc.wait(timeout=600)
        os.close(leader)
        return terminal_text(raw)

    def stop_demo(self) -> None:
        """Ctrl-C to the demo, as its user would: the sandbox and its files go."""
        if self.demo.poll() is None:
            os.killpg(self.demo.pid, signal.SIGINT)
            try:
                self.demo.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.demo.pid, signal.SIGKILL)
                self.demo.wait()

    def close(self) -> None:
        self.stop_demo()
        shutil.rmtree(self.home, ignore_errors=True)


# -- comparing -------------------------------------------------------------------------------


def _varies() -> list[tuple[re.Pattern[str], str]]:
    today = {time.strftime(f, time.gmtime(time.time() + d * 86400)) for d in (-1, 0) for f in ("%Y-%m-%d", "%m-%d")}  # fmt: skip
    days = "|".join(sorted(today))
    venv = re.escape(str(Path(sys.prefix)))
    return [
        (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
        (re.compile(r"/tmp/(elastic-audit|walkthrough)-[A-Za-z0-9_]+"), "/tmp/TMPDIR"),
        (re.compile(r"\b\d+\.\d+ s\b"), "N.N s"),
        # where the tool is installed: the page shows one such place
        (re.compile(rf"({venv}|{re.escape(SHOWN_VENV)})"), "VENV"),
        # what the demo derives from now (`--add-incident`, a guard run's window end)
        (re.compile(rf"\b({days})[T ]\d\d:\d\d:\d\d(\.\d+)?Z?"), "NOW"),
        (re.compile(r"gs1:production:n[0-9a-f]{19}\b"), "gs1:production:NEW-INCIDENT"),
        (re.compile(r"^(elastic_audit_(last_complete_scan_timestamp|scan_duration)_seconds) \S+$"),
         r"\1 N"),
        # -v's request counts: S3's differs between runs of the same scan against the same
        # sandbox (10 and 11 seen; the scan's reads are concurrent), Admin's may as well
        (re.compile(r"(Flyte Admin|S3) \d+ \("), r"\1 N ("),
    ]  # fmt: skip


def normalised(lines: list[str], unordered: bool = False) -> list[str]:
    varies = _varies()
    out = []
    for line in lines:
        for pattern, replacement in varies:
            line = pattern.sub(replacement, line)
        out.append(line)
    while out and out[-1] == "":
        out.pop()  # the blank line between two commands of a block
    return sorted(out) if unordered else out


def _run_block(
    session: Session, block: Block, receiver: Receiver | None
) -> tuple[list[str], list[str]]:
    """The block's new text (each command and what it printed) and its differences."""
    body: list[str] = []
    diff: list[str] = []
    for i, cmd in enumerate(block.commands):
        printed = session.run(cmd.line, block, receiver.url if receiver and block.notify else None)
        trailing = _blank_tail(cmd.shown)
        want, got = normalised(cmd.shown, block.unordered), normalised(printed, block.unordered)
        # what the page shows stays when it equals the run: --update changes only what differs
        kept = cmd.shown[: len(cmd.shown) - trailing] if want == got else _as_shown(printed)
        last = i == len(block.commands) - 1
        body += [f"$ {cmd.line}", *kept, *([""] * (0 if last else trailing))]
        if want != got:
            diff += [f"--- line {block.start + 1}: $ {cmd.line}"]
            diff += list(difflib.unified_diff(want, got, "page", "run", lineterm="", n=1))
    return body, diff


# Where the page says the tool is installed: a run's own install path is written as this, so the
# page reads the same from any checkout (and `_varies` maps both back to VENV).
SHOWN_VENV = "/home/me/elastic-audit/.venv"


def _as_shown(printed: list[str]) -> list[str]:
    venv = str(Path(sys.prefix))
    return [line.replace(venv, SHOWN_VENV) for line in printed]


def _blank_tail(lines: list[str]) -> int:
    n = 0
    while n < len(lines) and lines[len(lines) - 1 - n] == "":
        n += 1
    return n


def run_page(text: str) -> tuple[list[str], list[str], list[tuple[int, str]]]:
    """Run every shown block of `text`: the page rewritten with what each command printed, the
    differences (unified diff lines, empty when the page is true) and the blocks not run."""
    lines = text.split("\n")
    shown = blocks(lines)
    skipped = [(b.start, b.not_run) for b in shown if b.not_run is not None]
    runnable = [b for b in shown if b.not_run is None]
    results: dict[int, list[str]] = {}
    diff: list[str] = []
    session = Session()
    receiver = Receiver()
    try:
        for block in [b for b in runnable if not b.after_stop]:
            results[block.start], d = _run_block(session, block, receiver)
            diff += d
        session.stop_demo()
        for block in [b for b in runnable if b.after_stop]:
            results[block.start], d = _run_block(session, block, receiver)
            diff += d
    finally:
        receiver.close()
        session.close()
    new = list(lines)
    for block in reversed(shown):  # from the end: earlier indices stay valid
        if block.start in results:
            new[block.start : block.end] = results[block.start]
    return new, diff, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the page's outputs")
    args = parser.parse_args(argv)
    new, diff, skipped = run_page(PAGE.read_text())
    for start, reason in skipped:
        print(f"not run: block at line {start + 1}: {reason}", file=sys.stderr)
    if args.update:
        PAGE.write_text("\n".join(new))
        print(f"{PAGE.relative_to(ROOT)}: rewritten ({len(diff)} diff line(s) before)")
        return 0
    print("\n".join(diff) or "docs/walkthrough.md equals the run")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
