"""The bash guard: refuse catastrophic commands before anything runs (REQ-BASH-007).

Checked in both modes, with or without the kernel sandbox (REQ-BASH-009): in
Unrestricted mode nothing else stands between the model and ``rm -rf ~``.
This is a guard rail against mistakes and against spellings that slip past a
reader, **not** a security boundary: the kernel sandbox is the boundary in
Restricted mode, and a determined program (a Python script, a Makefile) can
always do what bash text does not show.

What it refuses:

* recursive deletes (``rm -r``, ``find … -delete`` or ``-exec rm``, ``rsync
  --delete`` / ``--remove-source-files``, ``mv`` away) of ``/`` or a
  top-level directory, any home directory (``~``, ``~user``, ``$HOME`` …) or
  a parent of one, the working directory or a parent of it, anything in
  ``.git``, or a glob or brace that can match those;
* ``git add`` / ``git stage`` of everything (``-A``, ``--all`` and its
  abbreviations, ``.``, ``:/``, ``*``, the working directory by any name);
* ``git push`` that overwrites or deletes remote history (``--force`` and
  abbreviations, ``-f``, ``+ref``, ``:ref``, ``--delete``/``-d``,
  ``--mirror``, ``--prune``, and the same through ``git -c`` config);
* anything too dynamic to judge that could be one of these (``eval`` of
  computed text, ``curl … | sh``, a command name or script that only exists
  at run time): refused with why and how to write it plainly.

How: the command is parsed with tree-sitter-bash (a real bash grammar) and
then *interpreted* far enough to see what bash will run. Each word is
expanded the way bash expands it — quote and escape removal, ANSI-C
``$'…'``, brace expansion, ``~``/``~user``, ``$HOME``/``${HOME…}``,
``$PWD``/``$(pwd)``, variables assigned earlier in the same command, word
splitting of unquoted expansions — and each path is normalised (``..``,
``//``, trailing ``/``) before it is judged. Commands are followed wherever
they go: wrappers (``sudo``, ``env``, ``nice``, ``timeout``, ``command``,
``exec`` …), aliases, functions (checked again with the arguments of each
call), ``for`` loops, ``bash -c`` / ``sh -c`` / ``su -c`` / ``watch`` /
``trap`` / ``script -c`` / ``ssh`` strings to any depth (with ``$0``,
``$1``… bound), ``eval``, here-strings, here-documents, pipes (through
``tee``/``cat``) and process substitutions into a shell, ``/dev/stdin``,
scripts written earlier in the same command, ``xargs`` (with what the
producer writes), ``find -exec``, ``cd``, ``git -c alias.*``, ``git config
alias.*`` and ``GIT_CONFIG_KEY_n``; code given to python/perl/ruby/node that
hands a string to a shell or deletes a tree is checked by a heuristic.
Where a target cannot be known, the check denies; the work per check is
bounded (a loop of plain names takes one pass, a huge brace is one unknown
word, a step budget ends the rest).
Regexes over the raw text would either miss ``r\\m -rf ~`` or refuse
``echo "rm -rf /"``.

The package, one job a module: ``values`` (what the walk knows of a word,
the environment, the two verdicts), ``words`` (the lexer and bash's
expansions, and the grammar's nodes regrouped into bash's words),
``places`` (which paths a command must not delete), ``options`` (GNU option
spellings), ``walk`` (the tree walk: shells, wrappers, functions, pipes,
scripts, interpreters), ``rules/`` (what each command that can do damage is
judged by, found through one explicit table, ``rules.RULES``) and
``check`` (the entry points). Only the bash tool imports this package (an
import contract says so).
"""

from phoenix_nb.tools.bash_guard.check import check_command, expand_word

__all__ = ["check_command", "expand_word"]
