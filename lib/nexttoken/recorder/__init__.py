"""What runs inside the grader's sandbox, beside a learner's code: the whole of it, and nothing else of the
grader or the exercises. It imports only torch and the lesson's library (tests/grading/test_boundary.py).

    python -m nexttoken.recorder NOTEBOOK CHAPTER --out-fd 3    (how the grader starts it: ``main``)

    main.py      the recorder: reads its work order, runs the notebook's definitions, records outcomes
    zygote.py    the sandbox's first process: Python and torch imported once, each run forked from it
    notebook.py  reading the notebook file: its code cells, its chapter, when each cell ran
    cells.py     one cell's source as the grader runs it: IPython as Python, its definitions, newer syntax
    kernel.py    the cells run as the learner's kernel ran them (``Kernel``), and what a task's row notes
    jupyter.py   the names a Jupyter kernel gives a notebook (display, get_ipython, In, Out), %%writefile
    calling.py   calling a function on its inputs under the task's rules (a notebook's check() too)
    watches.py   the checks of how a function works, which only watching it run can tell
    contract.py  the whole contract both sides import: the command line, the stdin framing, the line encoding,
                 every message's kind and keys, the notebook message, the notes, the outcome kinds, the limits
    wire.py      the one data format between the sandbox and the grader, both ways, within those limits
    words.py     counts in words ("1 row", "3 rows"), for both sides
    stand_in.py  what ``nexttoken.exercises`` is inside the sandbox: chapters with no tasks
"""
