"""bash's own words for a script that is wrong, whatever the script runs: a syntax error, a
variable `set -u` finds unset, a redirect to an empty or split word, a file that is no
program. The job's own code (code_error); a CR in the script says it otherwise, and the CR
rules rank first (builtin_rules: `$'\\r'`, ^M)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

PARSE = "bash 5.2 parse.y report_syntax_error (\"syntax error near unexpected token `%s'\", \"syntax error: unexpected end of file\")"
SUBST = "bash 5.2 subst.c err_unboundvar (\"%s: unbound variable\")"
REDIR = "bash 5.2 redir.c redirection_error (\"%s: ambiguous redirect\")"
EXEC = "bash 5.2 execute_cmd.c shell_execve (\"%s: cannot execute binary file\", exit 126)"

ROWS = (
    rx("code_error", r"syntax error near unexpected token [`']",
       "train.sh: line 12: syntax error near unexpected token `fi'", PARSE,
       ("syntax error near unexpected token",), "bash"),
    lit("code_error", "syntax error: unexpected end of file",
        "train.sh: line 40: syntax error: unexpected end of file", PARSE, "bash"),
    lit("code_error", ": unbound variable", "train.sh: line 3: DATA_DIR: unbound variable", SUBST,
        "bash"),
    lit("code_error", ": ambiguous redirect", "train.sh: line 4: $OUT: ambiguous redirect", REDIR,
        "bash"),
    lit("code_error", ": cannot execute binary file",
        "train.sh: line 9: ./tool: cannot execute binary file: Exec format error", EXEC, "bash"),
)
