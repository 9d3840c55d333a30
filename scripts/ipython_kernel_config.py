# The course's kernel configuration: scripts/setup.sh copies it to .venv/etc/ipython/, where IPython reads
# it (sys.prefix/etc/ipython) in every kernel that runs on .venv's Python: nbval's, nbclient's, Jupyter
# Book's, JupyterLab's and the grader's.
#
# ipykernel 7.4 logs "Kernel is running over TCP without encryption ..." at every start on a TCP transport
# without CurveZMQ keys, whatever the address, and none of the clients here (nbval, nbclient, Jupyter Book)
# provisions keys. Their kernels listen on 127.0.0.1 (jupyter_client's default ip), which only this
# machine reaches, so the warning says nothing here and drowned out real ones (issue 27 counted 16 in a
# test run). This drops that one message; every other log line of the kernel, and every warning code
# writes to a cell, stays.
import logging


class _NoTcpEncryptionWarning(logging.Filter):
    def filter(self, record):
        return "running over TCP without encryption" not in record.getMessage()


logging.getLogger("IPKernelApp").addFilter(_NoTcpEncryptionWarning())
