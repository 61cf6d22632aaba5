"""A script with Windows line endings as the shells the structural CRLF rules do not cover say
it: zsh names the interpreter with its CR shown as ^M, fish says so in words."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

ZSH = "zsh 5.9 Src/exec.c execute (zerr(\"%s: bad interpreter: %s: %e\", ...), the CR printed as ^M by nicechar)"
FISH = ("fish 3.0 src/postfork.cpp (\"The file uses windows line endings (\\r\\n). Run dos2unix or "
        "similar to fix it.\"); fish 3.1+ src/postfork.cpp / 4.0 src/fork_exec/postfork.rs "
        "(\"Failed to execute process '%s':  The file uses Windows line endings (\\r\\n).\")")

ROWS = found_via(
    ("cases/crlf_script/mindaro-5-bad-interpreter-bash-ctrl-m.log",),
    rx("crlf_script", r"bad interpreter: [^ :]*\^M: ",
       "zsh: ./local-process-quickstart.sh: bad interpreter: /bin/bash^M: no such file or directory",
       ZSH, ("bad interpreter: ",), "zsh"),
) + found_via(
    ("cases/crlf_script/dimension-ui-2-fish-windows-line-endings.log",),
    rx("crlf_script", r"The file uses [Ww]indows line endings",
       "exec: Failed to execute process './run.sh':  The file uses Windows line endings (\\r\\n). Run "
       "dos2unix or similar to fix it.", FISH,
       ("The file uses Windows line endings", "The file uses windows line endings"), "fish"),
)
