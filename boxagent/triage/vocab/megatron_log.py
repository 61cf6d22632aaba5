"""Megatron-LM's (and Megatron-DeepSpeed's) training log line: one line per logged iteration with
`lm loss`, `loss scale` and `grad norm`. A grad norm of nan or inf is a step whose gradients are
not finite: the run may go on (the step is skipped), so it is a warning, not a failure."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

MEGATRON = ("Megatron-LM core_r0.8 megatron/training/training.py training_log (log_string += \" grad "
            "norm: {:.3f} |\"; \" number of nan iterations: {:3d} |\"); Megatron-DeepSpeed "
            "megatron/training.py training_log, same format")

ROWS = found_via(
    ("wave4/cases/divergence/b-megatron-ds-396-grad-norm-nan-no-loss.log",),
    rx("divergence", r"\| grad norm: (nan|inf|-inf) \|",
       " iteration      100/  500000 | consumed samples:        12800 | elapsed time per iteration "
       "(ms): 1021.3 | learning rate: 1.500E-04 | global batch size:   128 | lm loss: 7.271484E+00 "
       "| loss scale: 1.0 | grad norm: nan | number of skipped iterations:   0 | number of nan "
       "iterations:   0 |", MEGATRON, ("| grad norm: nan", "| grad norm: inf", "| grad norm: -inf"),
       "megatron", True, "warning"),
)
