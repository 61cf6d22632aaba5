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

# bash names a command or file whose name ends in the script's CR ("ci/run.sh\\r: No such file
# or directory"); a terminal or a log viewer shows that CR as a line break, so the message's
# tail stands alone at the start of a line: ": No such file or directory", ": command not found".
BASH_CR = ("bash 5.2 execute_cmd.c (\"%s: command not found\"), shell.c / general.c file_error "
           "(\"%s: %s\" with strerror); the CR that ends the name returns the cursor")

ROWS += found_via(
    ("wave4/cases/crlf_script/b-runner-images-14319-windows-bash-crlf.log",),
    rx("crlf_script", r"^: (No such file or directory|command not found)$",
       ": command not found", BASH_CR, (": No such file or directory", ": command not found"),
       "bash"),
)
