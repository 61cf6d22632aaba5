"""`logs`: one rule for what a line is (LF ends it; a progress bar's CR redraws are one line, the
last), in the agent's `logs -n` and in the client's --follow; bounded reads on the box."""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

from boxagent.daemon import logtail
from rgt_client.jobs.logview import FollowView, LogSink
from tests.client.conftest import needs_daemon, stop_daemon
from tests.client.test_e2e import install

PY = sys.executable
# what tqdm writes: CR + the bar, again and again, then LF when the epoch ends
TQDM = ("import sys, time\n"
        "for e in (1, 2):\n"
        "    for i in range(0, 101, 5):\n"
        "        sys.stdout.write('\\r%3d%%|' % i + '#' * (i // 10) + '| ' + str(i) + '/100'); sys.stdout.flush()\n"
        "    sys.stdout.write('\\n')\n"
        "    print('Epoch %d/200 loss 0.%d' % (e, 9 - e), flush=True)\n"
        "    print('saved ckpt/epoch_%d.pt' % e, flush=True)\n"
        "for i in range(0, 60, 10):\n"
        "    sys.stdout.write('\\r%3d%%|bar| %d/100' % (i, i)); sys.stdout.flush()\n")


def test_tail_takes_the_last_redraw_of_each_line(tmp_path):
    log = tmp_path / "x.log"
    log.write_bytes(b"Epoch 1/200 loss 0.8\n" + b"".join(b"\r%3d%%|bar|" % i for i in range(101)) +
                    b"\nsaved ckpt/e1.pt\r\n" + b"\r 10%|bar|\r 20%|bar|")
    assert logtail.tail(str(log), 3) == b"100%|bar|\nsaved ckpt/e1.pt\n 20%|bar|\n"
    assert logtail.tail(str(log), 10).startswith(b"Epoch 1/200 loss 0.8\n")


def test_tail_of_a_100mb_single_line_log_reads_a_bounded_end(tmp_path):
    log = tmp_path / "huge.log"
    with open(log, "wb") as fh:
        fh.write(b"first line\n")
        for _ in range(100):
            fh.write(b"x" * (1 << 20))
    t0 = time.monotonic()
    out = logtail.tail(str(log), 50)
    assert time.monotonic() - t0 < 2.0
    assert out.startswith(b"[rgt: fewer lines than asked") and len(out) < 2 * logtail.LINE_MAX
    assert out.rstrip(b"\n").endswith(b"x" * 100) and logtail.CUT in out


def test_follow_view_shows_lines_by_the_same_rule():
    out = io.BytesIO()
    view = FollowView(LogSink(raw=False, out=out), live=False)
    for chunk in (b"Epoch 1\n\r 10%|", b"bar|\r 50%|bar|\r100%|bar|\n", b"saved \x1b]52;c;x\x07ckpt\n", b"\r 5%"):
        view.feed(chunk)
    view.end()
    assert out.getvalue() == b"Epoch 1\n100%|bar|\nsaved \\x1b]52;c;x\\x07ckpt\n 5%\n"


def test_follow_view_raw_passes_the_stream_through():
    out = io.BytesIO()
    view = FollowView(LogSink(raw=True, out=out), live=True)
    view.feed(b"\r 10%\x1b[1m|bar|\r 20%")
    view.end()
    assert out.getvalue() == b"\r 10%\x1b[1m|bar|\r 20%\n"


@pytest.fixture(scope="module")
def tqdm_box(sshd, tmp_path_factory):
    from tests.client.conftest import Cli
    base = tmp_path_factory.mktemp("logs")
    home = base / "logs home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RGT_CLIENT_CONFIG_DIR", str(base / "client-config"))
        rgt = Cli(sshd.config)
        install(rgt, home)
        (base / "bar.py").write_text(TQDM)
        big = "import sys\nsys.stdout.write('x' * (100 << 20))\n"
        (base / "big.py").write_text(big)
        rgt("run", "rgt-box", "--home", str(home), "--name", "bars", "--workdir", str(base), "--", PY, "bar.py")
        rgt("run", "rgt-box", "--home", str(home), "--name", "oneline", "--workdir", str(base), "--", PY, "big.py")
        for run in ("bars", "oneline"):
            res = rgt("watch", "rgt-box", run, "--every", "0.2s", "--max-wait", "60s", "--home", str(home))
            assert res.exit_code == 0, res.output
        yield rgt, home
    stop_daemon(home)


@pytest.mark.ssh
@needs_daemon
def test_logs_n_counts_a_tqdm_bar_as_one_line(tqdm_box):
    rgt, home = tqdm_box
    res = rgt("logs", "rgt-box", "bars", "-n", "5", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert res.stdout == ("saved ckpt/epoch_1.pt\n100%|##########| 100/100\nEpoch 2/200 loss 0.7\n"
                          "saved ckpt/epoch_2.pt\n 50%|bar| 50/100\n")


@pytest.mark.ssh
@needs_daemon
def test_logs_of_a_100mb_single_line_answers_at_once(tqdm_box):
    rgt, home = tqdm_box
    log = next(Path(home, "runs", "oneline", "logs").glob("*.log"))
    assert log.stat().st_size >= 100 << 20
    t0 = time.monotonic()
    res = rgt("logs", "rgt-box", "oneline", "-n", "50", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert time.monotonic() - t0 < 15            # it read all 100 MB for 95 s, then "unreachable"
    assert len(res.stdout) < 2 * logtail.LINE_MAX and res.stdout.rstrip("\n").endswith("x" * 1000)


@pytest.mark.ssh
@needs_daemon
def test_logs_n_0_prints_every_line_as_docs_jobs_md_says(tqdm_box):
    rgt, home = tqdm_box
    res = rgt("logs", "rgt-box", "bars", "-n", "0", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert res.stdout == ("100%|##########| 100/100\nEpoch 1/200 loss 0.8\nsaved ckpt/epoch_1.pt\n"
                          "100%|##########| 100/100\nEpoch 2/200 loss 0.7\nsaved ckpt/epoch_2.pt\n 50%|bar| 50/100\n")
