"""A worker's process (ewa.worker starts it): `python -m ewa.worker_main ADDRESS READY_FD`. Apart from
ewa.worker so that the worker runs the `ewa` command without importing the module that calls it."""
import sys

from ewa.cli import run_command
from ewa.worker import serve

if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), run_command)
