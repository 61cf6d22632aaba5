"""Non-finite numbers under other names: a library's validation that refuses NaN/inf values is
the run diverging (or its inputs going bad), not a bug in the check that caught it."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

DIST = ("PyTorch 2.4 torch/distributions/distribution.py _validate_args (\"Expected parameter %s "
        "(%s of shape %s) of distribution %s to satisfy the constraint %s, but found invalid "
        "values:\\n%s\")")
MULTI = ("PyTorch 2.4 aten/src/ATen/native/Distributions.cpp multinomial (\"probability tensor "
         "contains either `inf`, `nan` or element < 0\")")
SKL = ("scikit-learn 1.5 sklearn/utils/validation.py _assert_all_finite (\"Input contains NaN\", "
       "\"Input X contains NaN.\", \"Input contains infinity or a value too large for %r.\")")
MEGATRON = ("Megatron-LM core_r0.8 megatron/core/distributed/param_and_grad_buffer.py "
            "check_for_nan_in_grad (\"Rank %d: found NaN in local grad norm in backward pass before "
            "data-parallel communication collective\")")
NP = "NumPy 1.26 numpy/lib/function_base.py asarray_chkfinite (\"array must not contain infs or NaNs\")"

ROWS = (
    lit("divergence", "but found invalid values",
        "ValueError: Expected parameter loc (Tensor of shape (64, 6)) of distribution Normal(loc: "
        "torch.Size([64, 6]), scale: torch.Size([64, 6])) to satisfy the constraint Real(), but "
        "found invalid values:", DIST, "torch"),
    lit("divergence", "probability tensor contains either `inf`, `nan` or element < 0",
        "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0", MULTI,
        "torch"),
    rx("divergence", r"Input( [A-Za-z_]+)? contains (NaN|infinity)",
       "ValueError: Input X contains NaN.", SKL, (" contains NaN", " contains infinity"), "sklearn"),
    lit("divergence", "found NaN in local grad norm",
        "RuntimeError: Rank 3: found NaN in local grad norm in backward pass before data-parallel "
        "communication collective. Device: 3, node: gpu-node-7", MEGATRON, "megatron"),
    lit("divergence", "array must not contain infs or NaNs",
        "ValueError: array must not contain infs or NaNs", NP, "numpy"),
)
