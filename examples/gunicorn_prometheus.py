"""gunicorn settings for Prometheus metrics summed over several workers.

Use it with ``-c``::

    FLASK_A2A_METRICS_PATH=/metrics gunicorn -c examples/gunicorn_prometheus.py \\
        -k gevent -w 4 -b 127.0.0.1:8000 examples.echo_agent:app

prometheus-client's multiprocess mode needs ``PROMETHEUS_MULTIPROC_DIR`` set
before it is first imported (here: before the workers start; a2a_flask imports
it in ``init_app``), an empty directory at each start, and word of each worker
that exits, so that its open streams stop counting.
"""
import os
import shutil

# Set here, in the master, so that every worker inherits it.
METRICS_DIR = os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", "/tmp/a2a-prometheus")


def on_starting(server):
    """The numbers of a previous run are stale: start from an empty directory."""
    shutil.rmtree(METRICS_DIR, ignore_errors=True)
    os.makedirs(METRICS_DIR)


def child_exit(server, worker):
    """A worker exited: its live gauges (open streams) no longer count."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
