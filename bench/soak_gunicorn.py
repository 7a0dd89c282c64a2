"""gunicorn config for ``bench/soak.py`` only: each worker writes how many greenlets
it holds to ``$SOAK_STATS_DIR/<pid>.greenlets`` every 10 seconds.

A bench-side hook on purpose: the library has no debug endpoint.  Counting walks
the whole heap (``gc.get_objects()``), which holds the worker for a few
milliseconds each time: it shows in the soak's p99, not in its p50.
"""
import gc
import os


def post_worker_init(worker):  # gunicorn's hook name
    import gevent
    import greenlet

    directory = os.environ["SOAK_STATS_DIR"]
    path = os.path.join(directory, f"{os.getpid()}.greenlets")

    def report():
        while True:
            count = sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet))
            with open(path + ".tmp", "w") as handle:
                handle.write(str(count))
            os.replace(path + ".tmp", path)
            gevent.sleep(10)

    gevent.spawn(report)
