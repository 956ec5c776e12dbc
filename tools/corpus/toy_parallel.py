"""A small process pool for the toy corpus generator: ordered results, progress lines, and a
clean stop on Ctrl-C or SIGTERM (no lingering workers, no traceback per worker)."""

import multiprocessing
import signal
import time


class Progress:
    """Prints "label: done/total": at the end, and every 10 % on stages of 200 items or more."""

    def __init__(self, label, total):
        self.label, self.total, self.done = label, total, 0
        self.step = max(1, total // 10) if total >= 200 else max(1, total)
        self.start = time.time()

    def tick(self):
        self.done += 1
        if self.done % self.step == 0 or self.done == self.total:
            print("  %s: %d/%d (%.0f s)" % (self.label, self.done, self.total,
                                            time.time() - self.start), flush=True)


def _worker_init():
    # Only the main process reacts to Ctrl-C; it then terminates the pool (below), so workers
    # never linger and a terminal interrupt does not print a traceback per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # pool.terminate() sends SIGTERM: die quietly rather than run main's handler.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def parallel_map(function, items, jobs, label):
    """Ordered results of function over items, on `jobs` processes, with progress."""
    progress = Progress(label, len(items))
    results = []
    if jobs == 1 or len(items) < 2:
        for result in map(function, items):
            results.append(result)
            progress.tick()
        return results
    chunk = max(1, min(16, len(items) // (jobs * 8)))
    pool = multiprocessing.Pool(jobs, initializer=_worker_init)
    try:
        for result in pool.imap(function, items, chunksize=chunk):
            results.append(result)
            progress.tick()
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return results
