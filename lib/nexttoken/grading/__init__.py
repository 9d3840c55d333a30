"""Grade exercise notebooks in batch, each submission in its own sandbox.

    python -m nexttoken.grade [options] [--] SUBMISSION.ipynb [...] --out grades.csv

A submission's way through grading runs forward, one stage a module, none calling back into an earlier
one. It is read once, at the start (regular files only, never through a symbolic link; ``read``), and the
grader's own process reads from it, as JSON text where nothing of it runs, the explanation's answer and,
for an LMS export without --chapter, its chapter. It runs in a fresh bubblewrap sandbox (``sandbox``) with a
cgroup and a seccomp filter of its own (``launch``): a fresh Python process, the recorder (``nexttoken.recorder``,
a package of its own: nothing of this package, nor of ``nexttoken.exercises``, is in the sandbox, which shows
only the lesson's library and the recorder), reads the notebook and says which chapter it is; on that
first message the grader decides, once, whether the submission is graded task by task (``decide``: a
chapter we grade, and --chapter's if given; else one row, wrong_chapter or the notebook's problem), and
sends it a work order (``orders``): the tasks' function names, rules and test inputs as data. The recorder
loads the learner's definitions, calls each function on its inputs, and reports only the outputs, as plain
data (``nexttoken.recorder.wire``), in the messages the contract both sides import defines
(``nexttoken.recorder.contract``). Once the runs are over the grader judges their records against the
references (``judge``), which are not in the sandbox, nor the held-out inputs' names and expected outputs,
nor the solutions; printed output is never read. With --held-out the tasks that passed then run again on
their held-out inputs alone, and are judged again. A broken or hostile submission costs only its own tasks
(a hang or crash, the task it happens in; a cell that hangs or crashes is skipped in the next run). One CSV
row per submission and task (``rows``), and grades.csv is rewritten, atomically, after each submission
(``outputs``), so a killed grader keeps the grades already given and ``--resume`` goes on from there.
``batch.grade_one`` is the table of contents of one submission's way: each stage returns there.

    cli.py          the command line: its arguments, and its words for what the library raises
    batch.py        one grading run: the job slots, --resume, a submission through the stages, saving
    read.py         1. a submission's file, snapshotted; its answer and chapter, read as JSON text
    run.py          2. its runs in a sandbox, until every task has a record (``Job``: what a run carries)
    launch.py          the runs' processes: a submission's sandboxes, Python and torch started once in each,
                       every run forked there and ended after it (without bubblewrap: one process a run)
    follow.py          one run followed from the grader's side, message by message (``Follower``)
    decide.py          the decision on a submission, once, from its first run's first message (``Decision``)
    orders.py          what each run records, and the work order sent in
    cases.py           the inputs a task is judged on: those a run sends in and ``judge`` compares against
    protocol.py        the lines of one run, and the order of its messages
    stops.py           what a run that stopped costs: the cell skipped, the task or the submission charged
    judge.py        3. the records judged (the held-out runs' too) -> (status, reason)
    rows.py         4. the grade rows, as the decision says
    outputs.py      5. what a run or a merge writes (grades.csv, gradebook, explanations, exports, report)
    exports.py         the roster's, LMS's and grading services' files, the feedback files
    report.py          the class report (OUT-report.html)
    text.py         the text a submission wrote, made safe to show and written back exactly
    rosters.py      the roster, matched to the files
    lms.py             an LMS's gradebook export as the roster, and the id its downloads' names hold
    assignment.py   --chapter: the assignment's chapter and points; the refusal of a mixed batch's exports
    sandbox/        bubblewrap, cgroups, seccomp, users; policy.py: what a sandbox shows (the allow-list)
    __main__.py     python -m nexttoken.grading
"""
