"""Grade exercise notebooks in batch, each submission in its own sandbox.

    python -m nexttoken.grade [options] [--] SUBMISSION.ipynb [...] --out grades.csv

Each submission is read once, at the start (regular files only, never through a symbolic link), and runs in
a fresh bubblewrap sandbox (``sandbox``) with a cgroup and a seccomp filter of its own: a fresh Python
process, the recorder (``nexttoken.recorder``, a package of its own: nothing of this package, nor of
``nexttoken.exercises``, is in the sandbox, which shows only the lesson's library and the recorder), reads
the notebook (the grader parses a submission only as JSON text, to read the explanation's answer and, for an
LMS export without --chapter, its chapter: ``explanations``) and says which chapter it is; the grader sends
it a work order (``orders``): the tasks' function names, rules and test inputs as data. The recorder loads
the learner's definitions, calls each function on its inputs, and reports only the outputs, as plain data
(``nexttoken.recorder.wire``). The grader checks that data and judges it against the references (``judge``),
which are not in the sandbox, nor the held-out inputs' names and expected outputs, nor the solutions;
printed output is never read. One CSV row per submission and task (``csvs``). A broken or hostile submission
costs only its own tasks (a hang or crash, the task it happens in; a cell that hangs or crashes is skipped:
``notebook``), and the CSV is rewritten (atomically) after each submission, so a killed grader keeps the
grades already given and ``--resume`` goes on from there.

    submissions.py  reading the files           runner.py   one recorder run in a sandbox, followed
    sandbox/        bubblewrap, cgroups, seccomp, users; policy.py: what a sandbox shows (the allow-list)
    orders.py       the work order (outside)    judge.py    one task's record -> (status, reason)
    notebook.py     one submission's rows       csvs.py     the CSVs       cli.py  the command line
    assignment.py   --chapter, and the refusal of a mixed batch's exports without it
    exports.py      roster, LMS and feedback files      report.py   the class report (OUT-report.html)
    explanations.py the explanations' answers, for the instructor to mark (OUT-explanations.csv)
"""
