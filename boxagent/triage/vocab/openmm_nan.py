"""A molecular dynamics run blowing up, in OpenMM's words: the integrator's check "Particle
coordinate is NaN" (7.x: "nan"), the app layer's reporters "Energy is NaN." / "Particle position
is NaN" (and their infinite forms). The simulation diverged (a time step too large, a structure
not minimized, clashing constraints, wrong box vectors: OpenMM's FAQ): its loss=nan, not a bug in
the check that caught it. Read after a field case (a run right after minimization) ended with
the first and the engine called it a code error."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

OPENMM = ("OpenMM 8.1 platforms (ContextImpl / CudaContext / OpenCLContext: \"Particle coordinate is "
          "NaN.  For more information, see https://github.com/openmm/openmm/wiki/Frequently-Asked-"
          "Questions#nan\"; 7.x: \"Particle coordinate is nan\"), wrappers/python/openmm/app/"
          "statedatareporter.py (\"Energy is NaN.\", \"Energy is infinite.\"), app/pdbfile.py "
          "writeModel (\"Particle position is NaN\", \"Particle position is infinite\")")

ROWS = found_via(
    ("wave6/cases/divergence/e-openmm-2937-particle-coordinate-is-nan-after-minimization.log",),
    rx("divergence", r"Particle (coordinate|position) is ([Nn]a[Nn]|infinite)|Energy is (NaN|"
       r"infinite)\.",
       "openmm.OpenMMException: Particle coordinate is NaN.  For more information, see "
       "https://github.com/openmm/openmm/wiki/Frequently-Asked-Questions#nan", OPENMM,
       ("Particle coordinate is ", "Particle position is ", "Energy is "), "openmm"),
)
