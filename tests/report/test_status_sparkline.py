"""`rgt-client status`: a stage's metrics and its first metric's last hour as a sparkline."""
from __future__ import annotations

from rgt_client.status.render import render_status


def _status(metrics=None, history=None):
    st = {"name": "train", "state": "running", "attempt": 1, "duration_s": 600}
    if metrics is not None:
        st["metrics"] = metrics
    out = {"agent": {"running": True, "heartbeat_age_s": 1, "pid": 1}, "health": {},
           "runs": [{"name": "r1", "state": "running", "stages": [st, {"name": "eval", "state": "pending"}]}]}
    if history is not None:
        out["metrics_history"] = history
    return out


def test_metrics_line_with_a_sparkline_of_the_first_metric():
    hist = {"r1": {"stage": "train", "metric": "loss", "step_s": 60, "values": [2.0, 1.5, 1.0, 0.6, 0.3, 0.25]}}
    text = render_status(_status({"loss": 0.2315, "acc": 0.91}, hist), {"host": "box"})
    line = next(l for l in text.splitlines() if "metrics" in l)
    assert "loss 0.2315, acc 0.91" in line
    spark = line.rsplit(" ", 1)[-1]
    assert len(spark) == 6 and spark[0] == "█" and spark[-1] == "▁"     # its own scale: high to low


def test_a_finished_stage_keeps_its_sparkline_from_the_history():
    hist = {"r1": {"stage": "train", "metric": "loss", "step_s": 60, "values": [1.0, 0.5]}}
    text = render_status(_status(None, hist), {"host": "box"})
    assert "metrics loss 0.5  loss █▁" in text


def test_no_metrics_no_line():
    assert "metrics" not in render_status(_status(), {"host": "box"})


def test_a_loss_gone_to_nan_is_shown_as_nan_and_passes_the_status_check():
    """The agent writes a non-finite last value as the text "nan" (JSON has no NaN): the client
    takes it, shows it, and still names any other text in its place as malformed."""
    import pytest

    from rgt_client.errors import ClientError
    from rgt_client.status.statusdata import validate
    status = _status({"loss": "nan", "acc": 0.5})
    assert validate(status, "box") is status
    assert "metrics loss nan, acc 0.5" in render_status(status, {"host": "box"})
    with pytest.raises(ClientError) as bad:
        validate(_status({"loss": "\x1b[31mfine"}), "box")
    assert "runs[0].stages[0].metrics.loss" in str(bad.value) and 'a number or "nan"' in str(bad.value)
